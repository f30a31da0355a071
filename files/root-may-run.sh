# root_may_run: the one rule for "may root run this" (docs/security.md), shared by the
# node probe (facts/probe_script.py sends it before the probe, files/probe.d/) and the tasks
# (files/build-venv.sh sources it; the deploy installs it beside its helpers and runs
# it as `sh root-may-run.sh FILE` before root runs a venv's python).
#
# Root may execute FILE only when every file that can decide what runs is root's and
# writable by root alone (a directory others may write counts only when sticky, like
# /tmp: no one renames root's entries there):
#   - FILE, every symbolic link on the way to it (each hop, in any component of the
#     path) and every directory above each of them and above the file they end at;
#   - for a script whose first line is "#!", the interpreter it names, by this same rule;
#   - for a CPython (a name starting "python"), every file it can load: its prefix's
#     lib/python3.X trees (stdlib, sitecustomize.py, site-packages and its .pth files,
#     lib-dynload, also where CPython searches up for them from its directory or the
#     home a pyvenv.cfg names), pyvenv.cfg beside it or in its prefix, and the shared
#     libraries the dynamic loader lists for it (libpython wherever it is; a listing
#     that fails refuses); a link inside those trees is followed to what it names.
# Prints nothing and returns 0 when root may run FILE; else prints one line,
# "<who> <path>": the first path that breaks the rule and who may change it (its owner,
# or nobody for a root-owned one others may write), and returns 1.
#
#   $ root_may_run /opt/cpython-3.11/bin/python3.11 || echo refused
#   alice /opt/cpython-3.11/lib/python3.11
#   refused

rmr_node() {
    # rmr_node PATH: PATH itself (a link not followed) is root's and, unless it is a
    # link or a sticky directory, writable by root only.
    rmr_state=$(stat -c '%U %a %F' -- "$1" 2>/dev/null) || return 0
    set -- "$1" $rmr_state
    if [ "$2" != root ]; then
        printf '%s %s\n' "$2" "$1"
        return 1
    fi
    case $4:$3 in
        symbolic:* | directory:[1357]???) ;;
        *:*[2367]? | *:*[2367]) printf 'nobody %s\n' "$1"; return 1 ;;
    esac
}

