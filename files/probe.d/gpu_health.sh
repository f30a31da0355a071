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
# A node that logs Xids in a loop must not send its whole log: the first line of each GPU's
# each Xid (at most HEALTH_XID_KINDS of them: a flood of one Xid must not push a rarer,
# graver one out), then the newest HEALTH_XID_LINES.
HEALTH_XID_LINES=200
HEALTH_XID_KINDS=64
# Seconds a health tool may take (nvidia-smi hangs for minutes on a GPU that fell off the bus).
HEALTH_SECONDS=30

health_xid_lines() {
    # stdin: a kernel log -> its NVRM Xid lines, chosen as above, in log order, printable
    # (a process name in an Xid line is any user's bytes).
    LC_ALL=C awk -v newest="$HEALTH_XID_LINES" -v kinds="$HEALTH_XID_KINDS" '
        index($0, "NVRM: Xid") {
            n++
            line[n] = $0
            if (match($0, /NVRM: Xid \([^)]*\): [0-9]+/)) {
                kind = substr($0, RSTART, RLENGTH)
                if (!(kind in seen) && found < kinds) { seen[kind] = 1; found++; first[n] = 1 }
            }
            if (n > newest) { old = n - newest; if (!(old in first)) delete line[old] }
        }
        END { for (i = 1; i <= n; i++) if (i in line) print line[i] }' | printable
}

probe_gpu_health() {
    if tool=$(driver_tool nvidia-smi); then
        out=$(run_program_within "$HEALTH_SECONDS" "$tool" --query-gpu="$HEALTH_FIELDS" --format=csv,noheader,nounits \
            2>&1); rc=$?
        emit health-query "$rc" "$(printf '%s\n' "$out" | driver_head 64 | printable)"
    else
        emit health-query 127 ""
    fi
    # The kernel's log since boot: journald's kernel transport where systemd runs (the
    # ring buffer wraps; the journal keeps the boot), else the ring buffer itself. A
    # container's journal holds only what reached it (a sandbox node's own entries),
    # never the host's ring buffer. The reader's own exit status is the section's: a log
    # that could not be read is not a log without Xids.
    if [ -d "$DRIVER_FS_ROOT/run/systemd/system" ] && tool=$(driver_tool journalctl); then
        # Not -g: a journalctl built without PCRE2 refuses it, and its exit status would read as
        # "nothing matched".
        log=$(run_program_within "$HEALTH_SECONDS" "$tool" -k -b -o cat --no-pager -q 2>/dev/null); rc=$?
        emit health-xid "$rc" "$(printf '%s\n' "$log" | health_xid_lines)" "source=journal"
    elif tool=$(driver_tool dmesg); then
        log=$(run_program_within "$HEALTH_SECONDS" "$tool" 2>/dev/null); rc=$?
        emit health-xid "$rc" "$(printf '%s\n' "$log" | health_xid_lines)" "source=dmesg"
    else
        emit health-xid 127 "" "source=none"
    fi
}
