"""The ``account`` section: the service account as found -> ``account``.

Its shell fragment is files/probe.d/account.sh (``probe_account``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import INT, OPT_STR, STR, Optional
from facts.probe_framing import Key, ProbeSection


def service_account(by_name):
    """The ``account``/``account-login``/``account-home`` sections -> the service account as
    found: its passwd entry (None: no such account), the user the probe ran for, and what
    is at its planned home (None: nothing). None when the probe did not look.

    >>> from facts.probe_framing import Section
    >>> found = service_account({"account": Section("account", 0, ("user", "sshd"),
    ...     ["sshd:x:101:65534::/run/sshd:/usr/sbin/nologin"]), "account-login": Section("account-login", 0, (),
    ...     ["ops"]), "account-home": Section("account-home", 1, ("path", "/var/lib/sshd"))})
    >>> found["entry"], found["login_user"], found["home"]
    ({'uid': 101, 'gid': 65534, 'gecos': '', 'home': '/run/sshd', 'shell': '/usr/sbin/nologin'}, 'ops', None)
    """
    section = by_name.get("account")
    if section is None or not section.attr:
        return None
    entry = None
    if section.rc == 0 and section.lines:
        fields = section.lines[0].split(":")
        if len(fields) != 7 or not fields[2].isdigit() or not fields[3].isdigit():
            raise ValueError(f"unexpected passwd entry for {section.attr[1]}: {section.lines[0]!r}")
        entry = {"uid": int(fields[2]), "gid": int(fields[3]), "gecos": fields[4], "home": fields[5],
                 "shell": fields[6]}
    login = by_name.get("account-login")
    home_section = by_name.get("account-home")
    home = None
    if home_section is not None and home_section.rc == 0 and home_section.lines and home_section.attr:
        user, mode, kind = (home_section.lines[0].split(" ", 2) + ["", ""])[:3]
        home = {"path": home_section.attr[1], "user": user, "mode": mode, "kind": kind}
    return {"user": section.attr[1], "entry": entry, "login_user": (login.text.strip() or None) if login else None,
            "home": home}


SECTION = ProbeSection(
    name="account",
    group=4,
    raw=("account", "account-login", "account-home"),
    keys={
        "account": Key(
            parse=service_account,
            schema=Optional({
                "user": STR,
                "entry": Optional({"uid": INT, "gid": INT, "gecos": STR, "home": STR, "shell": STR}),
                "login_user": OPT_STR,
                "home": Optional({"path": STR, "user": STR, "mode": STR, "kind": STR}),
            }),
            meaning=(
                "the service account as found (`getent passwd <service_user>`), who the probe ran for, and what is "
                "at the account's planned home; null from an older probe"
            ),
        ),
    },
)
