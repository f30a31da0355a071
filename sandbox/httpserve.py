"""Serve a directory over HTTP on the loopback, in the background: the sandbox's apt
repository and its wheel mirror, each a site mirror stand-in that nodes reach.

    python -m sandbox.httpserve --root DIR --state FILE [--host H] [--port P] [--or-any-port] [--bridge ADDR]

runs the server itself; ``StaticServer`` starts, finds and stops one. The server
writes its state file (JSON: ``pid``, ``url``, ``host``, ``port``, ``root``,
``started_at``, ``bridge``) once it listens, so the port is known even for ``--port 0``. The
file is the server's lease: when it disappears or names another pid, the server
exits, so no orphan keeps a port. A state file is trusted only while its pid is
alive, is such a server, and answers HTTP; otherwise it is stale and removed.

``--bridge ADDR`` (``StaticServer.start`` passes the sandbox's bridge, 198.18.0.1:
sandbox.network): the server also listens on ADDR, at the same port, as soon as this
machine has that address (checked at start, then every half second: the bridge is made
when the first bridged node starts, maybe after the server), so bridged nodes, which do
not share this machine's loopback, reach it there. ``bridge`` in the state names ADDR
(sandbox.network.via_bridge gives the URLs on it); nothing listens beyond loopback and the
bridge.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from control.atomic import atomic_write
from sandbox.network import GATEWAY

REPO_ROOT = Path(__file__).resolve().parent.parent
MARKER = "sandbox.httpserve"


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether ``url`` answers 200 (loopback: never through a proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status == 200
    except OSError:
        return False


def _is_server(pid: int) -> bool:
    """Whether ``pid`` is alive, not a zombie, and one of these servers."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] in "ZX":
                return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError):
        return False
    return MARKER in cmdline


def alive(info: dict | None) -> bool:
    """Whether the state ``info`` names a live server of this module (HTTP not asked)."""
    return bool(info) and _is_server(int(info.get("pid", 0)))


