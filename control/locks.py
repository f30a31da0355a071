"""Regenerate files/locks/ from its ``.in`` files (``make lock``).

    python -m control.locks venv                 # every venv lock: each input x CPython x CPU
    python -m control.locks cuda --repo-url URL [--platforms debian12-x86_64,...] [--fingerprint FPR]
    python -m control.locks driver --repo-url URL [--platforms ...] [--fingerprint FPR]
    python -m control.locks dcgm --repo-url URL [--platforms ...] [--fingerprint FPR]
    python -m control.locks new-sglang VERSION   # files/locks/sglang-VERSION.in from the newest one there

``new-sglang``: the first step of an upgrade (docs/upgrades.md): writes
``sglang-<VERSION>.in`` as a copy of the newest ``sglang-<version>.in`` (by
packaging.version) with its ``sglang==`` pin moved to VERSION; an input that exists
already is left as it is. ``make lock`` then writes its locks.

``venv``: ``uv pip compile`` of each Python input (``sglang-<version>.in``, ``uv.in``)
for every CPython a supported platform builds its venv with (bringup.platforms) and
every supported CPU, hashes included, with the omissions of bringup.venv_locks.OMISSIONS;
the existing lock seeds uv's preferences, so a second run changes nothing.

``cuda``: for each ``cuda-<X.Y>.in`` (the release: one ``<package> <upstream version>``
per line) and each platform, reads ``<URL>/<distro>/<arch>/Packages(.gz)``, only through
that directory's ``InRelease`` (or ``Release`` + ``Release.gpg``) verified by gpgv
against the pinned key and the sha256 it lists (control/signed_index.py), and writes
``cuda-<X.Y>-<distro>-<machine>.txt`` with the Debian version of each package
(compared with ``dpkg --compare-versions``). URL is NVIDIA's repos, or a mirror with
their layout (``http(s)://`` or a ``file://`` directory on this machine) signed by
NVIDIA's key or by the key ``--fingerprint`` names. Every lock starts with a header naming
its input's sha256 (tests/unit/test_locks.py fails on a stale lock).

``driver``: for each ``driver-<branch>.in`` (the branch and the version locked) and each
platform, the same signed index gives ``driver-<branch>-<distro>-<machine>.txt``: each
kernel module flavour's packages (bringup/driver_packages.py's roots, the family's
names) with everything of the repository they depend on, at the driver's version, and
Fabric Manager's, NVLSM's and the pinning package's (bringup.driver_locks.resolve_driver).

``dcgm``: for each ``dcgm-<major>.in`` (DCGM's packages, the toolkit release's format)
and each platform, the same signed index gives ``dcgm-<major>-<distro>-<machine>.txt``
(bringup/dcgm_locks.py; resolved as the toolkit's: exactly the packages listed).

A lock is written (whole, then renamed) only when its content changes. Errors are one
line naming the lock, the input and the fix.
"""

import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.version import InvalidVersion, Version

from bringup import dcgm_locks, deb_index, driver_locks, driver_packages, locks, toolkit_locks, venv_locks
from bringup.plan import MIN_PYTHON
from bringup.platforms import DISTRIBUTIONS, REPO_ARCH, dpkg_arch, repo_arch, repo_location, supported_pythons
from bringup.config import Config
from control import signed_index
from control.atomic import atomic_write

ROOT = Path(__file__).resolve().parent.parent
NVIDIA_REPOS = "https://developer.download.nvidia.com/compute/cuda/repos"
# The key NVIDIA signs its repositories with (bringup.config, cuda_repo_fingerprint).
DEFAULT_FINGERPRINT = Config().cuda_repo_fingerprint


def python_inputs(root=ROOT):
    """The Python inputs under files/locks (every ``.in`` that is not a toolkit release)."""
    return sorted(path for path in (root / locks.LOCKS_DIR).glob("*.in")
                  if not toolkit_locks.is_toolkit_input(path.name) and not driver_locks.is_driver_input(path.name)
                  and not dcgm_locks.is_dcgm_input(path.name))


def toolkit_inputs(root=ROOT):
    return sorted(path for path in (root / locks.LOCKS_DIR).glob("*.in") if toolkit_locks.is_toolkit_input(path.name))


