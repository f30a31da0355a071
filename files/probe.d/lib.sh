# The probe's shared shell library. The probe is a read-only facts probe for a GPU node:
# it prints raw sections ("@@ <name> rc=<exit> [key=value]", then each body line behind
# "|") for the control side to parse (facts/probe_output.py, docs/facts.md), and changes
# nothing. facts/probe_script.py assembles it: this file, then each section's fragment
# (files/probe.d/<name>.sh, registered in facts/sections/), then the runner. This file holds
# what every section uses: the framing (emit, capture), running a program as its owner
# (run_program, as_user and the owner rules), the service's view (service_view) and path
# chains (path_chain).
#
# Root runs nothing another user chose: the service env file is read into shell
# variables for the report (read_service_env), never exported, and only when it is
# root's alone (env_file_state); a program the settings or the env file name (nvcc,
# CXX, a venv's python, ninja) runs with a clean environment (the base PATH and LC_ALL:
# no LD_*, PYTHON*, HOME), as its owner when another user could change it (root_may_run,
# files/root-may-run.sh; as_user); helpers run with the system's /usr/bin/python3 -I.
# The planner's tables the sections read (MODEL_ENV_KEYS, HUB_CACHE_ORDER, HUB_CACHE_DEFAULT:
# bringup/layout.py) follow this file (facts/probe_script.py planner_tables).
# facts/node.py ships it in one remote command, after files/service-env.sh
# (read_service_env), files/apt-locks.sh (apt_lock_holders) and files/root-may-run.sh, under sh.
#
# Inputs (environment; bringup/layout.py NodeLayout.probe_inputs):
#   PROBE_SECTIONS      which parts to run (default: all; narrow facts run one or two)
#   PROBE_VENV          the SGLang venv (its python is asked about torch/FlashInfer)
#   PROBE_ENTRY_POINT   the program the unit's ExecStart runs (the venv's bin/sglang)
#   PROBE_ENV_FILE      the service's environment file (systemd EnvironmentFile syntax)
#   PROBE_CACHE_DIR     FLASHINFER_WORKSPACE_BASE of the service
#   PROBE_MANIFEST      the pre-warm manifest (files/prewarm.py)
#   PROBE_JIT_ROOT      FlashInfer's JIT tree under the cache dir
#   PROBE_SERVICE_PATH  the PATH systemd gives the service before its env file
#   PROBE_ENV_KEYS      the env file keys whose values to report (the plan's, never the operator's)
#   PROBE_UNIT          the service's systemd unit (sglang.service)
#   PROBE_TORCH_RECORD  torch's recorded arch list inside a managed venv ("" for an external venv)
#   PROBE_SERVICE_USER  the service account's name (service_user)
#   PROBE_SERVICE_HOME  the home the deploy gives it (/var/lib/<user>)
#   PROBE_MODEL         service_model (none: the model section says nothing)
#   PROBE_MODEL_ENV_<KEY> service_env's HF_* settings the model section uses (HF_HOME, HF_ENDPOINT...)
#   PROBE_VENV_PYTHON   the operator's CPython the venv is built with (venv_python; "" for the distribution's)
#   PROBE_GPU_DIAG      the level of `dcgmi diag` to run (gpu_diag: 1 or 2; "" runs none)
#   PROBE_ROUTE_TO      the address or host name whose route to report (a serving group's head; "" none)
#   PROBE_FS_ROOT       tests only: the scratch root the driver layer and PCI sections read under (empty: /)
#   TORCH_INFO          files/torch_info.py's source (facts/node.py sets it before this script)
# The command (facts/probe_script.py probe_command) sets or unsets every one of these: none
# comes from the remote session's environment.
LC_ALL=C
export LC_ALL
NL='
'
# The PATH every program runs with: systemd's base PATH for services, root's directories.
CLEAN_PATH=${PROBE_SERVICE_PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
PROBE_UID=$(id -u)

emit() {
    # emit NAME RC BODY [ATTR]: the one way a section is written. Each line of BODY
    # goes out behind "|" (the parser requires it), so nothing a program printed can
    # pass for a header; ATTR is cut at a newline for the same reason. Shell
    # expansions only: no process per section.
    emit_attr=${4%%"$NL"*}
    printf '@@ %s rc=%s%s\n' "$1" "$2" "${emit_attr:+ $emit_attr}"
    [ -n "$3" ] || return 0
    emit_rest=$3
    while :; do
        case $emit_rest in
            *"$NL"*) printf '|%s\n' "${emit_rest%%"$NL"*}"; emit_rest=${emit_rest#*"$NL"} ;;
            *) printf '|%s\n' "$emit_rest"; return 0 ;;
        esac
    done
}

capture() {
    name=$1; attrs=$2; shift 2
    out=$("$@" 2>&1); rc=$?
    emit "$name" "$rc" "$out" "$attrs"
}

