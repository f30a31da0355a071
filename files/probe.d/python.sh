# The python section: writes python, python-alt, venv-python; facts/sections/python.py parses them
# (the document's keys: `python`, `python_interpreters`, `venv_python`; docs/facts.md).
probe_python() {
    if command -v python3 >/dev/null 2>&1; then
        capture python "" python3 -I --version
    else
        emit python 127 ""
    fi
    # Every versioned CPython of the distribution (python3.11 beside a 3.10 python3).
    for interpreter in /usr/bin/python3.[0-9] /usr/bin/python3.[0-9][0-9]; do
        [ -x "$interpreter" ] && capture python-alt "path=$interpreter" "$interpreter" -I --version
    done
    probe_venv_python
}

# What the operator's CPython says of itself (-I: no site, no PYTHON* variables): its
# version and release level, and whether venv and ensurepip (with its bundled pip) are there.
VENV_PYTHON_CHECK='import sys, importlib.util
print("version=%d.%d.%d" % sys.version_info[:3])
print("releaselevel=" + sys.version_info.releaselevel)
missing = [name for name in ("venv", "ensurepip", "ensurepip.__main__") if importlib.util.find_spec(name) is None]
if not missing:
    import ensurepip
    try:
        print("pip=" + ensurepip.version())
    except Exception:
        missing.append("ensurepip'"'"'s bundled pip")
print("venv=" + (",".join(missing) or "ok"))'

probe_venv_python() {
    # The operator's CPython (venv_python), run only when root may run it (root_may_run,
    # files/root-may-run.sh: it, every link on the way, every directory above them and
    # every file it loads from its prefix are root's and writable by root only): root
    # never runs what another user could have changed. Its state, who may change it
    # and the first path that allows it (blocked) are reported either way.
    [ -n "${PROBE_VENV_PYTHON:-}" ] || return 0
    vp_file=$(stat -L -c '%U %a %F' -- "$PROBE_VENV_PYTHON" 2>/dev/null)
    vp_verdict=
    [ -z "$vp_file" ] || vp_verdict=$(root_may_run "$PROBE_VENV_PYTHON" interpreter)
    vp_owner=${vp_verdict%%" "*}
    vp_blocked=${vp_verdict#*" "}
    vp_real=$(readlink -f -- "$PROBE_VENV_PYTHON" 2>/dev/null)
    body="file=$vp_file${NL}owner=$vp_owner${NL}blocked=$vp_blocked${NL}real=$vp_real"
    case $vp_file in
        "root "*" regular file")
            if [ -z "$vp_owner" ] && [ -x "$vp_real" ]; then
                vp_out=$(env -i PATH="$CLEAN_PATH" LC_ALL=C "$vp_real" -I -c "$VENV_PYTHON_CHECK" 2>/dev/null)
                body="$body${NL}ran=$?${NL}$vp_out"
            fi ;;
    esac
    emit venv-python 0 "$body" "path=$PROBE_VENV_PYTHON"
}
