# The paths section: writes path; facts/sections/paths.py parses them
# (the document's keys: `paths`; docs/facts.md).
probe_paths() {
    # Who may change the places root writes into or runs code from: every existing
    # component of each path, from the path up to /.
    # venv_target: the venv link's target (venvs/<digest>), followed: the service user
    # must reach it too (bringup/plan/paths.py SERVICE_PATH_UNREACHABLE).
    # python: the interpreter the venv runs (its bin/python followed), or, with no venv
    # yet, the operator's venv_python it will be built with: its prefix must let the
    # service user through as well.
    for role in venv venv_target python env_file cache_dir; do
        case $role in
            venv) path=$PROBE_VENV ;;
            venv_target) [ -L "$PROBE_VENV" ] || continue
                         path=$(readlink -f -- "$PROBE_VENV") || continue ;;
            python) if [ -e "$PROBE_VENV/bin/python" ]; then path=$(readlink -f -- "$PROBE_VENV/bin/python") || continue
                    elif [ -n "${PROBE_VENV_PYTHON:-}" ]; then path=$(readlink -f -- "$PROBE_VENV_PYTHON") || continue
                    else continue; fi ;;
            env_file) path=$PROBE_ENV_FILE ;;
            cache_dir) path=$PROBE_CACHE_DIR ;;
        esac
        emit path 0 "$(path_chain "$path")" "role=$role"
    done
}