def read_state(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


class StaticServer:
    """One background server of ``root``, known by its state file."""

    def __init__(self, root: Path, state: Path, log: Path):
        self.root, self.state, self.log = Path(root), Path(state), Path(log)

    def running(self) -> dict | None:
        """The state of the running server, or None (a stale state file is removed)."""
        info = read_state(self.state)
        if info and _is_server(int(info.get("pid", 0))) and answers(info["url"]):
            return info
        if info:
            self.state.unlink(missing_ok=True)
        return None

    def update(self, **fields) -> dict:
        """Add fields to the running server's state (the lease stays its own)."""
        info = dict(read_state(self.state) or {}, **fields)
        atomic_write(self.state, json.dumps(info, indent=2) + "\n")
        return info

    def start(self, host: str = "127.0.0.1", port: int = 0, any_port_if_busy: bool = False,
              timeout: float = 15.0, bridge: str | None = GATEWAY) -> dict:
        """Start a server (the caller checked ``running()``); returns its state. It also
        listens on *bridge* (the bridged nodes' gateway) whenever this machine has it."""
        self.state.parent.mkdir(parents=True, exist_ok=True)
        self.state.unlink(missing_ok=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        command = [sys.executable, "-m", MARKER, "--root", str(self.root), "--state", str(self.state),
                   "--host", host, "--port", str(port), *(["--or-any-port"] if any_port_if_busy else []),
                   *(["--bridge", bridge] if bridge else [])]
        with open(self.log, "ab") as log:
            process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=log, start_new_session=True, close_fds=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = read_state(self.state)
            if info and info.get("pid") == process.pid and answers(info["url"]):
                return info
            if process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
                raise RuntimeError(f"server of {self.root} exited with {process.returncode}:\n{tail}")
            time.sleep(0.05)
        process.terminate()
        raise RuntimeError(f"server of {self.root} did not come up within {timeout} s (log: {self.log})")

    def stop(self, pid: int | None = None, timeout: float = 5.0) -> dict | None:
        """Stop the server the state names (only if it is ``pid``, when given); returns
        what the state said, None if no server (or another one) ran."""
        info = read_state(self.state)
        if not info or (pid is not None and int(info.get("pid", 0)) != pid):
            return None
        pid = int(info.get("pid", 0))
        if _is_server(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _is_server(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _is_server(pid):
                os.kill(pid, signal.SIGKILL)
        current = read_state(self.state)
        if current and current.get("pid") == pid:
            self.state.unlink(missing_ok=True)
        return info


class _Handler(SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):  # one line per request into the log file
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))


def _hold_lease(state: Path, interval: float = 0.5) -> None:
    while True:
        time.sleep(interval)
        info = read_state(state)
        if info is None and state.exists():
            continue  # being replaced right now
        if info is None or info.get("pid") != os.getpid():
            print(f"httpserve: {state} no longer names this server; exiting", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            return


def _bridge_listener(bridge: str, port: int, handler, warned: list) -> ThreadingHTTPServer | None:
    """One try at listening on bridge:port: None while this machine has no such address, and
    for a port taken there by something else (said once)."""
    try:
        httpd = ThreadingHTTPServer((bridge, port), handler)
    except OSError as error:
        if error.errno != errno.EADDRNOTAVAIL and not warned:
            print(f"httpserve: cannot listen on {bridge}:{port} yet: {error}", file=sys.stderr, flush=True)
            warned.append(error)
        return None
    httpd.daemon_threads = True
    return httpd


def _follow_bridge(httpd: ThreadingHTTPServer | None, bridge: str, port: int, handler,
                   interval: float = 0.5) -> None:
    """Serve on bridge:port too: *httpd* when the start could listen there already, else from
    the moment this machine has the address (once bound, the socket keeps answering even if
    the bridge is made again)."""
    warned: list = []
    while httpd is None:
        time.sleep(interval)
        httpd = _bridge_listener(bridge, port, handler, warned)
    print(f"httpserve: also serving at http://{bridge}:{port}/ (the bridged nodes' gateway)",
          file=sys.stderr, flush=True)
    httpd.serve_forever(poll_interval=0.2)


def serve_forever(root: Path, state: Path, host: str, port: int, any_port_if_busy: bool,
                  bridge: str | None = None) -> None:
    """The server process: serve ``root`` until stopped or the lease is gone; also on
    ``bridge`` once this machine has that address."""
    root.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_Handler, directory=str(root))
    try:
        httpd = ThreadingHTTPServer((host, port), handler)
    except OSError as error:
        if not (any_port_if_busy and error.errno == errno.EADDRINUSE):
            raise
        httpd = ThreadingHTTPServer((host, 0), handler)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    bridge = bridge if bridge != host else None
    if bridge:
        # Bound before the state file is written when the bridge is there already.
        first = _bridge_listener(bridge, port, handler, [])
        threading.Thread(target=_follow_bridge, args=(first, bridge, port, handler), daemon=True).start()
    atomic_write(state, json.dumps({
        "pid": os.getpid(), "url": f"http://{host}:{port}/", "host": host, "port": port, "root": str(root),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **({"bridge": bridge} if bridge else {}),
    }, indent=2) + "\n")

    def _term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    threading.Thread(target=_hold_lease, args=(state,), daemon=True).start()
    print(f"httpserve: serving {root} at http://{host}:{port}/ (pid {os.getpid()})", file=sys.stderr, flush=True)
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        current = read_state(state)
        if current and current.get("pid") == os.getpid():
            state.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MARKER}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--or-any-port", action="store_true")
    parser.add_argument("--bridge", default=None, help="also listen on this address, once this machine has it")
    args = parser.parse_args(argv)
    serve_forever(args.root, args.state, args.host, args.port, args.or_any_port, args.bridge)
    return 0


if __name__ == "__main__":
    sys.exit(main())
