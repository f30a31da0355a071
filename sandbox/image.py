"""The sandbox base image: a cached Debian 12 root a GPU node would start from.

Built once with ``debootstrap --variant=minbase`` plus the packages listed in
PACKAGES, then shared read-only by every node (each node lays a writable
overlay on top). The cache directory name carries a hash of everything that
shapes the image, so changing the package list builds a new image instead of
silently reusing an old one.

Crash safety: the image is built in a ``.tmp-*`` directory next to the cache
entry and renamed into place only once complete, so a directory named like a
cache entry is always a finished image. debootstrap runs inside its own mount
and PID namespaces so the /proc and /sys it mounts into the target vanish
with it, even when it is killed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from control.atomic import atomic_write
from sandbox.fsutil import file_lock, mounts_under, safe_rmtree, write_file

SUITE = "bookworm"
MIRROR = os.environ.get("SANDBOX_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("SANDBOX_SECURITY_MIRROR", "http://deb.debian.org/debian-security")

# What a freshly installed Debian 12 GPU server has before the bring-up runs.
# apt itself (in minbase) speaks https since apt 1.5; apt-transport-https is
# the transitional package older runbooks still install, apt-utils silences
# debconf's "apt-extracttemplates" warnings during installs.
PACKAGES = (
    "openssh-server",
    "python3",
    "python3-venv",
    "python3-pip",
    "g++",
    "make",
    "ca-certificates",
    "gnupg",
    "curl",
    "procps",
    "sudo",
    "less",
    "apt-transport-https",
    "apt-utils",
    # The node's init: systemd as PID 1 (sandbox/files/node-init.sh), as on a
    # real server; dbus for systemctl's peers (logind, hostnamectl...).
    "systemd",
    "systemd-sysv",
    "dbus",
)

# Bump when the post-debootstrap steps change, so old caches are not reused.
IMAGE_FORMAT = 2


def cache_dir() -> Path:
    """Where images live: ${XDG_CACHE_HOME:-~/.cache}/gpu-bringup/sandbox."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu-bringup" / "sandbox"


def image_key() -> str:
    """Hash of every input that shapes the image (suite, variant, packages...)."""
    spec = {
        "suite": SUITE,
        "variant": "minbase",
        "mirror": MIRROR,
        "packages": sorted(PACKAGES),
        "format": IMAGE_FORMAT,
        "arch": os.uname().machine,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def image_dir() -> Path:
    """The cache entry of the current package list (may not exist yet)."""
    return cache_dir() / f"{SUITE}-minbase-{image_key()}"


def base_root(log=None) -> Path:
    """Return the cached base root, building it first if needed.

    Cheap on a warm cache (one stat, no lock); only a build takes the lock.
    """
    root = image_dir() / "root"
    if (image_dir() / "image.json").is_file():
        return root
    cache_dir().mkdir(parents=True, exist_ok=True)
    os.chmod(cache_dir(), 0o755)  # explicit: mkdir's mode is filtered by the umask
    with file_lock(cache_dir() / ".lock"):
        # Another process may have finished the build while we waited.
        if not (image_dir() / "image.json").is_file():
            _build(log or sys.stderr)
    return root


def image_info() -> dict | None:
    """Metadata of the cached image (packages, build seconds), None if absent."""
    meta = image_dir() / "image.json"
    if not meta.is_file():
        return None
    return json.loads(meta.read_text())


def delete_cache() -> None:
    """Remove every cached image (used by ``python3 -m sandbox destroy``)."""
    top = cache_dir()
    if not top.exists():
        return
    with file_lock(top / ".lock"):
        for entry in top.iterdir():
            if entry.name != ".lock":
                safe_rmtree(entry) if entry.is_dir() else entry.unlink()
    safe_rmtree(top)


def _clean_stale_tmp() -> None:
    """Delete half-built images left by a crashed build (we hold the lock)."""
    for entry in cache_dir().glob(".tmp-*"):
        if mounts_under(entry):
            raise RuntimeError(f"stale image build {entry} still has mounts; unmount them first")
        safe_rmtree(entry)


def _build(log) -> None:
    """Build the image into a temp dir and rename it into place when complete."""
    _clean_stale_tmp()
    tmp = cache_dir() / f".tmp-{image_key()}-{os.getpid()}"
    tmp.mkdir()
    os.chmod(tmp, 0o755)
    root = tmp / "root"
    started = time.monotonic()
    print(f"sandbox: building base image {image_dir().name} (debootstrap, a few minutes)...", file=log, flush=True)
    _debootstrap(root, log)
    _finish_root(root)
    seconds = round(time.monotonic() - started, 1)
    meta = {
        "suite": SUITE,
        "variant": "minbase",
        "mirror": MIRROR,
        "packages": list(PACKAGES),
        "key": image_key(),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": seconds,
    }
    # image.json last: together with the rename it marks a finished image.
    atomic_write(tmp / "image.json", json.dumps(meta, indent=2) + "\n", 0o644)
    os.rename(tmp, image_dir())
    print(f"sandbox: base image ready in {seconds} s: {image_dir()}", file=log, flush=True)


def _debootstrap(root: Path, log) -> None:
    """Run debootstrap in private mount+PID namespaces (its mounts die with it)."""
    # umask 022: the image must not depend on the caller's umask.
    cmd = [
        "unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
        "/bin/sh", "-c", 'umask 022 && exec "$@"', "sh",
        "debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
        SUITE, str(root), MIRROR,
    ]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        raise RuntimeError(f"debootstrap failed (exit {proc.returncode}):\n{tail}")


def _finish_root(root: Path) -> None:
    """Make the debootstrapped root a clean template for many nodes."""
    # Host keys must be unique per node: each node generates its own at `up`.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    # A real Debian 12 install lists updates and security too.
    sources = (
        f"deb {MIRROR} {SUITE} main\n"
        f"deb {MIRROR} {SUITE}-updates main\n"
        f"deb {SECURITY_MIRROR} {SUITE}-security main\n"
    )
    write_file(root / "etc/apt/sources.list", sources, 0o644)
    # debootstrap copies the build host's name; each node writes its own.
    write_file(root / "etc/hostname", "localhost\n", 0o644)
    # Downloaded .debs are dead weight in every node.
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    # Each node writes its own /etc/machine-id; dbus falls back to it.
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    _mask_host_units(root)


# Units that would reach past the node into the host kernel it shares (nodes
# run as real root with every capability): debugfs/tracefs mounted writable,
# and journald's audit socket, which switches kernel auditing on host-wide.
HOST_UNITS = ("sys-kernel-debug.mount", "sys-kernel-tracing.mount", "systemd-journald-audit.socket")


def _mask_host_units(root: Path) -> None:
    """Mask HOST_UNITS the way `systemctl mask` does (a link to /dev/null)."""
    units = root / "etc/systemd/system"
    units.mkdir(parents=True, exist_ok=True)
    for unit in HOST_UNITS:
        link = units / unit
        link.unlink(missing_ok=True)
        os.symlink("/dev/null", link)
