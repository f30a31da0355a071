# Sourced by the probe (files/probe.d/, shipped with it in one command) and files/with-service-env:
# the node side's one reader of a systemd EnvironmentFile (systemd.exec(5)).
#
#   load_service_env FILE   export FILE's assignments the way systemd reads them:
#                           "#"/";" comments and blank lines skipped, whitespace
#                           around the line trimmed, one pair of surrounding quotes
#                           removed, nothing expanded ($VAR stays literal), lines
#                           that are no valid NAME=value ignored.
#   read_service_env FILE   the same assignments as shell variables service_env_NAME,
#                           exported to nothing: the probe reports them, and root never
#                           runs a program with an environment an env file chose.
load_service_env() {
    each_service_env "$1" export_service_env
}

export_service_env() {
    export "$1=$2"
}

read_service_env() {
    each_service_env "$1" keep_service_env
}

keep_service_env() {
    # NAME is [A-Za-z_][A-Za-z0-9_]* (each_service_env checked it): safe to name a variable.
    eval "service_env_$1=\$2"
}

each_service_env() {
    # each_service_env FILE FUNCTION: FUNCTION NAME VALUE for each assignment of FILE.
    while IFS= read -r line || [ -n "$line" ]; do
        # Trimmed by the shell itself (no sed per line: the probe runs this on every call).
        line=${line#"${line%%[![:space:]]*}"}
        line=${line%"${line##*[![:space:]]}"}
        case $line in ""|"#"*|";"*) continue ;; *=*) ;; *) continue ;; esac
        key=${line%%=*}
        value=${line#*=}
        case $key in ""|[0-9]*|*[!A-Za-z0-9_]*) continue ;; esac
        case $value in
            \"*\") value=${value#\"}; value=${value%\"} ;;
            \'*\') value=${value#\'}; value=${value%\'} ;;
        esac
        "$2" "$key" "$value"
    done < "$1"
}

quote_service_env() (
    # quote_service_env VALUE: VALUE as one single-quoted shell word ('it'\''s'), printed
    # without a newline; with-service-env hands the assignments to the user's shell so.
    # Linear in VALUE's length: split at its quotes by the shell (IFS, no globbing; a "."
    # keeps a trailing empty piece), each piece printed, never a string rebuilt per quote;
    # in a subshell, so its caller's IFS and globbing stay as they were.
    set -f
    IFS=\'
    set -- $1.
    printf "'"
    left=$#
    for piece do  # not shift: dash's moves every parameter left
        left=$((left - 1))
        if [ "$left" -gt 0 ]; then printf "%s'\\\\''" "$piece"; else printf "%s'" "${piece%.}"; fi
    done
)
