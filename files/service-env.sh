# Sourced by files/probe.sh (shipped with it in one command) and files/with-service-env:
# the node side's one reader of a systemd EnvironmentFile (systemd.exec(5)).
#
#   load_service_env FILE   export FILE's assignments the way systemd reads them:
#                           "#"/";" comments and blank lines skipped, whitespace
#                           around the line trimmed, one pair of surrounding quotes
#                           removed, nothing expanded ($VAR stays literal), lines
#                           that are no valid NAME=value ignored.
load_service_env() {
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
        export "$key=$value"
    done < "$1"
}
