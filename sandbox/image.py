"""The sandbox base images: cached Debian and Ubuntu roots a GPU node would start from.

One per distribution in OSES (Debian 12 "bookworm", the default, Debian 13
"trixie", Ubuntu 22.04 "jammy" and 24.04 "noble", from Ubuntu's archive with its
keyring checked: sandbox.ubuntu_keyring) and CPU (this machine's, or arm64 through QEMU: sandbox.cpus), each
built once with ``debootstrap --variant=minbase`` plus the packages listed in
PACKAGES, then shared read-only by every node (each node lays a writable overlay
on top). The cache directory name carries a hash of
everything that shapes the image, so changing the package list builds a new
image instead of silently reusing an old one.

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
from dataclasses import dataclass
from pathlib import Path

from control.atomic import atomic_write
from sandbox import cpus, ubuntu_keyring
from sandbox.fsutil import file_lock, mounts_under, safe_rmtree, write_file

MIRROR = os.environ.get("SANDBOX_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("SANDBOX_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
# Ubuntu's archive serves the release, -updates and -security pockets (amd64); a cloud
# image names security.ubuntu.com for -security, which serves the same files.
UBUNTU_MIRROR = os.environ.get("SANDBOX_UBUNTU_MIRROR", "http://archive.ubuntu.com/ubuntu")
UBUNTU_SECURITY_MIRROR = os.environ.get("SANDBOX_UBUNTU_SECURITY_MIRROR", "http://security.ubuntu.com/ubuntu")
UBUNTU_COMPONENTS = "main universe"

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

# What Ubuntu's server and cloud images add that the bring-up meets: needrestart (its
# apt hook asks which services to restart after every install from 22.04 on) and
# unattended-upgrades (it holds apt's lock at first boot). Source: the Task fields of
# both in Ubuntu's own index (archive.ubuntu.com dists/{jammy,noble}/main/binary-amd64/
# Packages.gz, read 2026-12-02): "server-minimal, cloud-image, server" (needrestart
# 3.5-5ubuntu2 on 22.04, 3.6-7ubuntu4 on 24.04).
UBUNTU_PACKAGES = ("needrestart", "unattended-upgrades")


@dataclass(frozen=True)
class OsSpec:
    """One distribution a node can run: its Debian suite and what it ships."""

    name: str
    suite: str
    version_id: str
    python: str
    # /etc/apt sources as the distribution's installer writes them: Debian 12's
    # one-line sources.list, Debian 13's deb822 debian.sources.
    deb822_sources: bool
    # "debian" or "ubuntu" (os-release's ID): which archive, keyring and packages.
    vendor: str = "debian"

    @property
    def mirror(self) -> str:
        return UBUNTU_MIRROR if self.vendor == "ubuntu" else MIRROR

    @property
    def packages(self) -> tuple[str, ...]:
        return PACKAGES + (UBUNTU_PACKAGES if self.vendor == "ubuntu" else ())


# Debian 12's debootstrap (1.0.128+nmu2+deb12u2) builds trixie as it is: its
# scripts/trixie links to the sid script and debian-archive-keyring
# (2023.3+deb12u2) holds the trixie signing keys.
OSES = {
    "debian12": OsSpec("debian12", "bookworm", "12", "3.11", deb822_sources=False),
    "debian13": OsSpec("debian13", "trixie", "13", "3.13", deb822_sources=True),
    # Ubuntu's python3 is 3.10 on 22.04: the venv's CPython is python3.11 from
    # jammy-updates/universe (bringup.platforms), its locks cp311. Debian 12's
    # debootstrap has a jammy script; noble uses the same one (gutsy, which every
    # Ubuntu suite's script links to), given by path.
    "ubuntu2204": OsSpec("ubuntu2204", "jammy", "22.04", "3.11", deb822_sources=False, vendor="ubuntu"),
    "ubuntu2404": OsSpec("ubuntu2404", "noble", "24.04", "3.12", deb822_sources=True, vendor="ubuntu"),
}
DEBOOTSTRAP_SCRIPTS = Path("/usr/share/debootstrap/scripts")
DEFAULT_OS = "debian12"

# Bump when the post-debootstrap steps change, so old caches are not reused
# (UBUNTU_FORMAT: when only the Ubuntu roots' steps change).
IMAGE_FORMAT = 2
UBUNTU_FORMAT = 1


def cache_dir() -> Path:
    """Where images live: ${XDG_CACHE_HOME:-~/.cache}/gpu-bringup/sandbox."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu-bringup" / "sandbox"


