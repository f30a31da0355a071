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
import subprocess
import sys
from pathlib import Path

from control.atomic import atomic_write
from sandbox.httpserve import StaticServer

ROOT = Path(__file__).resolve().parent.parent
LOCKS = sorted((ROOT / "files" / "locks").glob("*-cp311-x86_64.txt"))
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-bringup" / "pypi-mirror"
STATE_DIR = Path(os.environ.get("SANDBOX_STATE_DIR", ROOT / ".sandbox"))
DEFAULT_PORT = 8914
# Wheels of this disk that PyPI also serves (same files, so the locks' hashes hold).
LOCAL_WHEELS = Path("/opt/pypi-more/files")
# The node's tags: CPython 3.11, glibc 2.36 (Debian 12), x86_64.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64", "any"]


SERVER = StaticServer(CACHE, STATE_DIR / "pypimirror.json", STATE_DIR / "pypimirror.log")


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
    atomic_write(stamp, locks_digest())
    return CACHE


def running():
    """The running mirror's state (``url``: its find-links page), or None."""
    return SERVER.running()


def serve(port=DEFAULT_PORT):
    """Build if needed and serve the cache on 127.0.0.1; returns the server's state."""
    state = running()
    if state:
        return state
    build()
    return SERVER.start("127.0.0.1", port, any_port_if_busy=True)


def stop():
    """Stop the mirror's server, if any."""
    SERVER.stop()


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