def driver_inputs(root=ROOT):
    return sorted(path for path in (root / locks.LOCKS_DIR).glob("*.in") if driver_locks.is_driver_input(path.name))


def dcgm_inputs(root=ROOT):
    return sorted(path for path in (root / locks.LOCKS_DIR).glob("*.in") if dcgm_locks.is_dcgm_input(path.name))


def compile_venv_lock(uv, source, stem, python, machine, target):
    """``uv pip compile`` one input for one CPython and CPU; returns the lock's text."""
    with tempfile.TemporaryDirectory(prefix="lock-") as work:
        out = Path(work) / "lock.txt"
        if target.exists():
            shutil.copyfile(target, out)  # uv keeps the pins it finds there
        command = [str(uv), "pip", "compile", str(source), "--python-version", python,
                   "--python-platform", venv_locks.python_platform(machine), "--generate-hashes", "--no-header",
                   "--quiet", "--no-python-downloads", "--python", sys.executable, "-o", str(out)]
        for omission in venv_locks.omissions(stem, python):
            command += ["--no-emit-package", omission.package]
        env = dict(os.environ, UV_PYTHON_DOWNLOADS="never")
        run = subprocess.run(command, capture_output=True, text=True, env=env)
        if run.returncode != 0:
            detail = (run.stderr.strip().splitlines() or ["no output"])[-1]
            raise locks.LockError(f"{target.name}: uv pip compile {source.name} for CPython {python} on {machine} "
                                  f"failed: {detail}")
        body = out.read_text()
    header = venv_locks.venv_lock_header(stem, source.read_bytes(), python, machine)
    body_lines = body.splitlines()
    while body_lines and body_lines[0].startswith("#"):
        body_lines.pop(0)  # the seed's old header, when uv kept it
    return "\n".join(header + body_lines) + "\n"


def write_if_changed(path, text):
    if path.exists() and path.read_text() == text:
        return False
    atomic_write(path, text)
    return True


def venv(root=ROOT, log=sys.stderr):
    uv = Path(sys.executable).parent / "uv"
    pythons = supported_pythons(MIN_PYTHON)
    stems = {path.name[:-3]: path for path in python_inputs(root)}
    changed = 0
    for stem, python, machine, name in venv_locks.venv_lock_matrix(sorted(stems), pythons, list(REPO_ARCH)):
        target = root / name
        text = compile_venv_lock(uv, stems[stem], stem, python, machine, target)
        wrote = write_if_changed(target, text)
        changed += wrote
        print(f"make lock: {name}: {'written' if wrote else 'unchanged'}", file=log, flush=True)
    return changed


@functools.lru_cache(maxsize=None)
def dpkg_compare(left, right):
    """Debian version ordering by dpkg itself: -1, 0 or 1."""
    for op, result in (("lt", -1), ("eq", 0)):
        if subprocess.run(["dpkg", "--compare-versions", left, op, right]).returncode == 0:
            return result
    return 1


def fetch_index(url, fingerprint, key_url=""):
    """The text of ``<url>Packages.gz`` (else ``Packages``) and its URL, read through the
    repository's Release signed by the pinned key (control/signed_index.py)."""
    return signed_index.signed_index(url, fingerprint, key_url)


def shown_url(url, root=ROOT):
    """An index URL as a lock's header shows it: a file under this checkout by its
    relative path, so the header does not depend on where the checkout is.

    >>> shown_url("file:///co/mirror/repos/debian12/x86_64/Packages.gz", Path("/co"))
    'mirror/repos/debian12/x86_64/Packages.gz'
    """
    prefix = root.as_uri() + "/"
    return url[len(prefix):] if url.startswith(prefix) else url


def parse_platforms(text, served=None):
    """``debian12-x86_64,ubuntu2404-aarch64`` (or ``all``: every supported platform, or
    those ``served`` when given) -> [(distro, machine)]."""
    known = [(dist.repo_distro, machine) for dist in DISTRIBUTIONS.values() for machine in REPO_ARCH]
    if not text or text.strip() == "all":
        return [platform for platform in known if served is None or platform in served]
    chosen = []
    for item in text.replace(",", " ").split():
        distro, _, machine = item.partition("-")
        if (distro, machine) not in known:
            raise locks.LockError(f"CUDA_PLATFORMS: unknown platform {item!r}; use all or some of "
                                  f"{', '.join(f'{d}-{m}' for d, m in known)}")
        chosen.append((distro, machine))
    return chosen


