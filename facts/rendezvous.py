"""A serving group's rendezvous port, tried from each member while the head listens on it
(control/rendezvous.py runs both at once, when the group's members are planned). Read-only in the
sense that matters: the head listens for a few seconds and closes every connection at once, a
member connects and closes; nothing is written, and nothing runs past its own bound (the
listener's seconds, a member's), even when the control side gave up waiting sooner.

    pyinfra gpu-b fact facts.rendezvous.RendezvousReach address=10.0.0.1 port=29500 seconds=3
"""

import json
import shlex
from pathlib import Path

from pyinfra.api import FactBase

from facts.system_python import PYTHON, script_command

SCRIPT = Path(__file__).resolve().parent.parent / "files" / "rendezvous_listen.py"
# One connect's bound: a dropped SYN is retried by the kernel for minutes otherwise.
CONNECT_SECONDS = 2


def listen_command(port, members, seconds):
    """The head's command: files/rendezvous_listen.py, sent inside it (facts/system_python.py).

    >>> listen_command(29500, 1, 12).startswith("if [ -x /usr/bin/python3 ]; then /usr/bin/python3 -I -c ")
    True
    """
    missing = json.dumps({"listening": False, "in_use": False, "error": f"{PYTHON} is missing"})
    return script_command(SCRIPT, [str(int(port)), str(int(members)), str(float(seconds))], missing)


def parse_listen(output):
    """The listener's JSON line, or what stands for it when there is none.

    >>> parse_listen(['{"listening": true, "in_use": false, "accepted": 1, "peers": ["10.0.0.2"], "error": ""}'])
    {'listening': True, 'in_use': False, 'accepted': 1, 'peers': ['10.0.0.2'], 'error': ''}
    >>> parse_listen([])["error"]
    'the listener printed nothing'
    """
    for line in reversed(list(output)):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {"listening": False, "in_use": False, "accepted": 0, "peers": [], "error": "the listener printed nothing"}


def reach_command(address, port, seconds):
    """A member's command: connect to ``address``:``port`` (bash's /dev/tcp, each try bounded by
    CONNECT_SECONDS), again while it is refused, until it succeeds or ``seconds`` passed; prints
    ``reach=`` and ``why=``.

    >>> "/dev/tcp/" in reach_command("10.0.0.1", 29500, 10)
    True
    """
    probe = 'exec 3<>"/dev/tcp/$0/$1"'
    # The system's programs in the C locale: the kernel's answer is matched in English below.
    return ("export LC_ALL=C LANGUAGE= PATH=/usr/sbin:/usr/bin:/sbin:/bin; "
            f"deadline=$(( $(date +%s) + {int(seconds)} )); why=; "
            f"while :; do out=$(timeout {CONNECT_SECONDS} bash -c {shlex.quote(probe)} "
            f"{shlex.quote(str(address))} {int(port)} 2>&1); rc=$?; "
            "if [ $rc -eq 0 ]; then echo reach=connected; exit 0; fi; "
            "if [ $rc -eq 124 ]; then why='timed out'; else why=$(printf '%s\\n' \"$out\" | head -n 1); fi; "
            # Only a refusal is tried again (the head's listener may not be up yet): a drop or no
            # route is the answer.
            "case $why in *refused*) ;; *) break ;; esac; "
            "[ \"$(date +%s)\" -lt \"$deadline\" ] || break; sleep 0.5; done; "
            "echo reach=failed; printf 'why=%s\\n' \"$why\"")


def parse_reach(output):
    """``{"reached": bool, "why": str}`` from a member's lines: why a connect failed, as the
    kernel said it (refused: nothing listens or a firewall rejects; timed out: a firewall drops).

    >>> parse_reach(["reach=connected"])
    {'reached': True, 'why': ''}
    >>> parse_reach(["reach=failed", "why=10.0.0.1: connect: Connection refused"])
    {'reached': False, 'why': 'connection refused'}
    >>> parse_reach(["reach=failed", "why=gpu-a.lan: line 1: gpu-a.lan: Name or service not known"])["why"]
    'name or service not known'
    >>> parse_reach(["reach=failed", "why=timed out"])
    {'reached': False, 'why': 'timed out (dropped on the way: a firewall, or no host at that address)'}
    """
    lines = dict(line.partition("=")[::2] for line in output if "=" in line)
    if lines.get("reach") == "connected":
        return {"reached": True, "why": ""}
    # bash names the address as its $0: "10.0.0.1: connect: Connection refused", or
    # "no-such.host: line 1: no-such.host: Name or service not known".
    why = lines.get("why", "").rpartition(": ")[2].strip()
    if why == "timed out":
        why = "timed out (dropped on the way: a firewall, or no host at that address)"
    return {"reached": False, "why": (why[:1].lower() + why[1:]) if why else "no answer"}


class RendezvousListen(FactBase):
    """
    ``{"listening", "in_use", "accepted", "peers", "error"}``: the head listened on ``port`` (or
    found it held) for up to ``seconds``, until ``members`` connections came.
    """

    def command(self, port, members, seconds):
        return listen_command(port, members, seconds)

    def process(self, output):
        return parse_listen(output)


class RendezvousReach(FactBase):
    """
    ``{"reached", "why"}``: this member connected to ``address``:``port`` within ``seconds``.
    """

    def command(self, address, port, seconds):
        return reach_command(address, port, seconds)

    def process(self, output):
        return parse_reach(output)
