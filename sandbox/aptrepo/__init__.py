"""A local NVIDIA-style apt repository made from NVIDIA's CUDA PyPI wheels.

The sandbox node installs its CUDA toolkit the way a real node does: from a
signed, flat apt repository laid out like NVIDIA's
(``.../compute/cuda/repos/debian12/x86_64/``), with NVIDIA's package names
(``cuda-nvcc-13-0``, ``cuda-cudart-dev-13-0``, ``libcurand-dev-13-0`` ...).
The packages are NVIDIA's own PyPI wheels, pinned in ``wheels.lock`` as
release sets: CUDA 13.0 GA (nvcc 13.0.48) and 13.0 update 2 (nvcc 13.0.88,
what a plain ``apt-get install`` takes) in ``/usr/local/cuda-13.0``, and CUDA
12.8 update 1 in ``/usr/local/cuda-12.8``. The stand-ins are the libcuda link
stub in ``cuda-driver-dev-X-Y`` and, because NVIDIA's 12.x wheels carry no
nvcc driver, the version-reporting ``bin/nvcc`` of ``cuda-nvcc-12-8`` (its
ptxas, libNVVM, libdevice and headers are NVIDIA's). Debian 13 nodes get the
same packages from ``.../debian13/x86_64/`` (Ubuntu 22.04 and 24.04 nodes from
``.../ubuntu2204/x86_64/`` and ``.../ubuntu2404/x86_64/``; hard links, their own signed
indexes; the stand-in driver packages under Ubuntu's names there, driver_debs.FAMILIES),
where cuda-keyring's source names that directory (``distro_repo``).
Arm servers (arm64 nodes) get ``.../debian12/sbsa/``: the 13.0 update 2 set re-made
from NVIDIA's aarch64 wheels (``wheels-aarch64.lock``), ``Architecture: arm64``, in
``targets/sbsa-linux``. Each directory is built on first use, when a node of its
platform starts (``ensure_built``, sandbox.platforms), and served from then on.

CLI: ``python3 -m sandbox.aptrepo {build,serve,stop,status,wheels,lock}`` (``lock``: sandbox.aptrepo.lock).
Python::

    from sandbox import aptrepo
    info = aptrepo.ensure_served()   # build debian12/x86_64 if needed, serve if not running
    aptrepo.ensure_built([("debian13", "x86_64")])   # a node's directory, before it starts
    info["url"]          # http://127.0.0.1:PORT/compute/cuda/repos/  (PORT 8913 unless taken)
    info["repo_url"]     # .../compute/cuda/repos/debian12/x86_64/  (a flat repo: suite "/")
    info["key_url"]      # .../debian12/x86_64/<last 8 hex>.pub (armored)
    info["fingerprint"]  # 40 hex, upper case
    aptrepo.stop(pid=info["pid"])    # stop it (only if server.json still names it)

.sandbox/aptrepo/server.json is the server's lease: the server exits by itself
when the file disappears (e.g. the repository was wiped) or names another one.
"""

from __future__ import annotations

import sys
import urllib.parse

from sandbox import registration
from sandbox.aptrepo import server as _serve
from sandbox.aptrepo.build import (ALL_DIRS, DEFAULT_HOST, DEFAULT_PORT, FINGERPRINT_FILE, GNUPGHOME, HOME_DIR,
                                   OTHER_DISTROS, REPO_DIR, SERVE_ROOT, SERVER_JSON, _build_locked, build,
                                   built_dirs, distro_url, pubkey_name, read_distro_manifest, read_manifest,
                                   repo_lock, repo_url)

__all__ = [
    "build", "ensure_built", "serve", "stop", "status", "ensure_served", "running", "distro_repo",
    "built_digest", "built_dirs", "ALL_DIRS", "HOME_DIR", "DEFAULT_HOST", "DEFAULT_PORT", "REPO_DIR", "SERVE_ROOT", "SERVER_JSON", "GNUPGHOME",
    "FINGERPRINT_FILE", "repo_url", "pubkey_name",
]


def running() -> dict | None:
    """server.json's content when its server is up, else None."""
    return _serve.running()


def serve(port: int | None = None, host: str = DEFAULT_HOST, log=sys.stderr, dirs=()) -> tuple[dict, bool]:
    """Build *dirs* if needed and start the server unless one runs (_start_or_reuse); the
    nodes' registered host list then names it (sandbox.registration)."""
    served = _start_or_reuse(port, host, log, dirs)
    registration.publish()
    return served