def cuda(repo_url, platforms, root=ROOT, log=sys.stderr, fetch=fetch_index, compare=dpkg_compare,
         fingerprint=DEFAULT_FINGERPRINT, key_url=""):
    changed = 0
    for source in toolkit_inputs(root):
        version = source.name[len("cuda-"):-len(".in")]
        data = source.read_bytes()
        wanted = toolkit_locks.parse_toolkit_input(data.decode(), source.name)
        for distro, machine in platforms:
            name = toolkit_locks.toolkit_lock_name(version, distro, machine)
            try:
                text, where = fetch(repo_location(repo_url, distro, repo_arch(machine)), fingerprint, key_url)
                index = deb_index.parse_index(text)
                pins = toolkit_locks.resolve_toolkit(wanted, index, dpkg_arch(machine), compare, where)
            except locks.LockError as error:
                raise locks.LockError(f"{name} from {source.name}: {error}") from None
            header = toolkit_locks.toolkit_lock_header(version, data, distro, dpkg_arch(machine),
                                                       shown_url(where, root))
            wrote = write_if_changed(root / name, toolkit_locks.toolkit_lock_text(header, pins))
            changed += wrote
            print(f"make lock: {name}: {'written' if wrote else 'unchanged'}", file=log, flush=True)
    return changed


def driver(repo_url, platforms, root=ROOT, log=sys.stderr, fetch=fetch_index, compare=dpkg_compare,
           fingerprint=DEFAULT_FINGERPRINT, key_url=""):
    changed = 0
    for source in driver_inputs(root):
        data = source.read_bytes()
        wanted = driver_locks.parse_driver_input(data.decode(), source.name)
        for distro, machine in platforms:
            name = driver_locks.driver_lock_name(wanted.branch, distro, machine)
            names = driver_packages.names(driver_packages.lock_family(distro), wanted.branch, wanted.version)
            try:
                text, where = fetch(repo_location(repo_url, distro, repo_arch(machine)), fingerprint, key_url)
                index = deb_index.parse_index(text)
                locked = driver_locks.resolve_driver(wanted, names, index, dpkg_arch(machine), compare, where)
            except locks.LockError as error:
                raise locks.LockError(f"{name} from {source.name}: {error}") from None
            header = driver_locks.driver_lock_header(source.name, data, distro, dpkg_arch(machine),
                                                     shown_url(where, root), wanted)
            wrote = write_if_changed(root / name, driver_locks.driver_lock_text(header, locked))
            changed += wrote
            print(f"make lock: {name}: {'written' if wrote else 'unchanged'}", file=log, flush=True)
    return changed


def dcgm(repo_url, platforms, root=ROOT, log=sys.stderr, fetch=fetch_index, compare=dpkg_compare,
         fingerprint=DEFAULT_FINGERPRINT, key_url=""):
    changed = 0
    for source in dcgm_inputs(root):
        major = dcgm_locks.DCGM_INPUT.fullmatch(source.name)["major"]
        data = source.read_bytes()
        wanted = toolkit_locks.parse_toolkit_input(data.decode(), source.name)
        for distro, machine in platforms:
            name = dcgm_locks.dcgm_lock_name(distro, machine, major)
            try:
                text, where = fetch(repo_location(repo_url, distro, repo_arch(machine)), fingerprint, key_url)
                index = deb_index.parse_index(text)
                pins = toolkit_locks.resolve_toolkit(wanted, index, dpkg_arch(machine), compare, where)
            except locks.LockError as error:
                raise locks.LockError(f"{name} from {source.name}: {error}") from None
            header = dcgm_locks.dcgm_lock_header(major, data, distro, dpkg_arch(machine), shown_url(where, root))
            wrote = write_if_changed(root / name, toolkit_locks.toolkit_lock_text(header, pins))
            changed += wrote
            print(f"make lock: {name}: {'written' if wrote else 'unchanged'}", file=log, flush=True)
    return changed


