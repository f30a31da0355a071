"""Whether the SSH user's sudo runs pyinfra's commands without asking for a password."""

import shlex

from pyinfra.api import FactBase

# What sudo prints when it would have to ask (sudo -n); pyinfra waits for a password
# at its own prompt on these lines (pyinfra/connectors/util.py SUDO_PASSWORD_REQUIRED_LINES).
ASKS = ("a password is required", "interactive authentication is required")


def sudo_check_command(user=None, login=False, preserve_env=False):
    """The command pyinfra's sudo would run (``sudo -H -n [-i] [-E] [-u USER] sh -c``),
    asked with no cached credential (``-k``: a timestamp that expires mid-deploy would
    ask then), under the C locale; it always exits 0 and prefixes sudo's lines (up to
    20: a hostname warning may come first) so that pyinfra never takes them for its
    prompt's cue.

    >>> sudo_check_command(user="svc").split(" && ")[0]
    'said=$(LC_ALL=C sudo -H -n -k -u svc sh -c true 2>&1 </dev/null)'
    """
    words = ["sudo", "-H", "-n", "-k", *(["-i"] if login else []), *(["-E"] if preserve_env else []),
             *(["-u", user] if user else []), "sh", "-c", "true"]
    return (f"said=$(LC_ALL=C {shlex.join(words)} 2>&1 </dev/null) && echo ok || "
            "printf '%s\\n' \"$said\" | sed -n '1,20s/^/refused /p'; true")


class SudoAsks(FactBase):
    """
    Returns None when sudo runs a command as pyinfra would run it without a password,
    else what sudo said (its lines joined). Run it with ``_sudo=False``: it asks sudo
    itself.

    + user, login, preserve_env: pyinfra's ``_sudo_user``, ``_use_sudo_login``,
      ``_preserve_sudo_env`` for the host

    .. code:: python

        host.get_fact(SudoAsks, user=None, login=False, preserve_env=False, _sudo=False)
        # "sudo: a password is required"
    """

    def command(self, user=None, login=False, preserve_env=False):
        return sudo_check_command(user, login, preserve_env)

    def requires_command(self, user=None, login=False, preserve_env=False):
        return "sudo"

    def process(self, output):
        """
        >>> SudoAsks().process(["ok"]) is None
        True
        >>> SudoAsks().process(["refused sudo: unable to resolve host vm-1", "refused sudo: a password is required"])
        'sudo: unable to resolve host vm-1; sudo: a password is required'
        """
        said = [line[len("refused "):].strip() for line in output if line.startswith("refused ")]
        if "ok" in output and not said:
            return None
        return "; ".join(line for line in said if line) or "sudo -n failed"


def asks_password(said):
    """Whether sudo's answer means it wants a password (not some other refusal).

    >>> asks_password("sudo: a password is required"), asks_password("sudo-rs: interactive authentication is required")
    (True, True)
    >>> asks_password("sudo: unable to resolve host vm-1; sudo: a password is required")
    True
    >>> asks_password("ops is not in the sudoers file."), asks_password(None)
    (False, False)
    """
    return bool(said) and any(text in said for text in ASKS)
