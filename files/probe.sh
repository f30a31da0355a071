# Read-only facts probe for a GPU node: prints raw sections ("@@ <name> rc=<exit>
# [key=value]", then each body line behind "|") for the control side to parse
# (facts/probe_output.py, docs/facts.md). It changes nothing.
#
# Root runs nothing another user chose: the service env file is read into shell
# variables for the report (read_service_env), never exported, and only when it is
# root's alone (env_file_state); a program the settings or the env file name (nvcc,
# CXX, a venv's python, ninja) runs with a clean environment (the base PATH and LC_ALL:
# no LD_*, PYTHON*, HOME), as its owner when another user could change it (root_may_run,
# files/root-may-run.sh; as_user); helpers run with the system's /usr/bin/python3 -I.
# facts/node.py ships it in one remote command, after files/service-env.sh
# (read_service_env) and files/apt-locks.sh (apt_lock_holders), under sh.
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
#   PROBE_FS_ROOT       tests only: the scratch root the driver layer and PCI sections read under (unset: /)
#   TORCH_INFO          files/torch_info.py's source (facts/node.py sets it before this script)
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

nvcc_section() {
    # nvcc_section SECTION HOME: the version an nvcc under HOME reports (run as its owner).
    if [ -x "$2/bin/nvcc" ]; then
        capture "$1" "home=$2" run_program "$2/bin/nvcc" --version
    else
        emit "$1" 127 "" "home=$2"
    fi
}

probe_os() {
    emit os-release 0 "$(cat /etc/os-release 2>/dev/null)"
    emit uname 0 "$(uname -m)"
}

probe_gpus() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        capture smi-query "" nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv,noheader,nounits
        out=$(nvidia-smi 2>&1); rc=$?
        emit smi-header "$rc" "$(printf '%s\n' "$out" | head -n 8)"
    else
        emit smi-query 127 ""
    fi
}

probe_toolkits() {
    for home in /usr/local/cuda-* /opt/cuda /opt/cuda-* /opt/nvidia/cuda*; do
        # Version links such as /usr/local/cuda-13 (alternatives) are not toolkits of their own.
        [ -d "$home" ] && [ ! -L "$home" ] && nvcc_section toolkit "$home"
    done
    if [ -x /usr/bin/nvcc ]; then
        nvcc_section toolkit /usr
    fi
    if [ -e /usr/local/cuda ]; then
        emit cuda-link 0 "$(readlink -f /usr/local/cuda)"
    fi
}

