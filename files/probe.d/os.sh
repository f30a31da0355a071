probe_os() {
    emit os-release 0 "$(cat /etc/os-release 2>/dev/null)"
    emit uname 0 "$(uname -m)"
}
