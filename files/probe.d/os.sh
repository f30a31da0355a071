# The os section: writes os-release, uname; facts/sections/os_release.py parses them
# (the document's keys: `os`; docs/facts.md).
probe_os() {
    emit os-release 0 "$(cat /etc/os-release 2>/dev/null)"
    emit uname 0 "$(uname -m)"
}
