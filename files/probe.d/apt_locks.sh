# The apt_locks section: writes apt_locks; facts/sections/apt_locks.py parses them
# (the document's keys: `apt_locks`; docs/facts.md).
probe_apt_locks() {
    # Whoever holds apt's or dpkg's locks now (files/apt-locks.sh): deploy waits for them.
    emit apt_locks 0 "$(apt_lock_holders)"
}
