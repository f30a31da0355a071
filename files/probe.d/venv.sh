# The venv section: writes venv; facts/sections/venv.py parses them
# (the document's keys: `torch`, `flashinfer`, `sglang`; docs/facts.md).
probe_venv() {
    if [ ! -x "$PROBE_VENV/bin/python" ]; then
        emit venv 127 ""
        return
    fi
    # Versions from package metadata and torch/version.py, no import; torch's arch list
    # from the record beside a managed venv's torch, imported only without a current one.
    # An external venv's bin/python is a link to some interpreter: judged by what it is.
    # Root runs it only when root_may_run allows the interpreter and everything it loads.
    runner=$(unprivileged_owner "$PROBE_VENV" "$PROBE_VENV/bin" "$PROBE_VENV/lib" "$PROBE_VENV"/lib/python3*/site-packages)
    [ -n "$runner" ] || runner=$(code_owner "$PROBE_VENV/bin/python")
    [ -n "$runner" ] || { runner=$(root_may_run "$PROBE_VENV/bin/python" interpreter); runner=${runner%%" "*}; }
    capture venv "${runner:+user=$runner}" as_user "$runner" "$PROBE_VENV/bin/python" -I -c "$TORCH_INFO" \
        --record "$PROBE_TORCH_RECORD"
}
