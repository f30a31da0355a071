# The gpu_diag section: writes gpu-diag-busy, gpu-diag; facts/sections/gpu_diag.py parses them
# (the document's key: `gpu_diag`; docs/facts.md).
# NVIDIA's active diagnostic, `dcgmi diag -r <level> -j`, only when the operator asks for it
# (the gpu_diag setting: PROBE_GPU_DIAG is 1 or 2; empty: nothing runs, nothing is written).
# It loads every GPU for its length, so it never runs beside work on them: while the
# service's unit is active (or starting), or while a compute process holds a GPU (nvidia-smi's
# compute-apps), gpu-diag-busy names what holds them and dcgmi is not started. dcgmi is run
# as the other tools are (driver_tool, run_program_within: never as root when another user
# owns or may change it), stopped after GPU_DIAG_SECONDS.
# Seconds per level: NVIDIA's docs give level 1 seconds to a minute and level 2 about two
# minutes on an 8-GPU node; the margin covers a node that is slow to start the engine.
GPU_DIAG_SECONDS_1=300
GPU_DIAG_SECONDS_2=900
# The most lines of dcgmi's JSON sent back (level 2 on 8 GPUs prints some hundreds): a
# document cut here no longer parses, and the section says so.
GPU_DIAG_LINES=5000

probe_gpu_diag() {
    case ${PROBE_GPU_DIAG:-} in
        1) diag_seconds=$GPU_DIAG_SECONDS_1 ;;
        2) diag_seconds=$GPU_DIAG_SECONDS_2 ;;
        *) return 0 ;;
    esac
    busy=
    if [ -d "$DRIVER_FS_ROOT/run/systemd/system" ] && tool=$(driver_tool systemctl); then
        # is-active prints active, activating, reloading, deactivating... and exits 0 only on active.
        # Run as every tool is (run_program_within: never as root when another user owns it).
        # An answer that is not a state (a bus systemctl cannot reach, a timeout) is not idle.
        unit_state=$(run_program_within "$HEALTH_SECONDS" "$tool" is-active -- "$PROBE_UNIT" 2>/dev/null); unit_rc=$?
        case $unit_state in
            inactive | failed) ;;
            active | activating | reloading | deactivating) busy="unit $PROBE_UNIT $unit_state" ;;
            *) busy="unknown systemctl is-active $PROBE_UNIT exited $unit_rc without a state" ;;
        esac
    fi
    if tool=$(driver_tool nvidia-smi); then
        # pid, name, bus id of each compute process: the name is any user's bytes.
        apps=$(run_program_within "$HEALTH_SECONDS" "$tool" --query-compute-apps=pid,process_name,gpu_bus_id \
            --format=csv,noheader 2>/dev/null); apps_rc=$?
        if [ "$apps_rc" -ne 0 ]; then
            busy="${busy:+$busy$NL}unknown nvidia-smi's compute-apps query exited $apps_rc"
        elif [ -n "$apps" ]; then
            busy="${busy:+$busy$NL}$(printf '%s\n' "$apps" | driver_head 32 | sed 's/^/process /' | printable)"
        fi
    fi
    emit gpu-diag-busy "$([ -n "$busy" ] && echo 1 || echo 0)" "$busy"
    [ -z "$busy" ] || return 0
    if tool=$(driver_tool dcgmi); then
        out=$(run_program_within "$diag_seconds" "$tool" diag -r "$PROBE_GPU_DIAG" -j 2>&1); rc=$?
        emit gpu-diag "$rc" "$(printf '%s\n' "$out" | driver_head "$GPU_DIAG_LINES" | printable)" "level=$PROBE_GPU_DIAG"
    else
        emit gpu-diag 127 "" "level=$PROBE_GPU_DIAG"
    fi
}