def os_spec(os_name: str = DEFAULT_OS) -> OsSpec:
    """The OsSpec of *os_name*; ValueError names the known ones.

    >>> os_spec("debian13").suite
    'trixie'
    """
    if os_name not in OSES:
        raise ValueError(f"unknown OS {os_name!r}; known: {', '.join(OSES)}")
    return OSES[os_name]


def image_key(os_name: str = DEFAULT_OS, machine: str | None = None) -> str:
    """Hash of every input that shapes the image (suite, variant, packages, CPU...)."""
    spec = os_spec(os_name)
    fields = {
        "suite": spec.suite,
        "variant": "minbase",
        "mirror": spec.mirror,
        "packages": sorted(spec.packages),
        "format": IMAGE_FORMAT,
        "arch": machine or cpus.host_machine(),
    }
    # Only set where it is not the default, so Debian 12 images built before
    # there was a choice keep their key (and their cache entry).
    if spec.deb822_sources:
        fields["sources"] = "deb822"
    if spec.vendor == "ubuntu":
        fields["ubuntu_format"] = UBUNTU_FORMAT
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def image_dir(os_name: str = DEFAULT_OS, machine: str | None = None) -> Path:
    """The cache entry of the current package list for *machine*'s CPU (default: this
    machine's), which may not exist yet; a foreign CPU's carries its dpkg arch in the name."""
    machine = machine or cpus.host_machine()
    arch = "" if machine == cpus.host_machine() else f"{cpus.dpkg_arch(machine)}-"
    return cache_dir() / f"{os_spec(os_name).suite}-{arch}minbase-{image_key(os_name, machine)}"


def base_root(log=None, os_name: str = DEFAULT_OS, machine: str | None = None) -> Path:
    """Return the cached base root of *os_name* for *machine*'s CPU, building it first if needed.

    Cheap on a warm cache (one stat, no lock); only a build takes the lock. A foreign
    CPU's root needs QEMU's binfmt_misc handler, to build and to run (sandbox.cpus).
    """
    machine = machine or cpus.host_machine()
    cpus.ensure(machine, log)
    final = image_dir(os_name, machine)
    if (final / "image.json").is_file():
        return final / "root"
    cache_dir().mkdir(parents=True, exist_ok=True)
    os.chmod(cache_dir(), 0o755)  # explicit: mkdir's mode is filtered by the umask
    with file_lock(cache_dir() / ".lock"):
        # Another process may have finished the build while we waited.
        if not (final / "image.json").is_file():
            _build(log or sys.stderr, os_name, machine)
    return final / "root"


def image_info(os_name: str = DEFAULT_OS, machine: str | None = None) -> dict | None:
    """Metadata of the cached image (packages, build seconds), None if absent."""
    meta = image_dir(os_name, machine) / "image.json"
    if not meta.is_file():
        return None
    return json.loads(meta.read_text())


def delete_cache() -> None:
    """Remove every cached image and layer (used by ``python3 -m sandbox destroy``)."""
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


def _build(log, os_name: str, machine: str) -> None:
    """Build the image into a temp dir and rename it into place when complete."""
    _clean_stale_tmp()
    spec, final = os_spec(os_name), image_dir(os_name, machine)
    tmp = cache_dir() / f".tmp-{image_key(os_name, machine)}-{os.getpid()}"
    tmp.mkdir()
    os.chmod(tmp, 0o755)
    root = tmp / "root"
    started = time.monotonic()
    print(f"sandbox: building base image {final.name} (debootstrap, a few minutes)...", file=log, flush=True)
    _debootstrap(root, log, spec, cpus.dpkg_arch(machine))
    _finish_root(root, spec)
    seconds = round(time.monotonic() - started, 1)
    meta = {
        "os": spec.name,
        "suite": spec.suite,
        "arch": cpus.dpkg_arch(machine),
        "variant": "minbase",
        "mirror": spec.mirror,
        "packages": list(spec.packages),
        "key": image_key(os_name, machine),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": seconds,
    }
    # image.json last: together with the rename it marks a finished image.
    atomic_write(tmp / "image.json", json.dumps(meta, indent=2) + "\n", 0o644)
    os.rename(tmp, final)
    print(f"sandbox: base image ready in {seconds} s: {final}", file=log, flush=True)


