"""A site PyPI mirror for sandbox nodes: the wheels of the venv locks, served as a
find-links page over loopback HTTP (the way a site serves a wheelhouse), and on the
bridge's 198.18.0.1 for bridged nodes (sandbox.httpserve, sandbox.network).

    python -m sandbox.pypimirror serve     # serve what is downloaded
    python -m sandbox.pypimirror build     # download (once) every lock's wheels
    python -m sandbox fetch debian12-x86_64  # one platform's (what `sandbox up` does first)
    python -m sandbox.pypimirror stop

The locks are every ``*-cpXY-ARCH.txt`` under files/locks/ (the product's venvs) and
sandbox/locks/ (the venvs the sandbox's node states build by hand). The wheels are
fetched per lock on first use: ``python -m sandbox up`` fetches its node's platform's
(sandbox.platforms), and the server serves whatever the cache holds so far. Each lock's
wheels are downloaded for the CPython and CPU its name says (``-cp313-x86_64``:
CPython 3.13 on x86_64, the Debian 13 node's). The wheels come from PyPI
(hash-checked against the locks) into one flat cache shared by every checkout on
this machine; a torch wheel already on this disk is used as is.

A pin that has no wheel for the lock's CPython at all (PyPI has only its sdist,
e.g. outlines-core 0.1.26 for CPython 3.13) is left out with a warning: a venv
from that lock needs it built from source. The lock's stamp lists such gaps.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from control.atomic import atomic_write
from sandbox import registration
from sandbox.fsutil import file_lock
from sandbox.httpserve import StaticServer
from sandbox.statedir import PYPIMIRROR_JSON, PYPIMIRROR_STATE_DIR

ROOT = Path(__file__).resolve().parent.parent
LOCK_DIRS = (ROOT / "files" / "locks", ROOT / "sandbox" / "locks")
LOCK_NAME = re.compile(r"-cp3(?P<minor>\d+)-(?P<arch>x86_64|aarch64)\.txt$")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-bringup" / "pypi-mirror"
STATE_DIR = PYPIMIRROR_STATE_DIR
DEFAULT_PORT = 8914
# Wheels of this disk that PyPI also serves (same files, so the locks' hashes hold).
LOCAL_WHEELS = Path("/opt/pypi-more/files")
# glibc of the sandbox node that runs each CPython: Debian 12 (3.11) has 2.36,
# Debian 13 (3.13) 2.41; a wheel needing more would not install there.
NODE_GLIBC_MINOR = {"3.11": 36, "3.13": 41}


SERVER = StaticServer(CACHE, PYPIMIRROR_JSON, STATE_DIR / "pypimirror.log")


def lock_files():
    """Every lock the mirror serves, sorted (files/locks/ first, then sandbox/locks/)."""
    return [lock for folder in LOCK_DIRS for lock in sorted(folder.glob("*.txt")) if LOCK_NAME.search(lock.name)]


def lock_target(lock):
    """(python version, CPython ABI, CPU) a lock is resolved for, read from its name.

    >>> lock_target(Path("files/locks/sglang-0.5.23-cp313-x86_64.txt"))
    ('3.13', 'cp313', 'x86_64')
    """
    match = LOCK_NAME.search(Path(lock).name)
    if not match:
        raise ValueError(f"{lock}: a lock's name ends in -cpXY-ARCH.txt")
    minor, arch = match["minor"], match["arch"]
    return f"3.{minor}", f"cp3{minor}", arch


def platform_tags(python_version, arch):
    """Wheel platform tags a node of that CPython accepts, newest glibc first.

    >>> platform_tags("3.11", "x86_64")[:2], platform_tags("3.11", "x86_64")[-2:]
    (['manylinux_2_36_x86_64', 'manylinux_2_35_x86_64'], ['linux_x86_64', 'any'])
    """
    top = NODE_GLIBC_MINOR.get(python_version, 36)
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(top, 4, -1)]
    tags += [f"manylinux2014_{arch}"]
    if arch == "x86_64":
        tags += ["manylinux2010_x86_64", "manylinux1_x86_64"]
    return tags + [f"linux_{arch}", "any"]


def lock_stamp(lock):
    """The file marking a lock's wheels as complete in the cache (named by content and target).

    Per lock, so that checkouts with other lock sets do not undo each other's stamps.
    """
    digest = hashlib.sha256(Path(lock).read_bytes() + repr(lock_target(lock)).encode()).hexdigest()
    return CACHE / ".complete.d" / digest[:32]


def download_command(lock, requirements=None):
    """`pip download` of one lock's wheels, for the lock's CPython and CPU, into the cache.

    *requirements*: the file to read instead of the lock (the lock less its gaps).
    """
    python_version, abi, arch = lock_target(lock)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp", "--abi", abi, "--abi", "abi3",
               "--abi", "none", "--require-hashes", "-d", str(CACHE), "--progress-bar", "off"]
    for platform in platform_tags(python_version, arch):
        command += ["--platform", platform]
    if LOCAL_WHEELS.is_dir():
        command += ["--find-links", str(LOCAL_WHEELS)]
    return command + ["-r", str(requirements or lock)]


def without_pins(text, names):
    r"""A lock's text less the requirements (pin and hash lines) of *names*.

    >>> lock = "a==1 \\\n    --hash=sha256:x\n    # via b\nb==2 \\\n    --hash=sha256:y\n"
    >>> [line.split()[0] for line in without_pins(lock, {"a"}).splitlines()]
    ['#', 'b==2', '--hash=sha256:y']
    """
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line[:1].strip() and not line.startswith("#"):
            skipping = re.split(r"[=<>!~ \[;]", line, maxsplit=1)[0].lower() in names
        elif not line.lstrip().startswith("--hash"):
            skipping = False
        if not skipping:
            kept.append(line)
    return "".join(kept)


def download_lock(lock, env, max_gaps=10):
    """Download one lock's wheels; returns the pins left out for want of a wheel ("name==version")."""
    gaps, requirements = [], None
    for _ in range(max_gaps + 1):
        proc = subprocess.run(download_command(lock, requirements), env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if proc.returncode == 0:
            if requirements:
                requirements.unlink()
            return gaps
        missing = re.search(r"No matching distribution found for ([A-Za-z0-9_.-]+)==(\S+)", proc.stderr)
        if not missing:
            raise RuntimeError(f"pip download of {lock.name} failed:\n{proc.stderr[-3000:]}")
        gaps.append(f"{missing[1].lower()}=={missing[2]}")
        print(f"pypimirror: {lock.name}: no {lock_target(lock)[1]} wheel of {gaps[-1]} (PyPI has no such "
              f"wheel); left out, a venv from this lock must build it from source", file=sys.stderr, flush=True)
        requirements = CACHE / ".complete.d" / f"{lock.name}.partial"
        requirements.parent.mkdir(exist_ok=True)
        requirements.write_text(without_pins(lock.read_text(), {gap.split("==")[0] for gap in gaps}))
    raise RuntimeError(f"{lock.name}: more than {max_gaps} pins without a wheel: {', '.join(gaps)}")


def build(locks=None):
    """Download the wheels *locks* name (default: every lock's) into the cache, each lock
    once per its content (its stamp); two callers at once: the second waits, then finds
    the stamps."""
    CACHE.mkdir(parents=True, exist_ok=True)
    # The machine's pip config may cap versions (constraints); the locks are the truth here.
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    with file_lock(CACHE / ".lock"):
        for lock in lock_files() if locks is None else [Path(lock) for lock in locks]:
            stamp = lock_stamp(lock)
            if stamp.exists():
                continue
            # One pip per lock: two locks may pin one package at two versions.
            print(f"pypimirror: downloading the wheels of {lock.name}", file=sys.stderr, flush=True)
            gaps = download_lock(lock, env)
            stamp.parent.mkdir(exist_ok=True)
            atomic_write(stamp, json.dumps({"lock": str(lock.relative_to(ROOT)), "no_wheel": gaps}) + "\n")
    return CACHE


def running():
    """The running mirror's state (``url``: its find-links page), or None."""
    return SERVER.running()


def serve(locks=(), port=DEFAULT_PORT):
    """Download *locks*' wheels if needed and serve the cache on 127.0.0.1 (what it holds:
    a find-links page lists the files there), and on the bridge once it exists; returns the
    server's state."""
    if locks:
        build(locks)
    # One start at a time per state directory: two callers that both found no server (the
    # workers of a parallel test run, released together by the build's lock) would each
    # start one, and the second's state file would retire the first while it was starting.
    with file_lock(STATE_DIR / "pypimirror.lock"):
        state = running() or SERVER.start("127.0.0.1", port, any_port_if_busy=True)
    registration.publish()  # the nodes' registered host list names the mirror
    return state


def stop():
    """Stop the mirror's server, if any."""
    SERVER.stop()
    registration.publish()


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m sandbox.pypimirror",
                                     epilog="One platform's locks: python -m sandbox fetch OS-CPU")
    parser.add_argument("command", choices=("serve", "stop", "build"),
                        help="serve what is downloaded; stop; build: download every lock's wheels")
    args = parser.parse_args(argv)
    if args.command == "serve":
        print(json.dumps(serve(), indent=2))
    elif args.command == "stop":
        stop()
    else:
        print(build())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
