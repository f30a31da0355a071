"""``make lock CUDA_REPO_URL=sandbox``: the toolkit and driver locks read from this
repository, the way ``python -m control.locks`` reads any mirror: a plain ``--repo-url``
(this repository's directory as a ``file://`` URL) and ``--fingerprint`` (its own signing key).

    python -m sandbox.aptrepo lock [--kind cuda|driver|dcgm] [--platforms all|<distro>-<machine>,...]

Builds the repository first (a no-op when built); ``all`` means the platforms it serves.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bringup.platforms import REPO_ARCH
from control import locks as lockgen
from sandbox.aptrepo.build import SERVE_ROOT, build

REPOS_DIR = SERVE_ROOT / "compute" / "cuda" / "repos"


def lock_source(log=sys.stderr) -> tuple[str, str]:
    """Build (a no-op when built); the repos base as a file URL and the fingerprint of the
    key that signs it (the repository's own, generated once)."""
    built = build(log=log)
    return REPOS_DIR.as_uri(), built["fingerprint"]


def served_platforms(repos: Path) -> set[tuple[str, str]]:
    """(distro, machine) of every directory under ``repos`` with a signed index
    (``<distro>/<repository arch>/InRelease``)."""
    machines = {arch: machine for machine, (arch, _) in REPO_ARCH.items()}
    return {(path.parent.parent.name, machines[path.parent.name]) for path in Path(repos).glob("*/*/InRelease")
            if path.parent.name in machines}


def lock_arguments(url: str, fingerprint: str, platforms: str, served, kind: str = "cuda") -> list[str]:
    """``python -m control.locks`` arguments that lock ``platforms`` from the repository at
    ``url``; ``all`` (or nothing) is the platforms it ``served``, named one by one.

    >>> lock_arguments("file:///r", "F" * 8, "all", {("debian13", "x86_64"), ("debian12", "x86_64")})
    ['cuda', '--repo-url', 'file:///r', '--fingerprint', 'FFFFFFFF', '--platforms', 'debian12-x86_64,debian13-x86_64']
    >>> lock_arguments("file:///r", "F" * 8, "debian12-aarch64", set(), kind="driver")[::6]
    ['driver', 'debian12-aarch64']
    """
    if not platforms.strip() or platforms.strip() == "all":
        platforms = ",".join(f"{distro}-{machine}" for distro, machine in lockgen.parse_platforms("all", served))
    return [kind, "--repo-url", url, "--fingerprint", fingerprint, "--platforms", platforms]


def lock(platforms: str = "all", log=sys.stderr, kind: str = "cuda") -> int:
    """Build, then run control.locks (``kind``: cuda, driver or dcgm) on this repository; its exit status."""
    url, fingerprint = lock_source(log)
    return lockgen.main(lock_arguments(url, fingerprint, platforms, served_platforms(REPOS_DIR), kind))