probe_login() {
    shell=bash
    command -v bash >/dev/null 2>&1 || shell=sh
    login=$("$shell" -lc 'printf "CUDA_HOME=%s\nCUDA_PATH=%s\nPATH=%s\nnvcc=%s\n" "$CUDA_HOME" "$CUDA_PATH" "$PATH" "$(command -v nvcc)"' </dev/null 2>/dev/null)
    emit login-env $? "$login"
    # Its last line is "nvcc=<path>" (the shell's own expansion: no process for it).
    case $login in *nvcc=*) login_nvcc=${login##*nvcc=} ;; *) login_nvcc= ;; esac
    if [ -n "$login_nvcc" ]; then
        capture path-nvcc "path=$login_nvcc" run_program "$login_nvcc" --version
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

service_view() {
    # service_view KEY...: the service's environment as it starts, in shell variables of
    # this (sub)shell, exported to nothing: its env file read (read_env_file, the KEYs
    # too) and service_path, the PATH it runs with (the env file's, else systemd's base
    # PATH). Every section that looks at what the service sees starts here.
    read_env_file "$PROBE_ENV_FILE" "$@"
    service_path=${service_env_PATH-$PROBE_SERVICE_PATH}
}

probe_service() {
    # The service's environment (systemd's default PATH, then the env file), then
    # FlashInfer's own search order (flashinfer/jit/cpp_ext.py get_cuda_path):
    # CUDA_HOME, CUDA_PATH, which nvcc, /usr/local/cuda. Read, not exported: nothing
    # runs with it; nvcc is looked up on its PATH by the shell's own search.
    service=$(
        service_view $PROBE_ENV_KEYS
        service_env_PATH=$service_path
        cuda_home=${service_env_CUDA_HOME-} cuda_path=${service_env_CUDA_PATH-}
        if [ -n "$cuda_home" ]; then home=$cuda_home; via=CUDA_HOME
        elif [ -n "$cuda_path" ]; then home=$cuda_path; via=CUDA_PATH
        elif nvcc=$(PATH=$service_path; command -v nvcc); then home=${nvcc%/bin/*}; via=PATH
        elif [ -e /usr/local/cuda ]; then home=/usr/local/cuda; via=default
        else home=; via=none
        fi
        printf "env_file=%s\nCUDA_HOME=%s\nCUDA_PATH=%s\nPATH=%s\n" "$env_state" "$cuda_home" "$cuda_path" "$service_path"
        printf "FLASHINFER_CUDA_ARCH_LIST=%s\nFLASHINFER_WORKSPACE_BASE=%s\n" \
            "${service_env_FLASHINFER_CUDA_ARCH_LIST-}" "${service_env_FLASHINFER_WORKSPACE_BASE-}"
        printf "home=%s\nvia=%s\n" "$home" "$via"
        for key in $PROBE_ENV_KEYS; do
            case $key in "" | [0-9]* | *[!A-Za-z0-9_]*) continue ;; esac
            # Set (even empty) in the file, or PATH: reported as the service sees it.
            if eval "[ -n \"\${service_env_$key+set}\" ]"; then
                eval "printf 'env.%s=%s\n' \"\$key\" \"\$service_env_$key\""
            fi
        done
    )
    emit service-env $? "$service"
    case $service in
        *"
home="*) service_home=${service#*
home=}; service_home=${service_home%%
*} ;;
        *) service_home= ;;
    esac
    if [ -n "$service_home" ]; then
        nvcc_section resolved-nvcc "$service_home"
    fi
}

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

probe_packages() {
    # Installed CUDA repository packages (cuda-*, libcublas-13-0, ...: the toolkit lock's names).
    if command -v dpkg-query >/dev/null 2>&1; then
        emit deb-packages 0 "$(dpkg-query -W -f='${db:Status-Abbrev}|${Package}|${Version}\n' 'cuda-*' 'libcu*-[0-9]*-[0-9]*' 2>/dev/null)"
    else
        emit deb-packages 127 ""
    fi
}

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

entry_interpreter() {
    # entry_interpreter LINE1 LINE2: the program execve() starts for a script whose first
    # two lines are these, as "<wrapper> <interpreter>" ("-" for no wrapper: a plain
    # "#!"), or nothing without a "#!" line. The kernel takes the first word after "#!".
    # For a path longer than Linux's 127 bytes or one with a space, pip's scripts
    # (distlib ScriptMaker._build_shebang) start "#!/bin/sh" and exec the interpreter on
    # their second line: '''exec' <interpreter, quoted or not> "$0" "$@".
    case $1 in '#!'*) ;; *) return 0 ;; esac
    ei_line=${1#??}
    ei_line=${ei_line#"${ei_line%%[! 	]*}"}
    ei_first=${ei_line%%[ 	]*}
    case $ei_first:$2 in
        */sh:"'''exec' "*)
            ei_rest=${2#"'''exec' "}
            ei_quote=${ei_rest%"${ei_rest#?}"}
            case $ei_quote in
                \' | \") ei_rest=${ei_rest#?}; printf '%s %s\n' "$ei_first" "${ei_rest%%"$ei_quote"*}" ;;
                *) printf '%s %s\n' "$ei_first" "${ei_rest%%[ 	]*}" ;;
            esac ;;
        *) printf -- '- %s\n' "$ei_first" ;;
    esac
}

probe_entry_point() {
    # The unit's entry point as systemd will run it: its ExecStart program (the venv's
    # bin/sglang) is a script, and the kernel starts the interpreter its "#!" line names.
    # A venv copied from another path keeps the old path there: the venv's own python
    # still answers, but systemd fails with status=203/EXEC ("No such file or
    # directory", naming the script, not its interpreter). Read, never run: the script,
    # its "#!" line, the interpreter as it is (links followed), who
    # may change it (code_owner: nothing when root alone can), and where its directory
    # and the venv's bin/ really are (one place for the venv's own python).
    script=$PROBE_ENTRY_POINT
    if [ ! -e "$script" ] && [ ! -L "$script" ]; then
        emit entry-point 1 "" "path=$script"
        return
    fi
    # The first 600 bytes only (a script's "#!" is at most 256 on Linux, pip's "exec" line
    # follows it); a FIFO or device is never opened.
    entry_head=
    if [ -f "$script" ] && [ -r "$script" ]; then
        entry_head=$(head -c 600 -- "$script" 2>/dev/null)
    fi
    entry_one=${entry_head%%"$NL"*}
    case $entry_head in *"$NL"*) entry_two=${entry_head#*"$NL"}; entry_two=${entry_two%%"$NL"*} ;; *) entry_two= ;; esac
    # Only a "#!" line is reported as text: an executable's bytes are not.
    case $entry_one in
        '#!'*) format=script ;;
        "$(printf '\177ELF')"*) format=elf entry_one= ;;
        *) format=other entry_one= ;;
    esac
    entry=$(entry_interpreter "$entry_one" "$entry_two")
    body="script=$(stat -L -c '%U %a %F' -- "$script" 2>/dev/null)${NL}format=$format${NL}line=$entry_one"
    if [ -n "$entry" ]; then
        wrapper=${entry%% *} interpreter=${entry#* }
        [ "$wrapper" = - ] && wrapper=
        body="$body${NL}wrapper=$wrapper${NL}interpreter=$interpreter"
        body="$body${NL}interpreter_file=$(stat -L -c '%U %a %F' -- "$interpreter" 2>/dev/null)"
        body="$body${NL}interpreter_owner=$(code_owner "$interpreter")"
        body="$body${NL}interpreter_dir=$(readlink -f -- "${interpreter%/*}" 2>/dev/null)"
    fi
    body="$body${NL}venv_bin=$(readlink -f -- "$PROBE_VENV/bin" 2>/dev/null)"
    emit entry-point 0 "$body" "path=$script"
}

probe_prewarm() {
    # The pre-warm manifest and whether ninja has work for any module it lists.
    if [ ! -r "$PROBE_MANIFEST" ] || [ ! -x /usr/bin/python3 ]; then
        emit prewarm 127 ""
        return
    fi
    # ninja runs in the cache's module directories: as the cache's owner (or ninja's).
    # The system's python, isolated (-I: no user site, no PYTHON* variables).
    runner=$(unprivileged_owner "$PROBE_CACHE_DIR" "$PROBE_VENV" "$PROBE_VENV/bin")
    # venv/bin/ninja is a script of the venv's python: judged with the interpreter's prefix.
    [ -n "$runner" ] || { runner=$(root_may_run "$PROBE_VENV/bin/ninja"); runner=${runner%%" "*}; }
    capture prewarm "${runner:+user=$runner}" as_user "$runner" /usr/bin/python3 -I -c '
import json, os, subprocess, sys
manifest = json.load(open(sys.argv[1]))
stale = []
for module in manifest.get("modules", []):
    if module.get("kind") == "sglang":
        # Content-addressed: a changed input is another directory, not work for ninja.
        if not os.path.exists(module.get("library", "")):
            stale.append(module.get("request"))
        continue
    try:
        run = subprocess.run([sys.argv[2], "-n", "-C", module["dir"]], capture_output=True, text=True)
        fresh = run.returncode == 0 and "no work to do" in run.stdout
    except OSError:
        fresh = False
    if not fresh:
        stale.append(module.get("request", module.get("name")))
print(json.dumps({"manifest": manifest, "stale": stale}))
' "$PROBE_MANIFEST" "$PROBE_VENV/bin/ninja"
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

probe_apt() {
    # Every apt source file, and each keyring a signed-by names: who may change it (the
    # keyring and each directory above it, "owner mode kind|path" as in probe_paths,
    # without following a link) and, for a regular file, its keys (base64, last line).
    # The plan adopts a found source only when root alone can change its keyring.
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$file" ] && emit apt-source 0 "$(cat "$file")" "file=$file"
    done
    keyrings=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        sed -n -e 's/.*signed-by=\([^] ]*\).*/\1/p' \
            -e 's/^[Ss][Ii][Gg][Nn][Ee][Dd]-[Bb][Yy]:[[:space:]]*\(\/[^[:space:]]*\).*/\1/p' | sort -u)
    set -f  # a keyring path is a word, never a pattern
    for keyring in $keyrings; do
        case $keyring in
            /*) ;;
            *) emit apt-keyring 1 "" "file=$keyring"; continue ;;  # a fingerprint or a relative name
        esac
        chain=$(path_chain "$keyring")
        if [ -f "$keyring" ] && [ ! -L "$keyring" ] && [ -r "$keyring" ] && [ "$(wc -c < "$keyring")" -lt 1048576 ]; then
            emit apt-keyring 0 "$chain
$(base64 -w0 < "$keyring")" "file=$keyring"
        else
            emit apt-keyring 1 "$chain" "file=$keyring"
        fi
    done
    set +f
}

probe_account() {
    # The service account as found (its passwd entry: the planner refuses an account
    # gpu-bringup did not create, by the mark in its GECOS), who the probe runs for (the
    # SSH user behind sudo or doas), and the planned home if something is there already.
    capture account "user=$PROBE_SERVICE_USER" getent passwd "$PROBE_SERVICE_USER"
    emit account-login 0 "${SUDO_USER:-${DOAS_USER:-$(id -un 2>/dev/null)}}"
    if [ -e "$PROBE_SERVICE_HOME" ] || [ -L "$PROBE_SERVICE_HOME" ]; then
        capture account-home "path=$PROBE_SERVICE_HOME" stat -c '%U %a %F' "$PROBE_SERVICE_HOME"
    else
        emit account-home 1 "" "path=$PROBE_SERVICE_HOME"
    fi
}

probe_apt_locks() {
    # Whoever holds apt's or dpkg's locks now (files/apt-locks.sh): deploy waits for them.
    emit apt-locks 0 "$(apt_lock_holders)"
}

probe_jit_cache() {
    # SGLang's JIT cache key covers nvcc's and c++'s --version output and every header a
    # build read (sglang kernels/jit/utils/compile/cache.py: _environment_fingerprint and
    # the deps key): a changed compiler or header package means its pre-warmed modules
    # would compile again at start. The compilers' output and the versions of the
    # packages that ship them and their headers stand for that, in the service's
    # environment; the pre-warm records the same digest in its manifest.
    # The compilers are looked up as the service would (its env file's CUDA_HOME, CXX
    # and PATH) and run as their owners, with a clean environment.
    toolchain=$(
        service_view
        cxx=${service_env_CXX:-c++}
        case $cxx in
            */*) ;;
            *) cxx=$(PATH=$service_path; command -v "$cxx") || cxx="${service_env_CXX:-c++}: not found" ;;
        esac
        {
            run_program "${service_env_CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version 2>&1
            case $cxx in
                *": not found") printf '%s\n' "$cxx" ;;
                *) run_program "$cxx" --version 2>&1 ;;
            esac
            # libcuda1 is the driver's user-space library (no header, no compiler): an
            # upgrade of the driver must not read as a changed toolchain.
            dpkg-query -W -f '${db:Status-Abbrev}${Package}=${Version}\n' 'cuda-*' 'libcu*' 'libc6-dev' \
                'libstdc++*-dev' 'g++*' 'gcc*' 2>/dev/null | sed -n '/^ii libcuda1[:=]/d; s/^ii //p' | LC_ALL=C sort
        } | sha256sum | cut -c1-64
    )
    emit toolchain 0 "$toolchain"
    if [ -d "$PROBE_JIT_ROOT" ]; then
        emit jit-cache 0 "$(cd "$PROBE_JIT_ROOT" && find . -mindepth 5 -maxdepth 5 -path './*/*/cached_ops/*/*.so' | sort)" "base=$PROBE_CACHE_DIR"
    else
        emit jit-cache 1 "" "base=$PROBE_CACHE_DIR"
    fi
}

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
        out=$(journalctl -u "$PROBE_UNIT" --no-pager -o cat -n 200 2>&1); rc=$?
        emit unit-journal "$rc" "$out"
    fi
}

