# The entry_point section: writes entry_point; facts/sections/entry_point.py parses them
# (the document's keys: `entry_point`; docs/facts.md).
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
        emit entry_point 1 "" "path=$script"
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
    emit entry_point 0 "$body" "path=$script"
}
