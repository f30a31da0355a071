"""The service account: never one deploy did not create, nor the account it logs in as.

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> check_service_account(PlanContext.of({"account": {"user": "sglang", "entry": None, "login_user": "sglang",
    ...                                                   "home": None}}, Config(), None, found.append))
    >>> [finding.code for finding in found]
    ['SERVICE_USER_FOREIGN']
"""

from bringup.findings import BLOCKER, Finding
from bringup.layout import DEFAULT_SERVICE_USER, SERVICE_ACCOUNT_MARK


def service_account_problem(account, user, home):
    """Why deploy may not make ``user`` (home ``home``) its service account, or None: the
    account it runs as (the SSH user; a lockout: its shell set to nologin, its home moved),
    an account it did not create (no ``SERVICE_ACCOUNT_MARK`` in its GECOS: ``sshd``,
    ``nobody``, an operator's), or a home already there that is not the account's
    (``/var/lib/dpkg`` for ``dpkg``). ``account`` is the facts' ``account`` (None: not
    probed, nothing to say).

    >>> ours = {"uid": 998, "gid": 998, "gecos": SERVICE_ACCOUNT_MARK, "home": "/var/lib/sglang",
    ...         "shell": "/usr/sbin/nologin"}
    >>> service_account_problem({"user": "sglang", "entry": ours, "login_user": "root",
    ...     "home": {"path": "/var/lib/sglang", "user": "sglang", "mode": "755", "kind": "directory"}},
    ...     "sglang", "/var/lib/sglang") is None
    True
    >>> service_account_problem({"user": "sshd", "entry": {"uid": 101, "gid": 65534, "gecos": "",
    ...     "home": "/run/sshd", "shell": "/usr/sbin/nologin"}, "login_user": "root", "home": None},
    ...     "sshd", "/var/lib/sshd")
    'service_user sshd is an existing account gpu-bringup did not create (uid 101, shell /usr/sbin/nologin, home /run/sshd, GECOS empty): deploy would change its shell and home'
    """
    if not account:
        return None
    entry, found = account.get("entry"), account.get("home")
    if account.get("login_user") == user:
        where = f" (uid {entry['uid']}, shell {entry['shell']}, home {entry['home']})" if entry else ""
        return (f"service_user {user} is the account this deploy logs in as{where}: deploy would set its shell "
                "to nologin and move its home (a lockout)")
    if entry and entry.get("gecos") != SERVICE_ACCOUNT_MARK and not _earlier_install(entry, user, home):
        gecos = repr(entry["gecos"]) if entry.get("gecos") else "empty"
        return (f"service_user {user} is an existing account gpu-bringup did not create (uid {entry['uid']}, "
                f"shell {entry['shell']}, home {entry['home']}, GECOS {gecos}): deploy would change its shell and "
                "home")
    if found and (not entry or found.get("user") != user or found.get("kind") != "directory"):
        return (f"the service home {home} is already there ({found.get('kind')}, owner {found.get('user')}, mode "
                f"{found.get('mode')}) and is not {'the account' if entry else 'an account'} gpu-bringup created: "
                "deploy would make it the service user's")
    return None


def _earlier_install(entry, user, home):
    """Whether an unmarked account is the one an earlier release made before accounts were
    marked: the default name, a system uid, the planned home, nologin and an empty GECOS,
    exactly what ``server.user(system=True)`` gave it. The next deploy marks it; every
    other unmarked account (``sshd``, ``nobody``, an operator's, another service's) stays
    refused.

    >>> old = {"uid": 998, "gid": 998, "gecos": "", "home": "/var/lib/sglang", "shell": "/usr/sbin/nologin"}
    >>> _earlier_install(old, "sglang", "/var/lib/sglang"), _earlier_install(old, "redis", "/var/lib/redis")
    (True, False)
    >>> _earlier_install({**old, "uid": 1000}, "sglang", "/var/lib/sglang")
    False
    """
    return (user == DEFAULT_SERVICE_USER and 0 < entry.get("uid", 0) < 1000 and entry.get("home") == home
            and entry.get("shell") == "/usr/sbin/nologin" and not entry.get("gecos"))


def check_service_account(context):
    """SERVICE_USER_FOREIGN when ``service_user`` may not be deploy's account."""
    user, home, add = context.config.service_user, context.layout.service_home, context.add
    problem = service_account_problem(context.facts.get("account"), user, home)
    if problem:
        add(Finding("SERVICE_USER_FOREIGN", BLOCKER, problem,
                    f"set service_user to a name of its own that no account or /var/lib directory has yet (the "
                    f"default is {DEFAULT_SERVICE_USER}); if {user} is an earlier gpu-bringup install's account "
                    f"(made before accounts were marked {SERVICE_ACCOUNT_MARK!r}), remove it first "
                    f"(userdel {user})"))