# What the model section says of a hub cache entry's snapshot (docs/facts.md
# "model.snapshot"; bringup/plan/model_source.py entry_partial decides), run as the
# cache's reader (the service user, else nobody: root reads nothing of another user's
# cache), the record never read through a link, every count bounded. huggingface_hub
# (file_download.py) writes refs/main and the small files before the weights and
# downloads each blob as blobs/<etag>.incomplete, renamed when whole; the fetch
# (tasks/operations/model.py) writes .gpu-bringup-complete after hf download exits 0:
# repo=, revision=, then file=<path> for each file of the snapshot; and leaves
# .gpu-bringup-fetching there while it runs (a fetch killed before its end leaves it).
# shellcheck disable=SC2016
SNAPSHOT_STATE='entry=$1 snap=$1/snapshots/$2 record=$1/.gpu-bringup-complete
{ [ -d "$snap" ] && [ ! -L "$snap" ] && cd "$snap" && timeout 20 find . -mindepth 1 \( -type f -o -type l \) -print 2>/dev/null \
    | head -n 10000; } | {
    files=0 weights=0
    while IFS= read -r name; do
        [ -e "$snap/$name" ] || continue
        files=$((files + 1))
        case $name in *.safetensors | *.bin | *.pt | *.pth | *.gguf | *.h5 | *.msgpack | *.ckpt) weights=$((weights + 1)) ;; esac
    done
    printf "snapshot_files=%s\nsnapshot_weights=%s\n" "$files" "$weights"
}
# A blob still downloading: <etag>.incomplete (1.33.0: <etag>.<random>.incomplete, left
# behind by a killed process), counted while <etag> itself is not there.
timeout 20 find "$entry/blobs" -mindepth 1 -maxdepth 1 -name "*.incomplete" -print 2>/dev/null | head -n 1000 | {
    incomplete=0
    while IFS= read -r partial; do
        name=${partial##*/}
        [ -e "$entry/blobs/${name%%.*}" ] || incomplete=$((incomplete + 1))
    done
    printf "snapshot_incomplete=%s\n" "$incomplete"
}
# The shards a weights index at the top of the snapshot (model.safetensors.index.json,
# pytorch_model.bin.index.json) names and the snapshot lacks: a download stopped between two
# shards (SGLang downloading at its start, an operator) leaves no .incomplete and no record.
# With a safetensors index, a .bin index is not read: the loaders take safetensors then
# (SGLang 0.5.23 weight_utils), and a download of *.json and *.safetensors is whole.
shards=0 indexes=0 safetensors=
for index in "$snap"/*.safetensors.index.json; do [ -f "$index" ] && safetensors=yes; done
for index in "$snap"/*.index.json; do
    case $index in *.bin.index.json) [ -z "$safetensors" ] || continue ;; esac
    [ -f "$index" ] && [ "$indexes" -lt 8 ] || continue
    indexes=$((indexes + 1))
    lacking=$(timeout 5 head -c 4194304 -- "$index" 2>/dev/null | grep -oE "\"[^\"/]+[.](safetensors|bin)\"" \
        | LC_ALL=C sort -u | head -n 10000 | {
        lacking=0
        while IFS= read -r quoted; do name=${quoted#?}; [ -e "$snap/${name%?}" ] || lacking=$((lacking + 1)); done
        echo "$lacking"; })
    shards=$((shards + ${lacking:-0}))
done
printf "snapshot_shards_missing=%s\n" "$shards"
if [ -e "$entry/.gpu-bringup-fetching" ] || [ -L "$entry/.gpu-bringup-fetching" ]; then
    echo snapshot_fetching=yes
else
    echo snapshot_fetching=no
fi
if [ -L "$record" ] || { [ -e "$record" ] && [ ! -f "$record" ]; }; then echo record=refused; exit 0; fi
[ -e "$record" ] || { echo record=none; exit 0; }
text=$(timeout 10 head -c 262145 -- "$record") || { echo record=refused; exit 0; }
# Cut at 256 KiB: the line the cut falls in is left out, not counted missing (LC_ALL=C: bytes).
nl=$(printf "\nx") nl=${nl%x}
[ "${#text}" -le 262144 ] || text=${text%"$nl"*}
listed=0 missing=0 repo= revision=
while IFS= read -r line; do
    case $line in
        repo=*) repo=${line#repo=} ;;
        revision=*) revision=${line#revision=} ;;
        file=*) listed=$((listed + 1)) name=${line#file=}
            case /$name/ in */../* | //*) missing=$((missing + 1)) ;; *) [ -e "$snap/$name" ] || missing=$((missing + 1)) ;; esac ;;
    esac
done <<RECORD
$text
RECORD
# The reader wrote them: only the characters of a hub id and a commit go out (a line separator
# of the parser, such as \r or \034, would pass for a key of this section).
case $repo in *[!A-Za-z0-9._/-]*) repo= ;; esac
case $revision in *[!0-9a-f]*) revision= ;; esac
printf "record=present\nrecord_repo=%.200s\nrecord_revision=%.64s\nrecord_files=%s\nrecord_missing=%s\n" \
    "$repo" "$revision" "$listed" "$missing"'

snapshot_lines() {
    # What SNAPSHOT_STATE printed, held to its own lines and their shapes (4 KiB at most): it
    # runs as the cache's reader, whose other processes may trace it and print what they like.
    head -c 4096 | while IFS= read -r sl_line; do
        case $sl_line in
            snapshot_files=* | snapshot_weights=* | snapshot_incomplete=* | snapshot_shards_missing=* | record_files=* \
                | record_missing=*) case ${sl_line#*=} in "" | *[!0-9]*) ;; *) printf '%s\n' "$sl_line" ;; esac ;;
            snapshot_fetching=yes | snapshot_fetching=no | record=none | record=present | record=refused)
                printf '%s\n' "$sl_line" ;;
            record_repo=* | record_revision=*)
                case ${sl_line#*=} in *[!A-Za-z0-9._/-]*) ;; *) printf '%s\n' "$sl_line" ;; esac ;;
        esac
    done
}

deploy_owned() {
    # deploy_owned RECORD KEY VALUE: whether deploy's record of the env file keys it wrote
    # for a reason of its own says KEY=VALUE; the record counts only as root's alone (a
    # regular file, never a link, no one else may write it), read at most 4 KiB.
    [ -f "$1" ] && [ ! -L "$1" ] || return 1
    case $(stat -c '%u %a' -- "$1" 2>/dev/null) in "0 "*[2367]? | "0 "*[2367]) return 1 ;; "0 "*) ;; *) return 1 ;; esac
    do_text=$(head -c 4096 -- "$1") || return 1
    case "$NL$do_text$NL" in *"$NL$2=$3$NL"*) return 0 ;; esac
    return 1
}

probe_model() {
    # Where service_model comes from, as SGLang will look for it (docs/facts.md "model";
    # bringup/plan/model_source.py decides): a directory (os.path.isdir, as SGLang 0.5.23
    # tells a local model from a hub id: sglang/srt/utils/common.py has_hf_quant_config),
    # absolute or under the unit's WorkingDirectory (the service's home); otherwise a hub
    # id, looked up in the service's hub cache (huggingface_hub 1.33.0 constants.py:
    # HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
    # $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, ~ the service's
    # HOME; file_download.py: models--<org>--<name>/refs/main names the snapshot), and
    # the hub (HF_ENDPOINT, else https://huggingface.co) asked once, bounded, without a
    # token, whether it answers from here. The service's settings: PROBE_MODEL_ENV_<KEY>
    # (service_env's, which deploy writes), else the env file's. Readable by the service
    # user: checked as that user when the account exists (a clean environment), else
    # left to the planner from the owners and modes of each directory on the way.
    [ -n "${PROBE_MODEL:-}" ] || { emit model 127 ""; return; }
    # bringup/layout.py MODEL_ENV_KEYS; HF_TOKEN only to say whether it is set.
    model_keys="HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HOME XDG_CACHE_HOME HF_ENDPOINT HF_HUB_OFFLINE TRANSFORMERS_OFFLINE"
    read_env_file "$PROBE_ENV_FILE" $model_keys HF_TOKEN
    file_offline=${service_env_HF_HUB_OFFLINE-}
    for key in $model_keys; do
        if eval "[ -n \"\${PROBE_MODEL_ENV_$key+set}\" ]"; then
            eval "service_env_$key=\$PROBE_MODEL_ENV_$key"
        fi
    done
    model=$PROBE_MODEL home=$PROBE_SERVICE_HOME
    reader=
    getent passwd "$PROBE_SERVICE_USER" >/dev/null 2>&1 && reader=$PROBE_SERVICE_USER
    case $model in
        /*) place=$model ;;
        *) place=$home/$model ;;
    esac
    token=unset
    [ -n "${service_env_HF_TOKEN:-}" ] && token=set
    unset service_env_HF_TOKEN
    offline=${service_env_HF_HUB_OFFLINE:-${service_env_TRANSFORMERS_OFFLINE:-}}
    # The env file's HF_HUB_OFFLINE is deploy's when its record says it wrote that value
    # (bringup/planned_env.py OWNED_SUFFIX) and service_env does not set it: then it is no
    # reason not to ask the hub (deploy takes it back when the hub answers again).
    offline_by= operator_offline=$offline
    if [ -z "${PROBE_MODEL_ENV_HF_HUB_OFFLINE+set}" ] && [ -n "$file_offline" ] \
            && deploy_owned "$PROBE_ENV_FILE.deploy-owned" HF_HUB_OFFLINE "$file_offline"; then
        offline_by=deploy operator_offline=${service_env_TRANSFORMERS_OFFLINE:-}
    fi
    endpoint=${service_env_HF_ENDPOINT:-https://huggingface.co}
    endpoint=${endpoint%/}
    case $model in
        /*) kind=path ;;
        *) if [ -d "$place" ]; then kind=path; else kind=hub; fi ;;
    esac
    # A user and password in the endpoint's URL are never reported: everything up to its
    # last "@" (a password may hold "/", "?", "#", "@" or a space), as bringup/redact.py
    # VALUE_USERINFO.
    case $endpoint in *://*@*) shown=${endpoint%%://*}://'<redacted>'@${endpoint##*@} ;; *) shown=$endpoint ;; esac
    body="kind=$kind${NL}offline=$offline${NL}offline_by=$offline_by${NL}token=$token${NL}endpoint=$shown"
    if [ "$kind" = path ]; then
        config=$place/config.json
        body="$body${NL}path=$place${NL}dir=$(stat -L -c '%U %a %F' -- "$place" 2>/dev/null)"
    else
        if [ -n "${service_env_HF_HUB_CACHE:-}" ]; then cache=$service_env_HF_HUB_CACHE via=HF_HUB_CACHE
        elif [ -n "${service_env_HUGGINGFACE_HUB_CACHE:-}" ]; then cache=$service_env_HUGGINGFACE_HUB_CACHE via=HUGGINGFACE_HUB_CACHE
        elif [ -n "${service_env_HF_HOME:-}" ]; then cache=$service_env_HF_HOME/hub via=HF_HOME
        elif [ -n "${service_env_XDG_CACHE_HOME:-}" ]; then cache=$service_env_XDG_CACHE_HOME/huggingface/hub via=XDG_CACHE_HOME
        else cache=$home/.cache/huggingface/hub via=default
        fi
        case $cache in "~"/*) cache=$home/${cache#"~"/} ;; "~") cache=$home ;; esac
        # huggingface_hub's repo_folder_name: "models--" and the id with "/" as "--".
        entry=$cache/models--$(printf '%s' "$model" | sed 's|/|--|g')
        revision=
        # Read as the cache's reader (the service user, else nobody), never through a link,
        # 64 bytes at most: root reads nothing another user can point it at.
        # shellcheck disable=SC2016
        revision=$(as_user "${reader:-nobody}" /bin/sh -c '[ -f "$1" ] && [ ! -L "$1" ] && timeout 5 head -c 64 -- "$1"' \
            sh "$entry/refs/main" 2>/dev/null)
        case $revision in "" | *[!0-9a-f]*) revision= ;; esac
        # There (root sees it) but not read as the reader: the planner says who cannot read it.
        refs=
        [ -z "$revision" ] && { [ -e "$entry/refs/main" ] || [ -L "$entry/refs/main" ]; } && refs=unread
        config=
        [ -n "$revision" ] && config=$entry/snapshots/$revision/config.json
        body="$body${NL}cache=$cache${NL}via=$via${NL}entry=$entry${NL}revision=$revision${NL}refs_main=$refs"
        # Whether the snapshot is whole (SNAPSHOT_STATE), read as the cache's reader.
        [ -n "$revision" ] && body="$body${NL}$(as_user "${reader:-nobody}" /bin/sh -c "$SNAPSHOT_STATE" sh \
            "$entry" "$revision" 2>/dev/null | snapshot_lines)"
    fi
    state=
    [ -n "$config" ] && state=$(stat -L -c '%U %a %F' -- "$config" 2>/dev/null)
    body="$body${NL}config=$state"
    if [ -n "$state" ]; then
        if [ -z "$reader" ]; then
            body="$body${NL}readable=unknown"
        elif as_user "$reader" /bin/sh -c 'test -r "$1" && test -r "${1%/*}" && test -x "${1%/*}"' sh "$config"; then
            body="$body${NL}readable=yes"
        else
            body="$body${NL}readable=no"
        fi
        # Who may read each directory on the way, for a service user not created yet.
        body="$body${NL}$(stat -L -c 'chain=%U %G %a %F|%n' -- "$config" 2>/dev/null)"
        chain=${config%/*}
        while [ -n "$chain" ]; do
            body="$body${NL}$(stat -L -c 'chain=%U %G %a %F|%n' -- "$chain" 2>/dev/null)"
            chain=${chain%/*}
        done
    fi
    # The hub: asked unless the settings make the service offline; one HEAD of the
    # model's config.json, as the service's first request is, no token, no redirect
    # followed, 5 s at most; the system's python, isolated, as root reads nothing of it.
    # The endpoint and the model reach it on its stdin (printf is the shell's own: no
    # process has them in its argv, which ps shows every user); the endpoint's user and
    # password are taken out before it is asked (urllib sends none; it took them for a
    # port: "nonnumeric port: 'PASSWORD@host'") and out of any error text it prints.
    # huggingface_hub's true values (constants.py _is_true: 1, ON, YES, TRUE, any case).
    case $(printf '%s' "$operator_offline" | tr '[:lower:]' '[:upper:]') in 1 | ON | YES | TRUE) asked=no ;; *) asked=yes ;; esac
    if [ "$asked" = yes ] && [ -x /usr/bin/python3 ]; then
        hub=$(printf '%s\n%s\n' "$endpoint" "$model" | as_user "" /usr/bin/python3 -I -c '
import re, sys, urllib.error, urllib.request
class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None
endpoint, model = sys.stdin.read().split("\n")[:2]
found = re.match(r"([A-Za-z][A-Za-z0-9+.-]*://)(.*)@", endpoint)
secrets = []
if found:
    secrets = sorted({found.group(2), *re.split("[:@]", found.group(2))} - {""}, key=len, reverse=True)
    endpoint = found.group(1) + endpoint[found.end():]
def shown(text):
    for secret in secrets:
        text = text.replace(secret, "<redacted>")
    return text
url = endpoint + "/" + model + "/resolve/main/config.json"
try:
    answer = urllib.request.build_opener(Stay).open(urllib.request.Request(url, method="HEAD"), timeout=5)
    print("status=%d" % answer.status)
except urllib.error.HTTPError as error:
    print("status=%d" % error.code)
except Exception as error:
    reason = getattr(error, "reason", error)
    print("error=" + shown(" ".join(str(reason).split()))[:200])
' 2>&1 | head -n 1)
        body="$body${NL}hub_$hub"
    fi
    emit model 0 "$body" "model=$model"
}

# ---- The driver layer (docs/facts.md "driver_layer"; facts/driver_layer.py parses it) ----
# What nvidia-smi alone does not say: the loaded module's version and flavour against the
# user space and the packages, nouveau, NVSwitch and Fabric Manager, persistence, DKMS and
# headers, a pending reboot, the IOMMU and the ACS control of the bridges above each GPU.
# A missing file or tool is a fact (an empty body, rc 127), never a failure. Files are
# read with the shell's own read (no process per file); each tool is looked up on the base
# PATH and run by run_program (clean environment, as its owner); its output is cut to the
# lines the parser reads, so a node with 8 GPUs and many bridges stays small.
#
# The root the driver layer's and the PCI section's files are read under: the node's own
# (PROBE_FS_ROOT unset). Only the tests set PROBE_FS_ROOT, to a scratch root
# (tests/unit/test_probe_driver.py); the control side's inputs never name it.
DRIVER_FS_ROOT=${PROBE_FS_ROOT:-}

driver_head() {
    # driver_head MAX: the first MAX lines of the standard input, by the shell alone (a
    # last line without its newline too).
    driver_count=0
    while [ "$driver_count" -lt "$1" ] && { IFS= read -r driver_line || [ -n "$driver_line" ]; }; do
        printf '%s\n' "$driver_line"
        driver_count=$((driver_count + 1))
    done
}

driver_file() {
    # driver_file SECTION FILE MAX: FILE's first MAX lines as a section; rc 1 when it is not there.
    if [ -r "$DRIVER_FS_ROOT$2" ]; then
        emit "$1" 0 "$(driver_head "$3" < "$DRIVER_FS_ROOT$2")"
    else
        emit "$1" 1 ""
    fi
}

driver_tool() {
    # driver_tool NAME: where NAME is on the base PATH (the shell's own search), or nothing.
    (PATH=$CLEAN_PATH; command -v "$1") 2>/dev/null
}

driver_initramfs() {
    # driver_initramfs RELEASE: that kernel's initramfs against the nouveau blacklists
    # ($nouveau_confs, those of /run left out): none (no /boot/initrd.img-RELEASE), stale (a
    # blacklist newer than it, or one of /etc/modprobe.d that lsinitramfs does not list in
    # it), else current.
    initrd="$DRIVER_FS_ROOT/boot/initrd.img-$1"
    [ -e "$initrd" ] || { echo none; return; }
    [ -n "$nouveau_confs" ] || { echo current; return; }
    # lsinitramfs (initramfs-tools) lists it; where it is missing or fails, the times alone.
    listed= lister=
    # (An empty listing is no answer either.) A path is taken from its etc/modprobe.d/ on,
    # whatever archive prefix a version of lsinitramfs puts before it.
    if tool=$(driver_tool lsinitramfs) && out=$(run_program "$tool" "$initrd" 2>/dev/null) && [ -n "$out" ]; then
        lister=yes
        listed=$(printf '%s\n' "$out" | while IFS= read -r line; do
            case $line in etc/modprobe.d/* | */etc/modprobe.d/*) printf 'etc/modprobe.d/%s\n' "${line#*etc/modprobe.d/}" ;; esac
        done)
    fi
    printf '%s\n' "$nouveau_confs" | {
        verdict=current
        while IFS= read -r conf; do
            case ${conf#"$DRIVER_FS_ROOT"} in "" | /run/*) continue ;; esac  # /run's: this boot's only
            [ "$conf" -nt "$initrd" ] && verdict=stale
            case ${conf#"$DRIVER_FS_ROOT"} in
                /etc/modprobe.d/*)
                    [ -n "$lister" ] || continue
                    case "$NL$listed$NL" in *"${NL}${conf#"$DRIVER_FS_ROOT"/}$NL"*) ;; *) verdict=stale ;; esac ;;
            esac
        done
        echo "$verdict"
    }
}

driver_smi_query() {
    # `nvidia-smi -q`, cut to what the parser reads: the lines at column 0 (the GPU
    # headers, the driver version, an error) and, per GPU, Persistence Mode, MIG Mode's
    # Current, Fabric's State and Status and PCI's Bus Id.
    driver_top=
    while IFS= read -r driver_line; do
        case $driver_line in
            "        "[!\ ]*)
                case $driver_top:$driver_line in
                    "MIG Mode:        Current "* | "Fabric:        State "* | "Fabric:        Status "* | \
                    "PCI:        Bus Id "*) printf '%s\n' "$driver_line" ;;
                esac ;;
            "    "[!\ ]*)
                driver_top=${driver_line#    }
                driver_top=${driver_top%%  *}
                case $driver_top in
                    "Persistence Mode"*) printf '%s\n' "$driver_line" ;;
                    "MIG Mode" | Fabric) printf '%s\n' "$driver_line" ;;
                esac ;;
            " "* | "") ;;
            *) printf '%s\n' "$driver_line" ;;
        esac
    done
}

driver_pci_gpus() {
    # Each NVIDIA display or 3D controller on PCI (vendor 0x10de, class 0x03xxxx) and the
    # bridges above it, root port first: "gpu bridge...", from its sysfs path.
    driver_links=
    for driver_dev in "$DRIVER_FS_ROOT"/sys/bus/pci/devices/*; do
        [ -r "$driver_dev/vendor" ] && [ -r "$driver_dev/class" ] || continue
        read -r driver_vendor < "$driver_dev/vendor" || continue
        read -r driver_class < "$driver_dev/class" || continue
        case $driver_vendor:$driver_class in 0x10de:0x03*) driver_links="$driver_links $driver_dev" ;; esac
    done
    [ -n "$driver_links" ] || return 0
    # One readlink for all of them; each path's PCI addresses after the GPU's own are dropped.
    readlink -f -- $driver_links | while IFS= read -r driver_path; do
        driver_chain=
        driver_rest=${driver_path#"$DRIVER_FS_ROOT"/sys/devices/}
        while [ -n "$driver_rest" ]; do
            driver_part=${driver_rest%%/*}
            case $driver_part in
                [0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7])
                    driver_chain="$driver_chain $driver_part" ;;
            esac
            case $driver_rest in */*) driver_rest=${driver_rest#*/} ;; *) driver_rest= ;; esac
        done
        set -- $driver_chain
        [ $# -gt 0 ] || continue
        eval "driver_gpu=\${$#}"
        driver_bridges=
        while [ $# -gt 1 ]; do driver_bridges="$driver_bridges $1"; shift; done
        printf '%s%s\n' "$driver_gpu" "$driver_bridges"
    done
}

driver_acs() {
    # driver_acs BRIDGE...: "bridge ACSCtl..." for each BRIDGE lspci shows an ACS control
    # of, from one `lspci -vvv` of the PCI bridges (class 0604) read by the shell.
    driver_want=" $* "
    driver_dev=
    while IFS= read -r driver_line; do
        case $driver_line in
            [0-9a-f]*" "*)
                driver_dev=${driver_line%% *}
                case $driver_dev in ????:*) ;; *) driver_dev=0000:$driver_dev ;; esac ;;
            *ACSCtl:*)
                case $driver_want in *" $driver_dev "*) printf '%s %s\n' "$driver_dev" "${driver_line#*ACSCtl:}" ;; esac ;;
        esac
    done
}

