"""One look at the SGLang service: systemd's state, its health endpoint's answer and
the unit's journal since a cursor (deploy's readiness gate, tasks/operations/serving.py)."""

import json
import shlex
from pathlib import Path

from pyinfra.api import FactBase

PROBE = (Path(__file__).resolve().parents[1] / "files" / "serving_probe.py").read_text()
# How files/serving_probe.py begins its answer when another process holds the port.
NOT_THE_UNITS = "not the unit's listener"


def unit_pids(unit_name):
    """The shell words of the unit's processes: its main PID and its cgroup's (cgroup v2,
    else v1's systemd hierarchy), digits only; none when it does not run.

    >>> unit_pids("sglang.service")[:53]
    '$({ systemctl show -p MainPID --value sglang.service;'
    """
    name = shlex.quote(unit_name)
    return (f"$({{ systemctl show -p MainPID --value {name}; cg=$(systemctl show -p ControlGroup --value {name}); "
            '[ -n "$cg" ] && cat "/sys/fs/cgroup$cg/cgroup.procs" "/sys/fs/cgroup/systemd$cg/cgroup.procs"; } '
            "2>/dev/null | grep -x '[0-9]*[1-9][0-9]*')")


def probe_command(user, listen, port, key_file, unit_name, what="health"):
    """The shell words that ask the server one question as the service user (who can
    read the API key file; root never runs a script another user owns: this one comes
    from the controller), with the system's python and its standard library
    (files/serving_probe.py), only if the port's listener is one of ``unit_name``'s
    processes (``unit_pids``: a stranger on the port is asked nothing, never gets the key)."""
    return shlex.join(["runuser", "-u", user, "--", "/usr/bin/python3", "-I", "-c", PROBE, listen, port, what,
                       key_file]) + " " + unit_pids(unit_name)


def journal_since(name, started):
    """``journalctl``'s words for the unit's lines since ``started`` (systemd's
    ExecMainStartTimestamp: its current start's), or since the unit's current start.

    >>> journal_since("sglang.service", "Wed 2026-12-02 02:37:36 UTC")
    "journalctl -u sglang.service -o cat --no-pager --since='Wed 2026-12-02 02:37:36 UTC'"
    """
    since = shlex.quote(started) if started else f'"$(systemctl show -p ExecMainStartTimestamp --value {name})"'
    return f"journalctl -u {name} -o cat --no-pager --since={since}"


def look_command(unit_name, user, listen, port, key_file, cursor=""):
    """systemd's state, ``/health``'s answer, and the journal lines since ``cursor``
    (since the unit's current start when "")."""
    name = shlex.quote(unit_name)
    journal = f"journalctl -u {name} -o cat --no-pager --after-cursor={shlex.quote(cursor)}" if cursor else \
        journal_since(name, "")
    return (f"systemctl show {name} -p ActiveState -p SubState -p Result -p NRestarts -p ExecMainStartTimestamp; "
            f"echo probe=$({probe_command(user, listen, port, key_file, unit_name)}); "
            f"{journal} --show-cursor 2>/dev/null | sed 's/^/journal=/'")


def parse_look(lines):
    """``look_command``'s output -> (unit, HTTP status or None, journal lines, cursor).

    >>> parse_look(["ActiveState=active", "SubState=running", "Result=success", "NRestarts=0",
    ...             'probe={"status": 503, "body": null}', "journal=Load weight begin.", "journal=-- cursor: s=1"])
    ({'active_state': 'active', 'sub_state': 'running', 'result': 'success', 'restarts': 0}, 503, ['Load weight begin.'], 's=1')
    """
    keys = {"ActiveState": "active_state", "SubState": "sub_state", "Result": "result", "NRestarts": "restarts",
            "ExecMainStartTimestamp": "started"}
    unit, status, journal, cursor = {}, None, [], ""
    for line in lines:
        key, _, value = line.partition("=")
        if key in keys:
            unit[keys[key]] = int(value) if key == "NRestarts" and value.isdigit() else value
        elif key == "probe":
            try:
                answer = json.loads(value) or {}
                status = answer.get("status")
            except (ValueError, AttributeError):
                answer, status = {}, None
            if status is None and str(answer.get("error") or "").startswith(NOT_THE_UNITS):
                unit["listener"] = answer["error"]
        elif key == "journal":
            if value.startswith("-- cursor: "):
                cursor = value[len("-- cursor: "):]
            else:
                journal.append(value)
    return unit, status, journal, cursor


class ServiceLook(FactBase):
    """
    Returns ``(unit, status, journal, cursor)`` (``parse_look``) of the SGLang unit.

    + unit_name, user, listen, port, key_file: the unit, the service user, where it
      listens and its API key file ("" for none)

    .. code:: python

        host.get_fact(ServiceLook, "sglang.service", "sglang", "127.0.0.1", "30000", "")
    """

    def command(self, unit_name, user, listen, port, key_file):
        return look_command(unit_name, user, listen, port, key_file)

    def process(self, output):
        return parse_look(output)
