"""The operator's CPython for Ubuntu 22.04 nodes: a final CPython 3.11 built from Debian's
signed source package, as an operator builds one into an image under /opt.

Not a stand-in: it is what a 22.04 fleet brings itself (Ubuntu's archive has only
3.11.0~rc1, bringup.platforms), the interpreter ``venv_python`` names; the
``operator-python`` state (sandbox/states/operator-python.ubuntu2204.sh) installs it,
root-owned, on a node.

Source: Debian 12's ``python3.11`` source package (``SOURCE_VERSION``, bookworm main),
fetched by the host's apt with a private configuration whose only sources are
deb.debian.org's bookworm ``deb-src`` lines, signed-by the host's
debian-archive-keyring: apt checks InRelease's signature, the Sources index against it
and every file against the index's hashes (no unverified download). Its .dsc, orig
tarball and debian tarball are built in a throwaway overlay of the release's base image
by sandbox/files/build-cpython.sh (Debian's patch series applied by dpkg-source, the
release's own build dependencies, ``--prefix=/opt/cpython-3.11``, no PGO, no tests).

Cache: ``<image cache>/operator-python/<key>/`` with ``cpython.tar`` (PREFIX, owned by
root) and ``build.json``, keyed by the base image, the source version, the build script
and this module's format; built once per machine under a file lock, in a ``.tmp-*``
directory renamed into place when complete.

    >>> artifact_dir("ubuntu2204").name.startswith("cpython-3.11-")
    True
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from control.atomic import atomic_write
from sandbox import image, layers
from sandbox.fsutil import file_lock, safe_rmtree

PREFIX = "/opt/cpython-3.11"
PACKAGE = "python3.11"
# bookworm's point release (main): deb.debian.org's bookworm-security pool did not serve
# deb12u9's .dsc and debian tarball from these machines on 2026-12-02.
SOURCE_VERSION = "3.11.2-6+deb12u8"
DEBIAN_SOURCES = ("deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                  f"{image.MIRROR} bookworm main\n")
BUILD_SCRIPT = Path(__file__).resolve().parent / "files" / "build-cpython.sh"
# Bump when what the artifact holds changes for the same inputs.
FORMAT = 1


def artifact_key(os_name: str) -> str:
    """``cpython-3.11-<16 hex>`` over what shapes the build (no download needed).

    >>> artifact_key("ubuntu2204") == artifact_key("ubuntu2204"), artifact_key("ubuntu2204") == artifact_key("ubuntu2404")
    (True, False)
    """
    spec = {"base": image.image_dir(os_name).name, "source": [PACKAGE, SOURCE_VERSION], "prefix": PREFIX,
            "script": hashlib.sha256(BUILD_SCRIPT.read_bytes()).hexdigest(), "format": FORMAT}
    return "cpython-3.11-" + hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def artifact_dir(os_name: str) -> Path:
    """The cache entry of *os_name*'s build (it may not exist yet)."""
    return image.cache_dir() / "operator-python" / artifact_key(os_name)


def tarball(os_name: str, log=sys.stderr) -> Path:
    """``cpython.tar`` of *os_name*'s build, building it first if needed (minutes, once)."""
    final = artifact_dir(os_name)
    if (final / "build.json").is_file():
        return final / "cpython.tar"
    with file_lock(final.parent / ".lock"):
        if not (final / "build.json").is_file():
            _build(os_name, final, log)
    return final / "cpython.tar"


def apt_config(top: Path) -> Path:
    """A private apt configuration under *top*: Debian's bookworm sources only, the host's
    keyring, no dpkg status (nothing installed is read or changed)."""
    for sub in ("etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d", "state/lists/partial",
                "cache/archives/partial"):
        (top / sub).mkdir(parents=True, exist_ok=True)
    atomic_write(top / "etc/apt/sources.list", DEBIAN_SOURCES, 0o644)
    config = top / "apt.conf"
    atomic_write(config, f'Dir::Etc "{top}/etc/apt";\nDir::State "{top}/state";\nDir::Cache "{top}/cache";\n'
                         'Dir::State::status "/dev/null";\nAPT::Sandbox::User "root";\n', 0o644)
    return config


def fetch_source(folder: Path, log=sys.stderr) -> Path:
    """Debian's source package in *folder*, checked by apt against bookworm's signed
    Sources; returns its .dsc."""
    env = {**os.environ, "APT_CONFIG": str(apt_config(folder / "apt"))}
    for command in (["apt-get", "-q", "update"],
                    ["apt-get", "-q", "source", "--download-only", f"{PACKAGE}={SOURCE_VERSION}"]):
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    dsc = folder / f"{PACKAGE}_{SOURCE_VERSION.split(':')[-1]}.dsc"
    print(f"sandbox: fetched {PACKAGE} {SOURCE_VERSION} from Debian's signed Sources", file=log, flush=True)
    return dsc