probe_driver_layer() {
    driver_file driver-proc-version /proc/driver/nvidia/version 4
    driver_file driver-sys-version /sys/module/nvidia/version 1
    if tool=$(driver_tool modinfo); then
        out=$(run_program "$tool" nvidia 2>&1); rc=$?
        emit driver-modinfo "$rc" "$(printf '%s\n' "$out" | while IFS= read -r line; do
            case $line in filename:* | version:* | license:*) printf '%s\n' "$line" ;; esac
        done)"
    else
        emit driver-modinfo 127 ""
    fi
    # User space: the libnvidia-ml.so.<version> files of the library directories.
    nvml=
    for lib in "$DRIVER_FS_ROOT"/usr/lib/*-linux-gnu/libnvidia-ml.so.* "$DRIVER_FS_ROOT"/usr/lib64/libnvidia-ml.so.* \
            "$DRIVER_FS_ROOT"/usr/lib/libnvidia-ml.so.* "$DRIVER_FS_ROOT"/lib64/libnvidia-ml.so.*; do
        [ -e "$lib" ] && nvml="$nvml${NL}${lib#"$DRIVER_FS_ROOT"}"
    done
    emit driver-nvml 0 "${nvml#"$NL"}"
    if tool=$(driver_tool dpkg-query); then
        emit driver-packages 0 "$(run_program "$tool" -W -f='${db:Status-Abbrev}|${Package}|${Version}\n' \
            'nvidia-*' 'libnvidia-*' 'cuda-drivers*' '*fabricmanager*' 'nvlsm*' 'linux-modules-nvidia-*' \
            'firmware-nvidia-*' 2>/dev/null)"
    else
        emit driver-packages 127 ""
    fi
    # nouveau: loaded, and each modprobe.d file with a "blacklist nouveau" line.
    nouveau=loaded=no
    nouveau_confs=
    [ -d "$DRIVER_FS_ROOT/sys/module/nouveau" ] && nouveau=loaded=yes
    for conf in "$DRIVER_FS_ROOT"/etc/modprobe.d/*.conf "$DRIVER_FS_ROOT"/lib/modprobe.d/*.conf \
            "$DRIVER_FS_ROOT"/usr/lib/modprobe.d/*.conf "$DRIVER_FS_ROOT"/run/modprobe.d/*.conf; do
        [ -r "$conf" ] || continue
        while read -r word module rest; do
            if [ "$word" = blacklist ] && [ "$module" = nouveau ]; then
                nouveau="$nouveau${NL}blacklist=${conf#"$DRIVER_FS_ROOT"}"
                nouveau_confs="$nouveau_confs${NL}$conf"
                break
            fi
        done < "$conf"
    done
    emit driver-nouveau 0 "$nouveau"
    switches=0
    for switch in "$DRIVER_FS_ROOT"/proc/driver/nvidia-nvswitch/devices/*; do
        [ -e "$switch" ] && switches=$((switches + 1))
    done
    emit driver-nvswitch 0 "$switches"
    if [ -d "$DRIVER_FS_ROOT/run/systemd/system" ] && tool=$(driver_tool systemctl); then
        out=$(run_program "$tool" show -p Id -p LoadState -p ActiveState -p UnitFileState nvidia-persistenced.service \
            nvidia-fabricmanager.service nvlsm.service 2>&1)
        emit driver-units $? "$out"
    else
        emit driver-units 127 ""
    fi
    if tool=$(driver_tool nvidia-smi); then
        out=$(run_program "$tool" -q 2>&1); rc=$?
        emit driver-smi-q "$rc" "$(printf '%s\n' "$out" | driver_smi_query)"
        out=$(run_program "$tool" topo -m 2>&1); rc=$?
        # The matrix: its header and the GPU rows (no NIC rows, no legend).
        if [ "$rc" = 0 ]; then
            emit driver-topo 0 "$(printf '%s\n' "$out" | while IFS= read -r line; do
                case $line in *GPU0* | GPU[0-9]*) printf '%s\n' "$line" ;; esac
            done)"
        else
            emit driver-topo "$rc" "$(printf '%s\n' "$out" | driver_head 3)"
        fi
    else
        emit driver-smi-q 127 ""
    fi
    release=
    [ -r "$DRIVER_FS_ROOT/proc/sys/kernel/osrelease" ] && read -r release < "$DRIVER_FS_ROOT/proc/sys/kernel/osrelease"
    headers=no
    [ -n "$release" ] && [ -e "$DRIVER_FS_ROOT/lib/modules/$release/build" ] && headers=yes
    # Every installed kernel a boot may start (its image in /boot and its modules
    # directory): its headers, and whether its initramfs holds the nouveau blacklist.
    installed=
    for modules in "$DRIVER_FS_ROOT"/lib/modules/*; do
        kernel=${modules##*/}
        [ -d "$modules" ] && [ -e "$DRIVER_FS_ROOT/boot/vmlinuz-$kernel" ] || continue
        kernel_headers=no
        [ -e "$modules/build" ] && kernel_headers=yes
        installed="$installed${NL}installed=$kernel|$kernel_headers|$(driver_initramfs "$kernel")"
    done
    emit driver-kernel 0 "release=$release${NL}headers=$headers$installed"
    if tool=$(driver_tool dkms); then
        out=$(run_program "$tool" status 2>&1); rc=$?
        emit driver-dkms "$rc" "$(printf '%s\n' "$out" | driver_head 40)"
    else
        emit driver-dkms 127 ""
    fi
    if [ -e "$DRIVER_FS_ROOT/run/reboot-required" ]; then
        pkgs=
        [ -r "$DRIVER_FS_ROOT/run/reboot-required.pkgs" ] && pkgs=$(driver_head 50 < "$DRIVER_FS_ROOT/run/reboot-required.pkgs")
        emit driver-reboot 0 "required=yes${pkgs:+$NL$pkgs}"
    else
        emit driver-reboot 0 "required=no"
    fi
    # The kernel's IOMMU arguments and module blacklists (never the whole command line).
    iommu=
    if [ -r "$DRIVER_FS_ROOT/proc/cmdline" ]; then
        read -r cmdline < "$DRIVER_FS_ROOT/proc/cmdline"
        set -f
        for word in $cmdline; do
            case $word in
                *iommu*=* | modprobe.blacklist=* | module_blacklist=* | rd.driver.blacklist=*) iommu="$iommu${NL}$word" ;;
            esac
        done
        set +f
    fi
    emit driver-cmdline 0 "${iommu#"$NL"}"
    paths=$(driver_pci_gpus)
    emit driver-pci-paths 0 "$paths"
    if [ -n "$paths" ]; then
        if tool=$(driver_tool lspci); then
            out=$(run_program "$tool" -D -vvv -d ::0604 2>&1); rc=$?
            # Each bridge above a GPU, once.
            bridges=$(printf '%s\n' "$paths" | while read -r gpu rest; do printf '%s\n' $rest; done | sort -u)
            emit driver-acs "$rc" "$(printf '%s\n' "$out" | driver_acs $bridges)"
        else
            emit driver-acs 127 ""
        fi
    fi
}

