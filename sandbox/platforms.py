"""What a sandbox node's platform needs from the sandbox's two servers, fetched on first use.

A platform is what a node runs: its OS (``debian12``, ``debian13``) and its CPU as
``uname -m`` prints it (``x86_64``, ``aarch64``). A node of one needs

- the apt repository's directory of its distro and CPU (``debian12/x86_64``; an Arm
  server's is ``debian12/sbsa``, bringup.platforms.REPO_ARCH),
- the wheels of the product's venv locks for the CPython its distro ships and its CPU
  (Debian 12: ``files/locks/*-cp311-x86_64.txt``; Debian 13: ``*-cp313-*``),
- the wheels of the sandbox locks its field states build venvs from
  (``sandbox/locks/operator-venv-cp311-x86_64.txt`` for ``--state operator``).

``python -m sandbox up`` ensures its node's platform before it starts it (ensure()), so
a first ``make demo`` fetches and builds one platform, not all of them. Both builds are
idempotent and hold their own file locks: two nodes starting at once build once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bringup.platforms import REPO_ARCH
from sandbox import aptrepo, cpus, field_states, image, pypimirror


@dataclass(frozen=True)
class Needs:
    """What one platform needs: apt directories as (distro, repository arch), lock files."""

    apt_dirs: tuple[tuple[str, str], ...]
    locks: tuple[Path, ...]


def parse(text: str) -> tuple[str, str]:
    """(OS, CPU) from ``OS-CPU``; ValueError names the known ones.

    >>> parse("debian13-x86_64")
    ('debian13', 'x86_64')
    >>> parse("debian12-arm64")
    Traceback (most recent call last):
    ...
    ValueError: platform 'debian12-arm64': give OS-CPU, OS one of debian12, debian13, ubuntu2204, ubuntu2404, CPU one of \
aarch64, x86_64
    """
    os_name, _, machine = text.partition("-")
    if os_name not in image.OSES or machine not in cpus.DPKG_ARCHES:
        raise ValueError(f"platform {text!r}: give OS-CPU, OS one of {', '.join(sorted(image.OSES))}, "
                         f"CPU one of {', '.join(sorted(cpus.DPKG_ARCHES))}")
    return os_name, machine


def needs(os_name: str, machine: str, states=(), locks=None) -> Needs:
    """What a node of *os_name* on *machine* with field *states* needs, out of *locks*
    (default: every lock the mirror knows, pypimirror.lock_files()).

    >>> locks = [Path("files/locks/uv-cp311-x86_64.txt"), Path("files/locks/uv-cp313-x86_64.txt"),
    ...          Path("files/locks/uv-cp311-aarch64.txt"), Path("sandbox/locks/operator-venv-cp311-x86_64.txt")]
    >>> needs("debian12", "x86_64", (), locks)
    Needs(apt_dirs=(('debian12', 'x86_64'),), locks=(PosixPath('files/locks/uv-cp311-x86_64.txt'),))
    >>> [lock.name for lock in needs("debian12", "x86_64", ["operator"], locks).locks]
    ['uv-cp311-x86_64.txt', 'operator-venv-cp311-x86_64.txt']
    >>> needs("debian12", "aarch64", (), locks).apt_dirs
    (('debian12', 'sbsa'),)
    """
    locks = pypimirror.lock_files() if locks is None else list(locks)
    python = image.os_spec(os_name).python
    # A field state's lock is named for its state (operator-venv-cp311-x86_64.txt); the
    # node needs those of its own states only, and every product lock of its platform.
    of_states = {state.lock for state in field_states.STATES.values() if state.lock}
    own = {field_states.STATES[name].lock for name in field_states.expand(list(states))}
    wanted = tuple(lock for lock in locks if pypimirror.lock_target(lock)[::2] == (python, machine)
                   and (pypimirror.LOCK_NAME.sub("", lock.name) not in of_states - own))
    return Needs(apt_dirs=((os_name, REPO_ARCH[machine][0]),), locks=wanted)


def ensure(os_name: str, machine: str, states=(), log=sys.stderr) -> Needs:
    """Build and fetch (once) what a node of that platform needs; returns it."""
    wanted = needs(os_name, machine, states)
    aptrepo.ensure_built(wanted.apt_dirs, log)
    pypimirror.build(wanted.locks)
    return wanted
