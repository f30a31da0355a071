"""Listen on a serving group's rendezvous port for a bounded time, so that each member can show it
reaches the head there before anything starts (control/rendezvous.py). Run on the head by the
system's interpreter, isolated (``/usr/bin/python3 -I``), with the host's connection settings (as
root under ``_sudo``); prints one JSON line.

    rendezvous_listen.py PORT MEMBERS SECONDS

It binds every address (IPv6 and IPv4 where the kernel allows both) and accepts until MEMBERS
connections came or SECONDS passed, closing each at once; nothing is read or sent. A port another
process holds (the group's running head: torch's TCP store) is ``in_use``: the members then reach
that process, which is the path the check is about.
"""

import errno
import json
import socket
import sys
import time


def listening_socket(port):
    """A socket listening on every address at ``port``: dual-stack where IPv6 is there."""
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        address = ("::", port)
    except OSError:
        sock, address = socket.socket(socket.AF_INET, socket.SOCK_STREAM), ("0.0.0.0", port)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def main(argv):
    port, members, seconds = int(argv[0]), int(argv[1]), float(argv[2])
    result = {"listening": False, "in_use": False, "accepted": 0, "peers": [], "error": ""}
    try:
        sock = listening_socket(port)
    except OSError as error:
        result["in_use"] = error.errno == errno.EADDRINUSE
        result["error"] = "" if result["in_use"] else f"{error.strerror} (errno {error.errno})"
        print(json.dumps(result), flush=True)
        return 0
    result["listening"] = True
    deadline = time.monotonic() + seconds
    with sock:
        while result["accepted"] < members:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                connection, peer = sock.accept()
            except socket.timeout:
                break
            connection.close()
            result["accepted"] += 1
            result["peers"].append(peer[0].removeprefix("::ffff:"))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
