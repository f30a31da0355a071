# The dcgm section: writes dcgm-unit, dcgm-engine; facts/sections/dcgm.py parses them
# (the document's key: `dcgm`; docs/facts.md).
# NVIDIA DCGM's host engine (gpu_diag_install; bringup/plan/dcgm.py): the nvidia-dcgm unit's
# states, and whether the engine it runs started before DCGM's packages were last unpacked
# (dpkg rewrites a package's /var/lib/dpkg/info/<name>.list at each unpack): such an engine
# runs the binaries dpkg replaced, since NVIDIA's postinst restarts nothing. Read on every
# node (one systemctl and a few file reads); the planner decides what deploy does.
probe_dcgm() {
    dcgm_pid=
    if [ -d "$DRIVER_FS_ROOT/run/systemd/system" ] && tool=$(driver_tool systemctl); then
        out=$(run_program "$tool" show -p Id -p LoadState -p ActiveState -p UnitFileState -p MainPID \
            nvidia-dcgm.service 2>&1)
        emit dcgm-unit $? "$out"
        dcgm_pid=$(printf '%s\n' "$out" | sed -n 's/^MainPID=\([0-9][0-9]*\)$/\1/p' | head -n 1)
    else
        emit dcgm-unit 127 ""
    fi
    # The engine's start (clock ticks after boot, /proc/<pid>/stat's 22nd field: the text
    # after the command's last ')' starts at the 3rd), the boot's time and the newest unpack.
    engine=
    if [ -n "$dcgm_pid" ] && [ "$dcgm_pid" != 0 ] && [ -r "$DRIVER_FS_ROOT/proc/$dcgm_pid/stat" ]; then
        IFS= read -r dcgm_stat < "$DRIVER_FS_ROOT/proc/$dcgm_pid/stat"
        # shellcheck disable=SC2086 # the fields, split
        set -- ${dcgm_stat##*) }
        [ "$#" -ge 20 ] && shift 19 && engine="started_ticks=$1"
        engine="$engine${NL}btime=$(sed -n 's/^btime \([0-9][0-9]*\)$/\1/p' "$DRIVER_FS_ROOT/proc/stat" 2>/dev/null)"
        engine="$engine${NL}hz=$(getconf CLK_TCK 2>/dev/null)"
    fi
    for dcgm_list in "$DRIVER_FS_ROOT"/var/lib/dpkg/info/datacenter-gpu-manager-*.list; do
        [ -e "$dcgm_list" ] && engine="$engine${NL}unpacked=$(stat -c %Y "$dcgm_list" 2>/dev/null)"
    done
    emit dcgm-engine 0 "${engine#"$NL"}"
}