def _start_or_reuse(port: int | None, host: str, log, dirs=()) -> tuple[dict, bool]:
    """Build *dirs* ((distro, arch) pairs) if needed and start the server unless one runs:
    (server.json content, started?). The directories already built are kept current (the
    keyring's URL names the port served); others are built when a node needs them
    (ensure_built), and served from then on.

    port None: the port the built repository names (its cuda-keyring's source), else
    DEFAULT_PORT, or any free port when that one is taken; 0: any free port. Keeping
    the port keeps the keyring, and the node state layers made from it, unchanged
    across restarts when several checkouts share the machine.
    A server already running is reused whatever port was asked (see status/stop).
    """
    with repo_lock():
        info = _serve.running()
        if info:
            _build_locked(info["repo_url"], False, log, dirs)
            return _serve.refresh_key(info), False
        _build_locked(repo_url(host, port) if port else None, False, log, dirs)
        info = _serve.start(host, _built_port(host) if port is None else port, any_port_if_busy=port is None)
        if built_dirs() and read_manifest().get("repo_url") != info["repo_url"]:
            # The keyring package's sources.list must name the port actually served.
            _build_locked(info["repo_url"], False, log, dirs)
        return _serve.refresh_key(info), True


def ensure_built(dirs, log=sys.stderr) -> dict:
    """Build *dirs* ((distro, arch) pairs) if they are not current, for the URL being
    served (else the one built in); serves nothing. What ``sandbox up`` calls for its node."""
    with repo_lock():
        info = _serve.running()
        result = _build_locked(info["repo_url"] if info else None, False, log, dirs)
        if info:
            _serve.refresh_key(info)
        return result


def _built_port(host: str) -> int:
    """The port the built repository's keyring names, if on *host*, else DEFAULT_PORT.

    >>> _built_port("10.9.9.9")
    8913
    """
    url = urllib.parse.urlsplit(read_manifest().get("repo_url", ""))
    return url.port if url.hostname == host and url.port else DEFAULT_PORT


def ensure_served(port: int | None = None, host: str = DEFAULT_HOST, log=sys.stderr, dirs=(HOME_DIR,)) -> dict:
    """Build *dirs* if needed (default: Debian 12's x86_64 directory, which holds the key
    ``key_url`` names), serve if not running; return server.json's content."""
    return serve(port, host, log, dirs)[0]


def built_digest(distro: str) -> str | None:
    """The manifest digest of *distro*'s directory as built (None when not built); serves nothing."""
    manifest = read_manifest() if distro == "debian12" else read_distro_manifest(distro)
    return manifest.get("digest")


def distro_repo(distro: str, info: dict) -> dict:
    """What a node of *distro* (``debian12``, ``debian13``) uses from the served repository
    *info*: ``repo_url`` (its flat directory) and ``digest`` (of everything built into it, the
    keyring's URL included)."""
    if distro == "debian12":
        return {"repo_url": info["repo_url"], "digest": read_manifest()["digest"]}
    if distro not in OTHER_DISTROS:
        raise ValueError(f"the sandbox apt repository serves no {distro} directory")
    return {"repo_url": distro_url(info["repo_url"], distro), "digest": read_distro_manifest(distro)["digest"]}


def stop(pid: int | None = None) -> dict | None:
    """Stop the server (only if its pid is *pid*, when given); returns what it was, else None.
    The nodes' registered host list then names it no more (sandbox.registration)."""
    with repo_lock():
        stopped = _serve.stop(pid)
    registration.publish()
    return stopped


def status() -> dict:
    """What is built and what is served."""
    manifest = read_manifest()
    fpr = FINGERPRINT_FILE.read_text().strip() if FINGERPRINT_FILE.is_file() else None
    return {
        "built": bool(manifest) and (REPO_DIR / "InRelease").is_file(),
        "dirs": ["/".join(d) for d in built_dirs()],
        "repo": str(REPO_DIR),
        "fingerprint": fpr,
        "key_file": str(REPO_DIR / pubkey_name(fpr)) if fpr else None,
        "keyring_repo_url": manifest.get("repo_url"),
        "packages": sorted(manifest.get("debs", {})),
        "server": _serve.running(),
    }
