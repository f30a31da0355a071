# The gpu_health section: writes health-query, health-xid; facts/sections/gpu_health.py
# parses them, with the driver layer's `nvidia-smi -q` (its Remapped Rows lines; the
# document's key: `gpu_health`; docs/facts.md).
# Is the hardware sound: one `nvidia-smi --query-gpu` of the health fields (their names as
# R535's `nvidia-smi --help-query-gpu` lists them; row remapping is not among them, so its
# lines come from the `-q` the driver layer already runs), and the NVRM Xid lines of this
# boot's kernel log, the last HEALTH_XID_LINES of them. The tools are found and run as the
# driver layer's are (driver_tool, run_program).
HEALTH_FIELDS=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total
HEALTH_FIELDS=$HEALTH_FIELDS,retired_pages.pending,pcie.link.gen.gpucurrent,pcie.link.gen.max
HEALTH_FIELDS=$HEALTH_FIELDS,pcie.link.width.current,pcie.link.width.max,clocks_event_reasons.gpu_idle
HEALTH_FIELDS=$HEALTH_FIELDS,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown
HEALTH_FIELDS=$HEALTH_FIELDS,clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.sw_thermal_slowdown
HEALTH_FIELDS=$HEALTH_FIELDS,temperature.gpu,temperature.gpu.tlimit
# A node that logs Xids in a loop must not send its whole log: the newest lines say what
# the GPUs are doing now.
HEALTH_XID_LINES=200

probe_gpu_health() {
    if tool=$(driver_tool nvidia-smi); then
        out=$(run_program "$tool" --query-gpu="$HEALTH_FIELDS" --format=csv,noheader,nounits 2>&1); rc=$?
        emit health-query "$rc" "$(printf '%s\n' "$out" | driver_head 64)"
    else
        emit health-query 127 ""
    fi
    # The kernel's log since boot: journald's kernel transport where systemd runs (the
    # ring buffer wraps; the journal keeps the boot), else the ring buffer itself. A
    # container's journal holds only what reached it (a sandbox node's own entries),
    # never the host's ring buffer.
    if [ -d "$DRIVER_FS_ROOT/run/systemd/system" ] && tool=$(driver_tool journalctl); then
        emit health-xid 0 "$(run_program "$tool" -k -b -o cat --no-pager -q 2>/dev/null \
            | grep -F 'NVRM: Xid' | tail -n "$HEALTH_XID_LINES")" "source=journal"
    elif tool=$(driver_tool dmesg); then
        emit health-xid 0 "$(run_program "$tool" 2>/dev/null | grep -F 'NVRM: Xid' | tail -n "$HEALTH_XID_LINES")" \
            "source=dmesg"
    else
        emit health-xid 127 "" "source=none"
    fi
}