def _debootstrap(root: Path, log, spec: OsSpec, arch: str) -> None:
    """Run debootstrap for *arch* in private mount+PID namespaces (its mounts die with it)."""
    # umask 022: the image must not depend on the caller's umask.
    cmd = [
        "unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
        "/bin/sh", "-c", 'umask 022 && exec "$@"', "sh",
        *debootstrap_args(spec, arch, root),
    ]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        raise RuntimeError(f"debootstrap failed (exit {proc.returncode}):\n{tail}")


def debootstrap_args(spec: OsSpec, arch: str, root: Path, keyring: Path | None = None) -> list[str]:
    """debootstrap's command line for *spec*: Ubuntu's with its archive's components,
    its keyring checked (fetched and pinned: sandbox.ubuntu_keyring) and the Ubuntu
    script for a suite Debian's debootstrap does not list.

    >>> debootstrap_args(OSES["debian12"], "amd64", Path("/r"))[-3:]
    ['bookworm', '/r', 'http://deb.debian.org/debian']
    >>> args = debootstrap_args(OSES["ubuntu2404"], "amd64", Path("/r"), keyring=Path("/k.gpg"))
    >>> [a for a in args if a.startswith(("--components", "--keyring"))], args[-4:]
    (['--components=main,universe', '--keyring=/k.gpg'], ['noble', '/r', 'http://archive.ubuntu.com/ubuntu', '/usr/share/debootstrap/scripts/gutsy'])
    """
    args = ["debootstrap", "--variant=minbase", f"--arch={arch}", f"--include={','.join(spec.packages)}"]
    if spec.vendor != "ubuntu":
        return [*args, spec.suite, str(root), spec.mirror]
    keyring = keyring or ubuntu_keyring.archive_keyring(cache_dir())
    args += [f"--components={UBUNTU_COMPONENTS.replace(' ', ',')}", f"--keyring={keyring}"]
    script = [] if (DEBOOTSTRAP_SCRIPTS / spec.suite).exists() else [str(DEBOOTSTRAP_SCRIPTS / "gutsy")]
    return [*args, spec.suite, str(root), spec.mirror, *script]


def apt_sources(spec: OsSpec) -> tuple[str, str]:
    """(path under the root, content) of the apt sources a fresh install of *spec* has.

    >>> apt_sources(OSES["debian12"])[1].splitlines()[0]
    'deb http://deb.debian.org/debian bookworm main'
    >>> print(apt_sources(OSES["debian13"])[1].split(chr(10)*2)[0])
    Types: deb
    URIs: http://deb.debian.org/debian
    Suites: trixie trixie-updates
    Components: main
    Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
    """
    suite = spec.suite
    if spec.vendor == "ubuntu":
        return _ubuntu_sources(spec)
    if not spec.deb822_sources:
        return "etc/apt/sources.list", (
            f"deb {MIRROR} {suite} main\n"
            f"deb {MIRROR} {suite}-updates main\n"
            f"deb {SECURITY_MIRROR} {suite}-security main\n"
        )
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    return "etc/apt/sources.list.d/debian.sources", (
        f"Types: deb\nURIs: {MIRROR}\nSuites: {suite} {suite}-updates\nComponents: main\nSigned-By: {keyring}\n\n"
        f"Types: deb\nURIs: {SECURITY_MIRROR}\nSuites: {suite}-security\nComponents: main\nSigned-By: {keyring}\n"
    )