# ---- The GPUs on PCI (docs/facts.md "pci_gpus"; facts/pci.py parses it) ----
# Every NVIDIA display or 3D controller under /sys/bus/pci/devices (vendor 0x10de, class
# 0x0300xx VGA or 0x0302xx 3D: the two NVIDIA's kernel module binds, open-gpu-kernel-modules
# kernel-open/nvidia/nv-pci-table.c PCI_CLASS_DISPLAY_VGA and PCI_CLASS_DISPLAY_3D; not its
# NVSwitches, 0x0680, nor audio functions), bound to a driver or not: what names the GPUs of a node
# whose nvidia-smi lists none (no driver, or a module that refused them). Read by the
# shell alone (no process per device), under the driver layer's root; rc 1 when sysfs
# cannot be read (a fact: null), an empty body when it holds no NVIDIA GPU.
probe_pci() {
    pci_dir=$DRIVER_FS_ROOT/sys/bus/pci/devices
    if [ ! -d "$pci_dir" ] || [ ! -r "$pci_dir" ] || [ ! -x "$pci_dir" ]; then
        emit pci-gpus 1 ""
        return
    fi
    pci_found=
    for pci_dev in "$pci_dir"/*; do
        [ -r "$pci_dev/vendor" ] && [ -r "$pci_dev/class" ] || continue
        pci_vendor= pci_class= pci_device=
        read -r pci_vendor < "$pci_dev/vendor" || [ -n "$pci_vendor" ] || continue
        [ "$pci_vendor" = 0x10de ] || continue
        read -r pci_class < "$pci_dev/class" || [ -n "$pci_class" ] || continue
        case $pci_class in 0x0300?? | 0x0302??) ;; *) continue ;; esac
        [ -r "$pci_dev/device" ] && { read -r pci_device < "$pci_dev/device" || :; }
        pci_found="$pci_found$NL${pci_dev##*/} $pci_vendor ${pci_device:-none} $pci_class"
    done
    emit pci-gpus 0 "${pci_found#"$NL"}"
}

