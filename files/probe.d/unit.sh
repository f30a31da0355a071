# The unit section: writes unit, unit-journal; facts/sections/unit.py parses them
# (the document's keys: `service_unit`; docs/facts.md).
probe_unit() {
    # The service's unit as systemd sees it and, when it has failed or systemd keeps
    # restarting it, the end of its journal: the planner explains the failure from
    # those lines (bringup/explain.py). With Restart=on-failure a crashing unit is
    # seldom "failed": between tries it waits in "auto-restart", and NRestarts counts
    # the restarts since it was last started by hand. Nothing where systemd does not
    # run (a container, a chroot).
    if [ ! -d /run/systemd/system ] || ! command -v systemctl >/dev/null 2>&1; then
        emit unit 127 ""
        return
    fi
    state=$(systemctl show "$PROBE_UNIT" -p LoadState -p ActiveState -p SubState -p Result -p NRestarts 2>&1)
    emit unit $? "$state" "name=$PROBE_UNIT"
    active=$(printf '%s\n' "$state" | sed -n 's/^ActiveState=//p')
    sub=$(printf '%s\n' "$state" | sed -n 's/^SubState=//p')
    restarts=$(printf '%s\n' "$state" | sed -n 's/^NRestarts=\([0-9][0-9]*\)$/\1/p')
    if [ "$active" = failed ] || [ "$sub" = auto-restart ] || [ "${restarts:-0}" -gt 0 ]; then
        # The last 200 lines hold the latest try's traceback and the lines before it
        # (framed by emit like every body: no journal line can pass for a header).
        # printable: the service's output is any user's bytes.
        out=$(journalctl -u "$PROBE_UNIT" --no-pager -o cat -n 200 2>&1); rc=$?
        emit unit-journal "$rc" "$(printf '%s\n' "$out" | printable)"
    fi
}
