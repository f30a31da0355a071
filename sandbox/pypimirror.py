"""A site PyPI mirror for sandbox nodes: the wheels of the venv locks, served as a
find-links page over loopback HTTP (the way a site serves a wheelhouse).

    python -m sandbox.pypimirror serve   # download what the locks name (once), serve
    python -m sandbox.pypimirror stop

The wheels come from PyPI (hash-checked against the locks) into a cache shared by
every checkout on this machine; a torch wheel already on this disk is used as is.
"""

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = sorted((ROOT / "files" / "locks").glob("*-cp311-x86_64.txt"))
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-bringup" / "pypi-mirror"
STATE = Path(os.environ.get("SANDBOX_STATE_DIR", ROOT / ".sandbox")) / "pypimirror.json"
DEFAULT_PORT = 8914
# Wheels of this disk that PyPI also serves (same files, so the locks' hashes hold).
LOCAL_WHEELS = Path("/opt/pypi-more/files")
# The node's tags: CPython 3.11, glibc 2.36 (Debian 12), x86_64.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64", "any"]


def locks_digest():
    """One digest over the locks' contents: the mirror is complete for exactly these."""
    digest = hashlib.sha256()
    for lock in LOCKS:
        digest.update(lock.read_bytes())
    return digest.hexdigest()


def build():
    """Download every wheel the locks name into the cache (skipped when done for these locks)."""
    stamp = CACHE / ".complete"
    if stamp.exists() and stamp.read_text() == locks_digest():
        return CACHE
    CACHE.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3",
               "--abi", "none", "--require-hashes", "-d", str(CACHE), "--progress-bar", "off"]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    if LOCAL_WHEELS.is_dir():
        command += ["--find-links", str(LOCAL_WHEELS)]
    for lock in LOCKS:
        command += ["-r", str(lock)]
    # The machine's pip config may cap versions (constraints); the locks are the truth here.
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    temp = stamp.with_suffix(".tmp")
    temp.write_text(locks_digest())
    os.replace(temp, stamp)
    return CACHE


def _answers(url):
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def running():
    """The running mirror's state, or None."""
    try:
        state = json.loads(STATE.read_text())
        os.kill(state["pid"], 0)
    except (OSError, ValueError, KeyError):
        return None
    return state if _answers(state["url"]) else None


def _free_port(preferred):
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]


def serve(port=DEFAULT_PORT):
    """Build if needed and serve the cache on 127.0.0.1; returns ``{"pid", "url"}``."""
    state = running()
    if state:
        return state
    directory = build()
    port = _free_port(port)
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(directory), str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    state = {"pid": server.pid, "url": f"http://127.0.0.1:{port}/"}
    for _ in range(100):
        if _answers(state["url"]):
            break
        time.sleep(0.05)
    STATE.parent.mkdir(parents=True, exist_ok=True)
    temp = STATE.with_suffix(".tmp")
    temp.write_text(json.dumps(state) + "\n")
    os.replace(temp, STATE)
    return state


def stop():
    """Stop the mirror's server, if any."""
    state = running()
    if state:
        os.kill(state["pid"], signal.SIGTERM)
    STATE.unlink(missing_ok=True)


def main(argv):
    if argv[:1] == ["serve"]:
        print(json.dumps(serve(), indent=2))
    elif argv[:1] == ["stop"]:
        stop()
    elif argv[:1] == ["build"]:
        print(build())
    else:
        print("usage: python -m sandbox.pypimirror serve|stop|build", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
