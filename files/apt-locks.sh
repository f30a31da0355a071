# Sourced by the probe (files/probe.d/, shipped with it in one command) and sent with the deploy's
# wait for apt (tasks/operations/packages.py apt_unlocked): who holds apt's and dpkg's
# locks now.
#
#   apt_lock_holders   one line per holder: "<lock file> <pid> <command line>"
#
# apt and dpkg take POSIX (fcntl) locks on these files; flock(1) takes FLOCK ones,
# which apt would not see, but a holder of either is at work on the package system.
# /proc/locks lists both by device:inode with the holder's pid (in this PID namespace).
# (APT_LOCK_FILES is set only by the tests, to files of their own.)
APT_LOCK_FILES=${APT_LOCK_FILES:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}

apt_lock_holders() {
    # One stat and one pass over /proc/locks for all the files (the probe's hot path).
    # /proc/locks: "1: POSIX  ADVISORY  WRITE 4727 00:87:16623183 0 EOF"; "1: -> ..." lines are waiters.
    # shellcheck disable=SC2086
    stat -c '%i %n' $APT_LOCK_FILES 2>/dev/null | awk '
        NR == FNR { lock[$1] = $2; next }
        $2 != "->" { n = split($6, id, ":"); if (id[n] in lock) print lock[id[n]], $5 }' - /proc/locks 2>/dev/null |
        sort -u | while read -r lock pid; do
            printf '%s %s %s\n' "$lock" "$pid" "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-160)"
        done
}
