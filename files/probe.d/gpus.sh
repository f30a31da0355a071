# The gpus section: writes smi-query, smi-header; facts/sections/gpus.py parses them
# (the document's keys: `driver`, `nvidia_smi`, `gpus`; docs/facts.md).
probe_gpus() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        capture smi-query "" nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv,noheader,nounits
        out=$(nvidia-smi 2>&1); rc=$?
        emit smi-header "$rc" "$(printf '%s\n' "$out" | head -n 8)"
    else
        emit smi-query 127 ""
    fi
}