# The whole probe runs its sections in five groups side by side (most of its time is
# waiting for processes to start; the slow ones, nvidia-smi, the venv's python, ninja,
# the driver layer's tools, are in different groups), each group into a file of its own, printed in order. Few
# groups, not one per section: on a machine many nodes share (the sandbox) every extra
# process counts. A narrow fact (PROBE_SECTIONS) runs its one or two sections in turn.
if [ -z "${PROBE_SECTIONS:-}" ] && tmp=$(mktemp -d 2>/dev/null); then
    { probe_os; probe_gpus; probe_pci; probe_toolkits; probe_unit; } > "$tmp/1" &
    { probe_packages; probe_login; probe_venv; probe_entry_point; } > "$tmp/2" &
    { probe_python; probe_service; probe_prewarm; } > "$tmp/3" &
    { probe_driver_layer; probe_model; } > "$tmp/5" &
    { probe_jit_cache; probe_paths; probe_apt; probe_apt_locks; probe_account; } > "$tmp/4"
    wait
    cat "$tmp/1" "$tmp/2" "$tmp/3" "$tmp/4" "$tmp/5"
    rm -rf "$tmp"
else
    for section in ${PROBE_SECTIONS:-os gpus pci toolkits packages login service python venv entry_point prewarm jit_cache paths apt apt_locks account unit driver_layer model}; do
        "probe_$section"
    done
fi
exit 0