unprivileged_owner() {
    # The user to run code found under these paths as: nothing (root) when each is
    # root's and writable by root only; else the owner of the first that is not, or
    # nobody for a root-owned path others may write. Root never runs code a
    # non-root user could have changed.
    for path in "$@"; do
        [ -e "$path" ] || continue
        set -- $(stat -L -c '%U %a' "$path")
        if [ "$1" != root ]; then
            printf '%s\n' "$1"
            return
        fi
        case $2 in *[2367]? | *[2367]) printf 'nobody\n'; return ;; esac
    done
}

code_owner() {
    # code_owner FILE: the user to run the program FILE as, judged on what it really is
    # (links resolved): nothing (root) when it and every directory above it are root's
    # and writable by root only; else the owner of the first that is not, or nobody for
    # a root-owned one others may write. A sticky directory (/tmp) lets no one rename
    # root's entries in it, so it does not count against the root-owned one below it.
    co_path=$(readlink -f -- "$1" 2>/dev/null) || co_path=$1
    set --
    while :; do
        set -- "$@" "$co_path"
        [ "$co_path" = / ] && break
        co_path=${co_path%/*}
        co_path=${co_path:-/}
    done
    # One stat for the whole chain, the file first; a file that is not there runs nothing.
    stat -c '%U %a %F' -- "$@" 2>/dev/null | while read -r co_user co_mode co_kind; do
        if [ "$co_user" != root ]; then
            printf '%s\n' "$co_user"
            break
        fi
        case $co_kind:$co_mode in
            directory:[1357]???) ;;
            *:*[2367]? | *:*[2367]) printf 'nobody\n'; break ;;
        esac
    done
}

link_chain_owner() {
    # link_chain_owner FILE: as code_owner, and every symbolic link on the way to FILE
    # (each hop, not only where they end) is root's in a directory only root can change:
    # a link another user may replace would send root's next run elsewhere.
    lc_path=$1 lc_hops=0
    while [ -L "$lc_path" ]; do
        lc_hops=$((lc_hops + 1))
        [ "$lc_hops" -le 40 ] || { printf 'nobody\n'; return; }
        lc_dir=${lc_path%/*}
        lc_dir=${lc_dir:-/}
        lc_owner=$(stat -c %U -- "$lc_path")
        [ "$lc_owner" = root ] || { printf '%s\n' "$lc_owner"; return; }
        lc_owner=$(code_owner "$lc_dir")
        [ -z "$lc_owner" ] || { printf '%s\n' "$lc_owner"; return; }
        lc_target=$(readlink -- "$lc_path")
        case $lc_target in /*) lc_path=$lc_target ;; *) lc_path=$lc_dir/$lc_target ;; esac
    done
    code_owner "$lc_path"
}

as_user() {
    # as_user USER COMMAND...: run COMMAND with a clean environment (CLEAN_PATH and
    # LC_ALL only), as USER when one is given and we are root. runuser itself gets
    # the clean environment too, and its own HOME/USER are dropped again after it.
    as_user_name=$1
    shift
    if [ -n "$as_user_name" ] && [ "$PROBE_UID" = 0 ]; then
        env -i PATH="$CLEAN_PATH" LC_ALL=C runuser -u "$as_user_name" -- env -i PATH="$CLEAN_PATH" LC_ALL=C "$@"
    else
        env -i PATH="$CLEAN_PATH" LC_ALL=C "$@"
    fi
}

run_program() {
    # run_program FILE ARG...: FILE with a clean environment, as root only when root may
    # run it (root_may_run: its links, directories, a script's interpreter and what a
    # CPython loads), else as the user it names.
    # Without a verdict (the rule failed to run), never as root.
    rp_verdict=$(root_may_run "$1") || [ -n "$rp_verdict" ] || rp_verdict="nobody $1"
    as_user "${rp_verdict%%" "*}" "$@"
}

printable() {
    # stdin -> stdout, every byte outside printable ASCII (newline and tab kept) as '?': text
    # any user wrote (a process name, a service's output) reaches pyinfra, which reads the
    # probe's output as UTF-8, and one bad byte would cut every section after it.
    LC_ALL=C tr -c '\n\t -~' '?'
}

# The most a bounded tool may write (ulimit -f: 512-byte blocks in dash, 1024 in bash): 32
# or 64 MiB, past which the kernel stops it (SIGXFSZ) rather than fill the disk.
RPW_BLOCKS=65536

run_program_within() {
    # run_program_within SECONDS FILE ARG...: run_program, stopped after SECONDS (killed 5 s
    # later; exit status 124): a driver tool stuck on a lost GPU (nvidia-smi on one that fell
    # off the bus) must not hold the probe, nor validate. Its output is spooled to files
    # (at most RPW_BLOCKS 512-byte blocks each) and sent on when it exits, not read from a
    # pipe: a child it detached (setsid) would hold a pipe open past the bound, and
    # timeout stops the tool's process group only.
    # timeout is the probe shell's own (as its grep and awk are), by its full path: the clean
    # PATH may be the service's, whose directories root does not vouch for.
    rpw_seconds=$1
    shift
    rp_verdict=$(root_may_run "$1") || [ -n "$rp_verdict" ] || rp_verdict="nobody $1"
    if rpw_out=$(mktemp 2>/dev/null); then
        if rpw_err=$(mktemp 2>/dev/null); then
            (ulimit -f "$RPW_BLOCKS" 2>/dev/null; rpw_bounded "$rpw_seconds" "$@") >"$rpw_out" 2>"$rpw_err"
            rpw_rc=$?
            cat "$rpw_out"
            cat "$rpw_err" >&2
            rm -f "$rpw_out" "$rpw_err"
            return "$rpw_rc"
        fi
        rm -f "$rpw_out"
    fi
    rpw_bounded "$rpw_seconds" "$@"
}

rpw_bounded() {
    # rpw_bounded SECONDS FILE ARG...: FILE as rp_verdict names its user, under timeout.
    rpw_bound=$1
    shift
    if rpw_timeout=$(command -v timeout) && [ "${rpw_timeout#/}" != "$rpw_timeout" ]; then
        as_user "${rp_verdict%%" "*}" "$rpw_timeout" -k 5 "$rpw_bound" "$@"
    else
        as_user "${rp_verdict%%" "*}" "$@"
    fi
}

nvcc_section() {
    # nvcc_section SECTION HOME: the version an nvcc under HOME reports (run as its owner).
    if [ -x "$2/bin/nvcc" ]; then
        capture "$1" "home=$2" run_program "$2/bin/nvcc" --version
    else
        emit "$1" 127 "" "home=$2"
    fi
}

env_file_state() {
    # env_file_state FILE: present (a regular file of root's that only root may write:
    # the one kind root reads), absent, or refused (a link, another user's file, one
    # group or others may write: never read; bringup/plan/paths.py names it as UNSAFE_PATH).
    if [ -L "$1" ]; then
        echo refused
    elif [ ! -e "$1" ]; then
        echo absent
    elif [ -f "$1" ]; then
        case $(stat -c '%u %a' -- "$1" 2>/dev/null) in
            "0 "*[2367]? | "0 "*[2367]) echo refused ;;
            "0 "*) echo present ;;
            *) echo refused ;;
        esac
    else
        echo refused
    fi
}

read_env_file() {
    # read_env_file FILE KEY...: forget the KEYs' service_env_* variables (none may come
    # from this shell's environment), then read FILE into them when it may be read
    # (env_file_state); prints nothing, sets env_state.
    env_file=$1
    shift
    for key in PATH CUDA_HOME CUDA_PATH CXX FLASHINFER_CUDA_ARCH_LIST FLASHINFER_WORKSPACE_BASE "$@"; do
        case $key in "" | [0-9]* | *[!A-Za-z0-9_]*) continue ;; esac
        unset "service_env_$key"
    done
    env_state=$(env_file_state "$env_file")
    if [ "$env_state" = present ]; then
        read_service_env "$env_file"
    fi
}

owned_record() {
    # owned_record RECORD: the text of deploy's record of the env file keys it wrote for a
    # reason of its own (<env file>.deploy-owned, bringup/planned_env.py), at most 4 KiB, only
    # while it is root's alone (a regular file, never a link, no one else may write it); else
    # nothing and status 1.
    [ -f "$1" ] && [ ! -L "$1" ] || return 1
    case $(stat -c '%u %a' -- "$1" 2>/dev/null) in "0 "*[2367]? | "0 "*[2367]) return 1 ;; "0 "*) ;; *) return 1 ;; esac
    head -c 4096 -- "$1"
}

service_view() {
    # service_view KEY...: the service's environment as it starts, in shell variables of
    # this (sub)shell, exported to nothing: its env file read (read_env_file, the KEYs
    # too) and service_path, the PATH it runs with (the env file's, else systemd's base
    # PATH). Every section that looks at what the service sees starts here.
    read_env_file "$PROBE_ENV_FILE" "$@"
    service_path=${service_env_PATH-$PROBE_SERVICE_PATH}
}

path_chain() {
    # path_chain PATH: "owner mode kind|path" of PATH (a link not followed) and of each
    # directory above it up to /, those that exist; one stat for all of them (no process
    # per component).
    path=$1
    set --
    while :; do
        if [ -e "$path" ] || [ -L "$path" ]; then
            set -- "$@" "$path"
        fi
        [ "$path" = / ] && break
        path=${path%/*}
        path=${path:-/}
    done
    stat -c '%U %a %F|%n' "$@" 2>/dev/null
}

# The root the driver layer's and the PCI section's files are read under: the node's own
# (PROBE_FS_ROOT unset). Only the tests set PROBE_FS_ROOT, to a scratch root
# (tests/unit/test_probe_driver.py); the control side's inputs never name it. The RDMA devices
# (files/probe.d/infiniband.sh) are read under it too.
DRIVER_FS_ROOT=${PROBE_FS_ROOT:-}
