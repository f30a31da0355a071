"""Serve .sandbox/aptrepo/ over HTTP on the loopback, in the background.

``start()`` launches ``python3 -m sandbox.aptrepo _server`` as a detached
process (own session, log in .sandbox/aptrepo-server.log); the server writes
server.json itself once it listens, so the port is known even for --port 0.
server.json is trusted only while its pid is alive, is this server, and
answers HTTP; otherwise it is stale and removed.
"""

from __future__ import annotations

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

from sandbox.aptrepo.build import (DEFAULT_HOST, FINGERPRINT_FILE, REPO_REL, REPO_ROOT, SANDBOX,
                                   SERVE_ROOT, SERVER_JSON, pubkey_name)

LOG_FILE = SANDBOX / "aptrepo-server.log"
MARKER = "sandbox.aptrepo"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not a server
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return MARKER in cmdline and "_server" in cmdline


def _answers(url: str, timeout: float = 2.0) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def read_info() -> dict | None:
    try:
        return json.loads(SERVER_JSON.read_text())
    except (OSError, ValueError):
        return None


def write_info(info: dict) -> None:
    tmp = SERVER_JSON.with_name(f".server.json.{os.getpid()}")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, SERVER_JSON)


def refresh_key(info: dict) -> dict:
    """Point server.json at the current key (after a build made or changed it)."""
    fpr = FINGERPRINT_FILE.read_text().strip() if FINGERPRINT_FILE.is_file() else ""
    key_url = f"{info['repo_url']}{pubkey_name(fpr)}" if fpr else ""
    if (info.get("fingerprint"), info.get("key_url")) != (fpr, key_url):
        info = dict(info, fingerprint=fpr, key_url=key_url)
        write_info(info)
    return info


def running() -> dict | None:
    """server.json's content if that server is up, else None (a stale file is removed)."""
    info = read_info()
    if not info:
        return None
    if _alive(int(info.get("pid", 0))):
        return info
    try:
        SERVER_JSON.unlink()
    except FileNotFoundError:
        pass
    return None


def start(host: str = DEFAULT_HOST, port: int = 0, any_port_if_busy: bool = False,
          timeout: float = 15.0) -> dict:
    """Start the server (caller holds the repo lock and checked running())."""
    SANDBOX.mkdir(parents=True, exist_ok=True)
    try:
        SERVER_JSON.unlink()
    except FileNotFoundError:
        pass
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with open(LOG_FILE, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sandbox.aptrepo", "_server", "--host", host, "--port", str(port),
             *(["--or-any-port"] if any_port_if_busy else [])],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = read_info()
        if info and info.get("pid") == proc.pid and _answers(info["url"]):
            return info
        if proc.poll() is not None:
            tail = LOG_FILE.read_text(errors="replace")[-2000:] if LOG_FILE.exists() else ""
            raise RuntimeError(f"apt repo server exited with {proc.returncode}:\n{tail}")
        time.sleep(0.05)
    proc.terminate()
    raise RuntimeError(f"apt repo server did not come up within {timeout} s (log: {LOG_FILE})")


def stop(pid: int | None = None, timeout: float = 5.0) -> dict | None:
    """Stop the server server.json names (only if it is *pid*, when given).

    Returns what server.json said, None if no server (or another one) ran.
    """
    info = read_info()
    if not info or (pid is not None and int(info.get("pid", 0)) != pid):
        return None
    pid = int(info.get("pid", 0))
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    current = read_info()
    if current and current.get("pid") == pid:
        try:
            SERVER_JSON.unlink()
        except FileNotFoundError:
            pass
    return info


class _Handler(SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):  # one line per request into the log file
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))


def _hold_lease(httpd, interval: float = 0.5) -> None:
    """server.json is this server's lease: when it is gone (the repository was
    wiped) or names another server, stop, so no orphan keeps the port."""
    while True:
        time.sleep(interval)
        info = read_info()
        if info is None and SERVER_JSON.exists():
            continue  # being replaced right now
        if info is None or info.get("pid") != os.getpid():
            print("aptrepo: server.json no longer names this server; exiting", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            return


def serve_forever(host: str, port: int, any_port_if_busy: bool = False) -> None:
    """The server process itself (python3 -m sandbox.aptrepo _server)."""
    SERVE_ROOT.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_Handler, directory=str(SERVE_ROOT))
    try:
        httpd = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        if not (any_port_if_busy and exc.errno == errno.EADDRINUSE):
            raise
        httpd = ThreadingHTTPServer((host, 0), handler)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    base = f"http://{host}:{port}"
    fpr = FINGERPRINT_FILE.read_text().strip() if FINGERPRINT_FILE.is_file() else ""
    info = {
        "pid": os.getpid(),
        "url": f"{base}/compute/cuda/repos/",
        "fingerprint": fpr,
        "key_url": f"{base}/{REPO_REL}/{pubkey_name(fpr)}" if fpr else "",
        "repo_url": f"{base}/{REPO_REL}/",
        "host": host,
        "port": port,
        "root": str(SERVE_ROOT),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_info(info)

    def _term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _term)
    threading.Thread(target=_hold_lease, args=(httpd,), daemon=True).start()
    print(f"aptrepo: serving {SERVE_ROOT} at {base}/ (pid {os.getpid()})", file=sys.stderr, flush=True)
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        info_now = read_info()
        if info_now and info_now.get("pid") == os.getpid():
            try:
                SERVER_JSON.unlink()
            except FileNotFoundError:
                pass
