"""Whether the SSH user's sudo runs a command without asking for a password."""

from pyinfra.api import FactBase

# What sudo prints when it would have to ask (sudo -n); pyinfra waits for a password
# at its own prompt on these lines (pyinfra/connectors/util.py SUDO_PASSWORD_REQUIRED_LINES).
ASKS = ("a password is required", "interactive authentication is required")


class SudoAsks(FactBase):
    """
    Returns None when ``sudo -n true`` succeeds as the SSH user, else what sudo said
    (one line, prefixed so that pyinfra never takes it for its password prompt's cue).
    Run it with ``_sudo=False``: it asks sudo itself.

    .. code:: python

        host.get_fact(SudoAsks, _sudo=False)  # "sudo: a password is required"
    """

    # Always exit 0: pyinfra re-runs a failed command after prompting for a password
    # when its output holds sudo's line.
    command = "said=$(sudo -n true 2>&1 </dev/null) && echo ok || printf 'refused %s\\n' \"$said\" | head -n 1; true"

    def requires_command(self):
        return "sudo"

    def process(self, output):
        """
        >>> SudoAsks().process(["ok"]) is None
        True
        >>> SudoAsks().process(["refused sudo: a password is required"])
        'sudo: a password is required'
        """
        line = next((line for line in output if line.startswith("refused ")), None)
        return None if line is None else line[len("refused "):].strip() or "sudo -n failed"


def asks_password(said):
    """Whether sudo's answer means it wants a password (not some other refusal).

    >>> asks_password("sudo: a password is required"), asks_password("sudo-rs: interactive authentication is required")
    (True, True)
    >>> asks_password("ops is not in the sudoers file."), asks_password(None)
    (False, False)
    """
    return bool(said) and any(text in said for text in ASKS)
