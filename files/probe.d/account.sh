# The account section: writes account, account-login, account-home; facts/sections/account.py parses them
# (the document's keys: `account`; docs/facts.md).
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