rmr_file() {
    # rmr_file PATH: PATH resolved one component at a time as the kernel does: every
    # directory it passes, every link on the way (a link in any component, not only the
    # last: each hop) and the file it ends at, each judged by rmr_node.
    rmr_done=/ rmr_rest=$1 rmr_hops=0
    case $rmr_rest in /*) ;; *) rmr_rest=$(pwd)/$rmr_rest ;; esac
    rmr_node / || return 1
    while :; do
        rmr_rest=${rmr_rest#"${rmr_rest%%[!/]*}"}
        [ -n "$rmr_rest" ] || return 0
        rmr_comp=${rmr_rest%%/*}
        case $rmr_rest in */*) rmr_rest=${rmr_rest#*/} ;; *) rmr_rest= ;; esac
        case $rmr_comp in
            .) continue ;;
            ..) rmr_done=${rmr_done%/*}; rmr_done=${rmr_done:-/}; continue ;;
        esac
        rmr_next=${rmr_done%/}/$rmr_comp
        rmr_node "$rmr_next" || return 1
        if [ -L "$rmr_next" ]; then
            rmr_hops=$((rmr_hops + 1))
            [ "$rmr_hops" -le 40 ] || { printf 'nobody %s\n' "$1"; return 1; }
            rmr_target=$(readlink -- "$rmr_next")
            case $rmr_target in /*) rmr_done=/ ;; esac
            rmr_rest=$rmr_target${rmr_rest:+/$rmr_rest}
        else
            rmr_done=$rmr_next
        fi
    done
}

rmr_tree() {
    # rmr_tree DEPTH DIR: DIR (followed when a link) and every entry under it root's and
    # writable by root alone: no sticky exception here, since a sticky directory still
    # lets any user add a module or a .pth; what each link in there names, and the tree
    # under a link to a directory (DEPTH counts those, at most 8).
    [ -e "$2" ] || return 0
    [ "$1" -le 8 ] || { printf 'nobody %s\n' "$2"; return 1; }
    rmr_bad=$(find -H "$2" ! -type l \( ! -user root -o -perm /022 \) -printf '%u %p\n' -quit 2>/dev/null)
    if [ -n "$rmr_bad" ]; then
        case $rmr_bad in root\ *) rmr_bad="nobody ${rmr_bad#root }" ;; esac
        printf '%s\n' "$rmr_bad"
        return 1
    fi
    rmr_links=$(find -H "$2" -mindepth 1 -type l 2>/dev/null)
    [ -n "$rmr_links" ] || return 0
    rmr_ifs=$IFS
    IFS=$NL_RMR
    for rmr_link in $rmr_links; do
        IFS=$rmr_ifs
        rmr_file "$rmr_link" || return 1
        if [ -d "$rmr_link" ]; then rmr_tree "$(($1 + 1))" "$rmr_link" || return 1; fi
    done
    IFS=$rmr_ifs
}

rmr_libraries() {
    # rmr_libraries FILE: the shared libraries the system's dynamic loader resolves for
    # FILE: listed, not run (the system's loader, not the PT_INTERP FILE names; --list
    # maps the libraries without relocating them or running their constructors), as
    # nobody when root asks (runuser by its path: it is in sbin, off a clean PATH), as
    # root only when nobody may not read FILE. Fails when the loader cannot list them
    # (a library not found, FILE unreadable): what FILE loads is then unknown.
    for rmr_ld in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do
        [ -x "$rmr_ld" ] || continue
        rmr_list=
        if [ "$(id -u)" = 0 ]; then
            for rmr_ru in /usr/sbin/runuser /sbin/runuser /usr/bin/runuser /bin/runuser; do
                [ -x "$rmr_ru" ] || continue
                rmr_list=$(env -i PATH=/usr/bin:/bin "$rmr_ru" -u nobody -- env -i PATH=/usr/bin:/bin \
                    "$rmr_ld" --list "$1" 2>/dev/null) || rmr_list=
                break
            done
        fi
        [ -n "$rmr_list" ] || rmr_list=$(env -i PATH=/usr/bin:/bin "$rmr_ld" --list "$1" 2>/dev/null) || return 1
        printf '%s\n' "$rmr_list" | sed -n 's|^[^=]*=> \(/[^ ]*\) (.*|\1|p'
        return 0
    done
}

rmr_trees() {
    # rmr_trees DIR: DIR's lib/python3* and lib64/python3* trees (rmr_tree); a venv's
    # lib64 is a link to its lib: the same tree, walked once.
    for rmr_top in "$1"/lib/python3* "$1"/lib64/python3*; do
        case $rmr_top in "$1"/lib64/*) [ "$1/lib64" -ef "$1/lib" ] && continue ;; esac
        [ -e "$rmr_top" ] || [ -L "$rmr_top" ] || continue
        if [ -L "$rmr_top" ]; then rmr_file "$rmr_top" || return 1; fi
        rmr_tree 1 "$rmr_top" || return 1
    done
}

rmr_getpath() {
    # rmr_getpath PROGRAM: where the CPython PROGRAM looks for its stdlib (its getpath,
    # whatever directory it is in): up from the home a pyvenv.cfg beside it or one up
    # names, else from its own directory (a link: CPython resolves it first, judged
    # there), to the first directory holding lib/python3.X/os.py and .../lib-dynload.
    # Each directory on the way, its lib/ and lib64/ not writable even when sticky (no
    # one adds a tree there later), and their python3* trees judged by rmr_tree.
    # A script is no CPython: the interpreter its "#!" names is judged in its turn.
    [ "$(head -c 2 -- "$1" 2>/dev/null)" != "#!" ] || return 0
    rmr_bin=${1%/*}
    rmr_prefix=${rmr_bin%/*}
    rmr_prefix=${rmr_prefix:-/}
    rmr_homes=$(cat -- "$rmr_bin/pyvenv.cfg" "$rmr_prefix/pyvenv.cfg" 2>/dev/null |
        sed -n 's/^[[:space:]]*[Hh][Oo][Mm][Ee][[:space:]]*=[[:space:]]*\(.*[^[:space:]]\)[[:space:]]*$/\1/p')
    [ -n "$rmr_homes" ] || [ -L "$1" ] || rmr_homes=$rmr_bin
    rmr_hifs=$IFS
    IFS=$NL_RMR
    for rmr_up in $rmr_homes; do
        IFS=$rmr_hifs
        case $rmr_up in /*) ;; *) printf 'nobody %s\n' "$rmr_bin/pyvenv.cfg"; return 1 ;; esac
        while :; do
            rmr_file "$rmr_up" || return 1
            for rmr_dir in "$rmr_up" "$rmr_up/lib" "$rmr_up/lib64"; do
                [ -d "$rmr_dir" ] || continue
                rmr_bad=$(find -H "$rmr_dir" -maxdepth 0 \( ! -user root -o -perm /022 \) -printf '%u %p\n' 2>/dev/null)
                [ -z "$rmr_bad" ] || { case $rmr_bad in root\ *) rmr_bad="nobody ${rmr_bad#root }" ;; esac
                    printf '%s\n' "$rmr_bad"; return 1; }
            done
            rmr_trees "$rmr_up" || return 1
            rmr_std= rmr_dyn=
            for rmr_mark in "$rmr_up"/lib/python3*/os.py "$rmr_up"/lib/python3*/os.pyc \
                "$rmr_up"/lib64/python3*/os.py "$rmr_up"/lib64/python3*/os.pyc; do
                [ ! -e "$rmr_mark" ] || rmr_std=1
            done
            for rmr_mark in "$rmr_up"/lib/python3*/lib-dynload "$rmr_up"/lib64/python3*/lib-dynload; do
                [ ! -d "$rmr_mark" ] || rmr_dyn=1
            done
            [ -z "$rmr_std" ] || [ -z "$rmr_dyn" ] || break
            [ "$rmr_up" != / ] || break
            rmr_up=${rmr_up%/*}
            rmr_up=${rmr_up:-/}
        done
    done
    IFS=$rmr_hifs
}

rmr_interpreter() {
    # rmr_interpreter PROGRAM: what the CPython PROGRAM (bin/python3.X of a prefix or of
    # a venv) loads from the prefix its bin/ is in.
    rmr_bin=${1%/*}
    rmr_prefix=${rmr_bin%/*}
    rmr_prefix=${rmr_prefix:-/}
    # Its bin/, its prefix and lib/ not writable even when sticky: a pyvenv.cfg added
    # beside it or in its prefix would name another home to load from.
    for rmr_dir in "$rmr_bin" "$rmr_prefix" "$rmr_prefix/lib"; do
        [ -d "$rmr_dir" ] || continue
        rmr_bad=$(find -H "$rmr_dir" -maxdepth 0 \( ! -user root -o -perm /022 \) -printf '%u %p\n' 2>/dev/null)
        if [ -n "$rmr_bad" ]; then
            case $rmr_bad in root\ *) rmr_bad="nobody ${rmr_bad#root }" ;; esac
            printf '%s\n' "$rmr_bad"
            return 1
        fi
    done
    for rmr_cfg in "$rmr_bin/pyvenv.cfg" "$rmr_prefix/pyvenv.cfg"; do
        if [ -e "$rmr_cfg" ] || [ -L "$rmr_cfg" ]; then rmr_file "$rmr_cfg" || return 1; fi
    done
    for rmr_lib in "$rmr_prefix"/lib/libpython3* "$rmr_prefix"/lib64/libpython3*; do
        if [ -e "$rmr_lib" ] || [ -L "$rmr_lib" ]; then rmr_file "$rmr_lib" || return 1; fi
    done
    rmr_trees "$rmr_prefix" || return 1
    rmr_getpath "$1" || return 1
    # The libraries of an ELF file (a script's are its interpreter's, judged in turn).
    [ -f "$1" ] && [ "$(head -c 4 -- "$1" | tr -d '\177')" = ELF ] || return 0
    rmr_libs=$(rmr_libraries "$1") || { printf 'nobody %s\n' "$1"; return 1; }
    for rmr_lib in $rmr_libs; do
        rmr_file "$rmr_lib" || return 1
    done
}

root_may_run() {
    # root_may_run FILE [interpreter]: see the top of this file; "interpreter": FILE is a
    # CPython whatever its name (venv_python).
    NL_RMR='
'
    rmr_depth=0
    rmr_named=$1
    rmr_python=${2:-}
    while :; do
        rmr_file "$rmr_named" || return 1
        REAL_RMR=$(readlink -f -- "$rmr_named" 2>/dev/null) || REAL_RMR=$rmr_named
        case $rmr_python:${REAL_RMR##*/}:${rmr_named##*/} in
            interpreter:*:* | *:python*:* | *:*:python*)
                # The prefix of the file it is (stdlib, libpython) and, for a venv's
                # bin/python (a link to it), the venv's own (pyvenv.cfg, site-packages).
                rmr_interpreter "$REAL_RMR" || return 1
                if [ "${rmr_named%/*/*}" != "${REAL_RMR%/*/*}" ]; then rmr_interpreter "$rmr_named" || return 1; fi ;;
        esac
        rmr_python=
        # A script: the kernel starts the interpreter its "#!" line names (first word).
        rmr_head=$(head -c 2 -- "$REAL_RMR" 2>/dev/null)
        [ "$rmr_head" = "#!" ] || return 0
        rmr_line=$(head -n 1 -- "$REAL_RMR")
        rmr_line=${rmr_line#??}
        rmr_line=${rmr_line#"${rmr_line%%[! 	]*}"}
        rmr_named=${rmr_line%%[ 	]*}
        rmr_depth=$((rmr_depth + 1))
        [ "$rmr_depth" -le 4 ] || { printf 'nobody %s\n' "$REAL_RMR"; return 1; }
        [ -n "$rmr_named" ] || return 0
    done
}

root_may_run_or_say() {
    # root_may_run_or_say FILE [interpreter]: root_may_run, with a refusal said in one line on stderr
    # naming FILE, the path that blocks it, who may change that, and the fix.
    rmr_verdict=$(root_may_run "$1" "${2:-}") && return 0
    rmr_who=${rmr_verdict%%" "*}
    rmr_where=${rmr_verdict#*" "}
    printf '%s\n' "root never runs $1: $rmr_who may change $rmr_where (it, a link on its way, a directory above" \
        "them or a file it loads); nothing was run. Fix: chown -R root: $rmr_where && chmod -R go-w $rmr_where," \
        "or use a program only root can change" | tr '\n' ' ' | sed 's/ $//' >&2
    printf '\n' >&2
    return 1
}

# Run as a program (`sh root-may-run.sh FILE [interpreter]`): nothing and exit 0 when
# root may run FILE, else the refusal in one line on stderr and exit 1.
case ${0##*/} in
    root-may-run.sh) root_may_run_or_say "$1" "${2:-}"; exit ;;
esac