def _build(os_name: str, final: Path, log) -> None:
    """Fetch the source, build it in a throwaway overlay of the base image, keep PREFIX."""
    base = image.base_root(log, os_name=os_name)
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(".tmp-*"):
        safe_rmtree(stale)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    try:
        meta = _build_in(os_name, base, tmp, final.name, log)
    except BaseException:
        safe_rmtree(tmp)  # a failed build leaves no entry
        raise
    atomic_write(tmp / "build.json", json.dumps(meta, indent=2) + "\n", 0o644)
    os.rename(tmp, final)
    print(f"sandbox: CPython {meta['version']} built in {meta['build_seconds']} s ({meta['bytes'] / 1e6:.0f} MB)",
          file=log, flush=True)


def _build_in(os_name: str, base: Path, tmp: Path, key: str, log) -> dict:
    """The build in *tmp*: the source fetched, built in an overlay of *base*, PREFIX kept
    as tmp/cpython.tar; returns build.json's contents."""
    for sub in ("upper", "work", "root", "inputs", "source"):
        (tmp / sub).mkdir(parents=True, mode=0o755)
    os.chmod(tmp / "upper", os.stat(base).st_mode & 0o7777)
    dsc = fetch_source(tmp / "source", log)
    names = [dsc.name] + [p.name for p in (tmp / "source").glob(f"{PACKAGE}_*") if p.suffix != ".dsc"]
    for name in names:
        os.link(tmp / "source" / name, tmp / "inputs" / name)
    (tmp / "inputs" / "script.sh").write_text(BUILD_SCRIPT.read_text())
    print(f"sandbox: building CPython {SOURCE_VERSION} for {os_name} under {PREFIX} (minutes, once)...",
          file=log, flush=True)
    started = time.monotonic()
    returncode = layers.run_script(tmp, str(base), {"PREFIX": PREFIX, "DSC": dsc.name})
    seconds = round(time.monotonic() - started, 1)
    if returncode != 0:
        raise layers.LayerBuildError(f"the CPython build failed on {os_name} (exit {returncode}); nothing cached. "
                                     f"Last lines of its output:\n{layers.log_tail(tmp / 'build.log')}")
    subprocess.run(["tar", "--numeric-owner", "-C", str(tmp / "upper"), "-cf", str(tmp / "cpython.tar"),
                    PREFIX.lstrip("/")], check=True)
    meta = {"key": key, "os": os_name, "source": f"{PACKAGE} {SOURCE_VERSION}", "prefix": PREFIX,
            "dsc_sha256": hashlib.sha256(dsc.read_bytes()).hexdigest(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "build_seconds": seconds,
            "version": _built_version(tmp / "build.log"), "bytes": (tmp / "cpython.tar").stat().st_size}
    for sub in ("upper", "work", "root", "inputs", "source"):
        safe_rmtree(tmp / sub)
    return meta


def _built_version(build_log: Path) -> str:
    """The version the build script's last check printed (``built 3.11.2 (main, ...)``).

    >>> import tempfile; build_log = Path(tempfile.mkdtemp()) / "build.log"
    >>> _ = build_log.write_text("make...\\nbuilt 3.11.2 (main, Dec  2 2026) [GCC 11.4.0] OpenSSL 3.0.2\\n")
    >>> _built_version(build_log)
    '3.11.2'
    """
    lines = build_log.read_text(errors="replace").splitlines() if build_log.is_file() else []
    for line in reversed(lines):
        if line.startswith("built "):
            return line.split()[1]
    return ""


def main(argv=None) -> int:
    """``python -m sandbox.operator_python [OS]``: build (or find) the tarball, print its path."""
    parser = argparse.ArgumentParser(prog="python -m sandbox.operator_python",
                                     description="Build (or find in the cache) the operator's CPython 3.11 for a "
                                                 "sandbox OS and print its tarball's path (minutes, once).")
    parser.add_argument("os_name", nargs="?", default="ubuntu2204", choices=sorted(image.OSES), metavar="OS",
                        help=f"the node's OS, one of {', '.join(sorted(image.OSES))} (default: ubuntu2204)")
    args = parser.parse_args(argv)
    print(tarball(args.os_name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