def _ubuntu_sources(spec: OsSpec) -> tuple[str, str]:
    """Ubuntu's sources as its installer and cloud images write them: 22.04's one-line
    sources.list, 24.04's deb822 ubuntu.sources (and a sources.list that only says so).

    >>> print(_ubuntu_sources(OSES["ubuntu2404"])[1].split(chr(10)*2)[0])
    Types: deb
    URIs: http://archive.ubuntu.com/ubuntu
    Suites: noble noble-updates noble-backports
    Components: main universe
    Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
    >>> _ubuntu_sources(OSES["ubuntu2204"])[1].splitlines()[1]
    'deb http://archive.ubuntu.com/ubuntu jammy-updates main universe'
    """
    suite, parts = spec.suite, UBUNTU_COMPONENTS
    if not spec.deb822_sources:
        return "etc/apt/sources.list", (
            f"deb {UBUNTU_MIRROR} {suite} {parts}\n"
            f"deb {UBUNTU_MIRROR} {suite}-updates {parts}\n"
            f"deb {UBUNTU_MIRROR} {suite}-backports {parts}\n"
            f"deb {UBUNTU_SECURITY_MIRROR} {suite}-security {parts}\n"
        )
    keyring = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
    return "etc/apt/sources.list.d/ubuntu.sources", (
        f"Types: deb\nURIs: {UBUNTU_MIRROR}\nSuites: {suite} {suite}-updates {suite}-backports\n"
        f"Components: {parts}\nSigned-By: {keyring}\n\n"
        f"Types: deb\nURIs: {UBUNTU_SECURITY_MIRROR}\nSuites: {suite}-security\n"
        f"Components: {parts}\nSigned-By: {keyring}\n"
    )


# What 24.04's sources.list says once its sources moved (Ubuntu's own text).
UBUNTU_DEB822_NOTE = "# Ubuntu sources have moved to /etc/apt/sources.list.d/ubuntu.sources\n"


def _finish_root(root: Path, spec: OsSpec = OSES[DEFAULT_OS]) -> None:
    """Make the debootstrapped root a clean template for many nodes."""
    # Host keys must be unique per node: each node generates its own at `up`.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    # A real install lists updates and security too, in its installer's format
    # (Debian 13's installer leaves no sources.list beside debian.sources).
    path, sources = apt_sources(spec)
    if spec.deb822_sources and spec.vendor == "ubuntu":
        write_file(root / "etc/apt/sources.list", UBUNTU_DEB822_NOTE, 0o644)
    elif spec.deb822_sources:
        (root / "etc/apt/sources.list").unlink(missing_ok=True)
    write_file(root / path, sources, 0o644)
    # debootstrap copies the build host's name; each node writes its own.
    write_file(root / "etc/hostname", "localhost\n", 0o644)
    # Downloaded .debs are dead weight in every node.
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    # Each node writes its own /etc/machine-id; dbus falls back to it.
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    _mask_host_units(root)
    if spec.vendor == "ubuntu":
        _share_host_resolver(root)


def _share_host_resolver(root: Path) -> None:
    """Name resolution as the Debian roots have it: the host's resolv.conf, copied.

    Ubuntu 22.04's systemd links /etc/resolv.conf to systemd-resolved's stub
    (127.0.0.53); a node shares the host's network, where every node's resolved
    would listen on the same address, so it is masked and the link replaced by
    the host's file, as debootstrap copies it into Debian's roots."""
    resolv = root / "etc/resolv.conf"
    if resolv.is_symlink():
        resolv.unlink()
        write_file(resolv, Path("/etc/resolv.conf").read_text(), 0o644)
    link = root / "etc/systemd/system/systemd-resolved.service"
    link.unlink(missing_ok=True)
    os.symlink("/dev/null", link)


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


def cloud_login_user(os_name: str) -> str:
    """The login user of a cloud image of *os_name* (the ``cloud-login`` state's, uid 1000).

    >>> cloud_login_user("ubuntu2404"), cloud_login_user("debian12")
    ('ubuntu', 'admin')
    """
    return "ubuntu" if os_name.startswith("ubuntu") else "admin"
