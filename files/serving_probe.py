"""Ask the SGLang server on this node one question; print the answer as one JSON line.

    python3 -I serving_probe.py HOST PORT health|generate KEY_FILE [PID...]

Run by deploy's readiness gate and the node suite as the service user (who can read
the key file: root:<service_user> 0640), with the system's python3 and the standard
library only. ``health`` is ``GET /health``; ``generate`` is ``POST /generate`` of one
token (bringup/serving.py: what the pinned release answers).

Asked only when the answer comes from the unit: every socket listening on PORT
(/proc/net/tcp, tcp6) must be held by one of the PIDs (the unit's main PID and the
processes of its cgroup, facts/serving.py finds them), read from /proc/<pid>/fd,
and one must listen (a request to a free port reaches whoever binds it first);
otherwise nothing is sent and the answer is "not the unit's listener" (while SGLang
loads the port is free, and any local user may listen there and answer 200). The API
key (SGLang's ``--config`` YAML, ``api-key: <key>``) goes only with ``generate``, the
request that needs it (``/health`` needs none), in the ``Authorization: Bearer`` header
and nowhere else: never printed.

Prints ``{"status": 200, "body": {...}}``, or ``{"status": null, "error": "..."}`` when
nothing answered. Exit status 0 either way (the caller decides).
"""

import ipaddress
import json
import os
import re
import sys
import urllib.error
import urllib.request

GENERATE = {"text": "The capital city of France is", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}


def api_key(path):
    if not path:
        return ""
    with open(path, encoding="utf-8") as handle:
        found = re.search(r"^\s*api[-_]key\s*:\s*['\"]?([^'\"\s#]+)", handle.read(), re.MULTILINE)
    return found.group(1) if found else ""


def _address(hexed):
    """/proc/net/tcp*'s local address (host byte order, 32-bit words) as an ip_address."""
    raw = bytes.fromhex(hexed)
    return ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))


def listening(host, port):
    """The inodes of the sockets listening on TCP ``port`` that a connection to ``host``
    reaches (bound to it, to its IPv4-mapped form, or to a wildcard), from /proc/net/tcp
    and tcp6 (state 0A: LISTEN)."""
    try:
        target = ipaddress.ip_address(host)
    except ValueError:
        target = None  # not an address (the settings allow none): every listener on the port counts
    reached = {target, ipaddress.ip_address("0.0.0.0"), ipaddress.ip_address("::")}
    if target is not None and target.version == 4:
        reached.add(ipaddress.ip_address(f"::ffff:{target}"))
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) <= 9 or fields[3] != "0A":
                continue
            address, _, bound = fields[1].rpartition(":")
            if int(bound, 16) == int(port) and (target is None or _address(address) in reached):
                inodes.add(fields[9])
    return inodes


def held_by(pids):
    """The socket inodes the processes ``pids`` hold (those whose /proc/<pid>/fd this
    user may read: the unit runs as the service user, as this probe does)."""
    inodes = set()
    for pid in pids:
        if not str(pid).isdigit():
            continue
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    return inodes


def whose(host, port, pids):
    """Why the listener a connection to ``host``:``port`` reaches is not the unit's, or ""
    when there is one and every such listener is held by one of ``pids``."""
    listeners = listening(host, port)
    if not listeners:
        # Nothing is sent: a request would reach whoever listens by the time it connects,
        # and any local user may bind the free port in between.
        return f"nothing listens on port {port}"
    if not pids:
        return f"not the unit's listener: the unit has no process, and something else listens on port {port}"
    if listeners - held_by(pids):
        return f"not the unit's listener: a process outside the unit listens on port {port}; nothing was sent"
    return ""


def ask(host, port, what, key_file="", pids=()):
    # A server bound to every address answers on the loopback.
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    stranger = whose(host, port, pids)
    if stranger:
        return {"status": None, "error": stranger}
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    headers = {"Content-Type": "application/json"}
    key = api_key(key_file) if what == "generate" else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if what == "generate":
        request = urllib.request.Request(url + "/generate", data=json.dumps(GENERATE).encode(), headers=headers)
    else:
        request = urllib.request.Request(url + "/health", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    except (OSError, ValueError) as error:
        return {"status": None, "error": str(getattr(error, "reason", error))}
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode("utf-8", "replace")[:200]
    return {"status": status, "body": body}


if __name__ == "__main__":
    print(json.dumps(ask(*sys.argv[1:5], pids=sys.argv[5:])))
