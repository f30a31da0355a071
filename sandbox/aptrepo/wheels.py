"""The pinned NVIDIA wheels: read the lock, fill the download cache.

The lock holds one section per CUDA toolkit release set (``[cuda-toolkit==X]``,
the versions NVIDIA's cuda-toolkit meta wheel X pins together); a wheel may
appear in several sets (then with the same hash) and a wheel name with
several versions (one per set).

The cache is ``${XDG_CACHE_HOME:-~/.cache}/gpu-bringup/wheels/``; a wheel is
taken from it only when its sha256 matches the lock, so a second build
downloads nothing and a corrupted or swapped file is fetched again. Downloads
go through pip (the ordinary PyPI client) with ``--require-hashes``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

LOCK = Path(__file__).with_name("wheels.lock")
# uname -m -> the lock of that CPU's wheels (the sbsa directories are made from the aarch64 one).
LOCKS = {"x86_64": LOCK, "aarch64": Path(__file__).with_name("wheels-aarch64.lock")}

# pip 23 does not widen --platform manylinux_2_28 to the older manylinux tags
# the wheels carry (manylinux_2_12, _2_17, _2_27), so name each one.
MANYLINUX = ("manylinux_2_28", "manylinux_2_27", "manylinux_2_17", "manylinux2014", "manylinux_2_12", "manylinux2010")


def platforms(machine: str) -> list[str]:
    """pip's --platform tags of *machine*'s wheels.

    >>> platforms("aarch64")[:2]
    ['manylinux_2_28_aarch64', 'manylinux_2_27_aarch64']
    """
    return [f"{tag}_{machine}" for tag in MANYLINUX]

_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s]+)\s+--hash=sha256:([0-9a-f]{64})\s*$")
_SECTION = re.compile(r"^\[cuda-toolkit==([0-9]+\.[0-9]+\.[0-9]+)\]$")


@dataclass(frozen=True)
class LockedWheel:
    name: str
    version: str
    sha256: str

    @property
    def stem(self) -> str:
        """Wheel file name prefix: normalised name and version."""
        return f"{re.sub(r'[-_.]+', '_', self.name).lower()}-{self.version}-"

    def requirement(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu-bringup" / "wheels"


def read_lock(path: Path = LOCK) -> dict[str, dict[str, LockedWheel]]:
    """Release set (cuda-toolkit version) -> wheel name -> LockedWheel.

    Raises ValueError on a malformed line, a wheel outside any section, a
    wheel named twice in one set, or one version locked with two hashes.
    """
    sets: dict[str, dict[str, LockedWheel]] = {}
    current: dict[str, LockedWheel] | None = None
    hashes: dict[tuple[str, str], str] = {}
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        section = _SECTION.match(line)
        if section:
            if section.group(1) in sets:
                raise ValueError(f"{path}:{n}: section {line} appears twice")
            current = sets[section.group(1)] = {}
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"{path}:{n}: expected '[cuda-toolkit==X.Y.Z]' or "
                             f"'name==version --hash=sha256:HEX', got {raw!r}")
        if current is None:
            raise ValueError(f"{path}:{n}: {raw!r} is outside any [cuda-toolkit==X.Y.Z] section")
        w = LockedWheel(m.group(1).lower(), m.group(2), m.group(3))
        if w.name in current:
            raise ValueError(f"{path}:{n}: {w.name} twice in one release set")
        if hashes.setdefault((w.name, w.version), w.sha256) != w.sha256:
            raise ValueError(f"{path}:{n}: {w.name}=={w.version} locked with two hashes")
        current[w.name] = w
    return sets


def locked_wheels(sets: dict[str, dict[str, LockedWheel]]) -> list[LockedWheel]:
    """Every distinct wheel of the lock, in lock order."""
    return list(dict.fromkeys(w for wheels in sets.values() for w in wheels.values()))


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def cached(wheel: LockedWheel, cache: Path | None = None) -> Path | None:
    """The cached file of *wheel* if present and its hash matches."""
    cache = cache or cache_dir()
    for path in sorted(cache.glob(wheel.stem + "*.whl")):
        if sha256_file(path) == wheel.sha256:
            return path
    return None


def _pip() -> list[str]:
    """A python with pip: this one, else the repo's control venv."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    venv = Path(__file__).resolve().parents[2] / ".venv/bin/python"
    if venv.exists():
        return [str(venv), "-m", "pip"]
    raise RuntimeError("pip is needed to download the NVIDIA wheels (python3 -m pip)")


def _batches(wheels: list[LockedWheel]) -> list[list[LockedWheel]]:
    """Split so no name repeats within a batch: pip refuses a double requirement."""
    batches: list[list[LockedWheel]] = []
    for w in wheels:
        for batch in batches:
            if all(b.name != w.name for b in batch):
                batch.append(w)
                break
        else:
            batches.append([w])
    return batches


def ensure_wheels(wanted: list[LockedWheel] | None = None, machine: str = "x86_64",
                  cache: Path | None = None, log=None) -> dict[LockedWheel, Path]:
    """Return wheel -> cached file for *wanted* (default: the whole lock of *machine*'s
    wheels), downloading the missing."""
    wheels = locked_wheels(read_lock(LOCKS[machine])) if wanted is None else wanted
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    found: dict[LockedWheel, Path] = {}
    missing: list[LockedWheel] = []
    for w in wheels:
        path = cached(w, cache)
        if path:
            found[w] = path
        else:
            missing.append(w)
    if missing and log:
        print(f"aptrepo: downloading {len(missing)} wheel(s): "
              + ", ".join(f"{w.name}=={w.version}" for w in missing), file=log, flush=True)
    for batch in _batches(missing):
        found.update(_download(batch, cache, machine))
    return found


def _download(wheels: list[LockedWheel], cache: Path, machine: str) -> dict[LockedWheel, Path]:
    """pip download *wheels* (distinct names) with their hashes into *cache*."""
    found = {}
    with tempfile.TemporaryDirectory(prefix=".dl-", dir=cache) as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text("".join(w.requirement() + "\n" for w in wheels))
        cmd = [*_pip(), "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
               "--disable-pip-version-check", "--quiet", "-d", str(Path(tmp) / "out"), "-r", str(req)]
        for plat in platforms(machine):
            cmd += ["--platform", plat]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"pip download failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
        for w in wheels:
            hits = [p for p in (Path(tmp) / "out").glob(w.stem + "*.whl") if sha256_file(p) == w.sha256]
            if not hits:
                raise RuntimeError(f"pip did not deliver {w.name}=={w.version} with the locked sha256")
            dest = cache / hits[0].name
            shutil.move(str(hits[0]), dest)
            found[w] = dest
    return found
