"""The ``apt_locks`` section: who holds apt's or dpkg's locks (files/apt-locks.sh) -> ``apt_locks``.

Its shell fragment is files/probe.d/apt_locks.sh (``probe_apt_locks``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import INT, STR, Items
from facts.probe_framing import Key, ProbeSection


def apt_lock_holders(section):
    """The ``apt_locks`` section: ``<lock file> <pid> <command line>`` per holder.

    >>> from facts.probe_framing import Section
    >>> apt_lock_holders(Section("apt_locks", 0, (), ["/var/lib/dpkg/lock-frontend 812 /usr/bin/python3 "
    ...                                                "/usr/bin/unattended-upgrade"]))
    [{'lock': '/var/lib/dpkg/lock-frontend', 'pid': 812, 'command': '/usr/bin/python3 /usr/bin/unattended-upgrade'}]
    """
    holders = []
    for line in section.lines if section else []:
        lock, _, rest = line.strip().partition(" ")
        pid, _, command = rest.partition(" ")
        if lock and pid.isdigit():
            holders.append({"lock": lock, "pid": int(pid), "command": command.strip()})
    return holders


SECTION = ProbeSection(
    name="apt_locks",
    group=4,
    raw=("apt_locks",),
    keys={
        "apt_locks": Key(
            parse=lambda by_name: apt_lock_holders(by_name.get("apt_locks")),
            schema=Items({"lock": STR, "pid": INT, "command": STR}),
            meaning=(
                "who holds apt's or dpkg's locks now (`files/apt-locks.sh`: `/proc/locks`, POSIX and flock locks on "
                "`/var/lib/dpkg/lock-frontend`, `lock`, `/var/lib/apt/lists/lock`, `/var/cache/apt/archives/lock`); "
                "`[]` when free"
            ),
        ),
    },
)