# The repository-index locks: subcommand -> (help, writer).
INDEX_LOCKS = {"cuda": ("the toolkit locks (a CUDA repository's Packages index)", cuda),
               "driver": ("the driver locks (the same index: each flavour's packages at the branch's version)",
                          driver),
               "dcgm": ("the DCGM locks (the same index: gpu_diag_install's packages)", dcgm)}


SGLANG_PIN = re.compile(r"^(?P<name>sglang(?:\[[^\]]*\])?)\s*==\s*(?P<version>\S+)", re.MULTILINE)


def sglang_input_from(previous, version):
    """The text of ``sglang-<version>.in`` made from the previous input's text: its
    ``sglang==`` pin (extras kept) moved to ``version``, every other line as it was.

    >>> sglang_input_from("sglang[all]==0.5.23\\n# kept\\n", "0.5.24")
    'sglang[all]==0.5.24\\n# kept\\n'
    >>> sglang_input_from("torch==2.9\\n", "0.5.24")
    Traceback (most recent call last):
    ...
    bringup.locks.LockError: the previous input pins no sglang (no `sglang==<version>` line)
    """
    if not SGLANG_PIN.search(previous):
        raise locks.LockError("the previous input pins no sglang (no `sglang==<version>` line)")
    return SGLANG_PIN.sub(lambda match: f"{match['name']}=={version}", previous, count=1)


def new_sglang_input(version, root=ROOT, log=sys.stderr):
    """Write ``files/locks/sglang-<version>.in`` from the newest other sglang input;
    returns its path. An existing one is kept (said on ``log``)."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        raise locks.LockError(f"{version!r} is not a release version; use one such as 0.5.24") from None
    if str(wanted) != version:
        raise locks.LockError(f"{version!r}: write the release as PyPI names it ({wanted})")
    target = root / locks.LOCKS_DIR / f"sglang-{version}.in"
    if target.exists():
        print(f"make lock: {target.relative_to(root)} exists: kept as it is; run make lock", file=log)
        return target
    found = []
    for path in python_inputs(root):
        stem = path.name[:-3]
        if stem.startswith("sglang-"):
            try:
                found.append((Version(stem[len("sglang-"):]), path))
            except InvalidVersion:
                continue
    if not found:
        raise locks.LockError(f"no files/locks/sglang-<version>.in to start from; write {target.name} by hand "
                              f"(one line: sglang=={version})")
    _, previous = max(found)
    atomic_write(target, sglang_input_from(previous.read_text(), version))
    print(f"make lock: {target.relative_to(root)} written from {previous.name}; review it, then run make lock",
          file=log)
    return target


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m control.locks", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    sub.add_parser("venv", help="the venv locks (uv pip compile)")
    new = sub.add_parser("new-sglang", help="files/locks/sglang-VERSION.in from the newest one (an upgrade's start)")
    new.add_argument("version", help="the SGLang release, as PyPI names it (0.5.24)")
    new.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    for kind, (text, _) in INDEX_LOCKS.items():
        index = sub.add_parser(kind, help=text)
        index.add_argument("--repo-url", default=NVIDIA_REPOS,
                           help="NVIDIA's repos, or a mirror with their layout (http(s):// or file://)")
        index.add_argument("--platforms", default="all", help="all, or <distro>-<machine>[,...]")
        index.add_argument("--fingerprint", default="",
                           help="the fingerprint of the repository's signing key "
                                "(default: cuda_repo_fingerprint's default, NVIDIA's)")
        index.add_argument("--key-url", default="",
                           help="where that key is published (default: <repo dir>/<last 8 hex digits>.pub)")
    args = parser.parse_args(argv)
    try:
        if args.kind == "venv":
            venv()
        elif args.kind == "new-sglang":
            new_sglang_input(args.version, root=args.root)
        else:
            writer = INDEX_LOCKS[args.kind][1]
            writer(args.repo_url, parse_platforms(args.platforms), fingerprint=args.fingerprint or DEFAULT_FINGERPRINT,
                   key_url=args.key_url)
    except locks.LockError as error:
        print(f"make lock: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
