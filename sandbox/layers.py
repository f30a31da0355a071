"""Cached overlay layers: what a state script changed on top of a base image.

A layer is the overlay upper directory of one run of a state's script (a small
shell script, run as root chrooted into a throwaway overlay of the base image
and the layers below it; ``files/layer-init.sh``). Nodes mount a chain of them
read-only between the base image and their own upper directory::

    lowerdir=<layer n>/upper:...:<layer 1>/upper:<base root>

overlayfs honours the whiteouts and opaque directories a layer holds, so a
file a script deleted stays deleted in every node.

Cache: ``<image cache>/layers/<key>/`` with ``upper/``, ``layer.json`` and the
script's ``build.log``. The key names the state and hashes everything that
shapes the layer: the base image, the parent layer's key (so a chain is keyed
by all of it), the script's text, the inputs the caller names (an apt
repository's manifest digest, a lock's digest) and this builder. A layer is
built once per machine, in a ``.tmp-*`` directory renamed into place when
complete, under a file lock; a failed build leaves no entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from control.atomic import atomic_write
from sandbox import image
from sandbox.fsutil import file_lock, mounts_under, safe_rmtree

INIT_SCRIPT = Path(__file__).resolve().parent / "files" / "layer-init.sh"
NODE_FS_SCRIPT = INIT_SCRIPT.with_name("node-fs.sh")
# Bump when what a layer holds changes for the same inputs.
LAYER_FORMAT = 1
BUILD_TIMEOUT_S = 3600
LOG_TAIL_LINES = 40


class LayerBuildError(RuntimeError):
    """A state's script failed; the message ends with its output's tail."""


@dataclass(frozen=True)
class Step:
    """One layer to have: a state's script and what shapes it.

    ``inputs`` go into the key (digests, never ports or pids). ``prepare`` runs
    only when the layer must be built and returns the script's environment (so
    a mirror is started only then). ``files`` are copied beside the script
    (name in /run/state -> host path). ``shares_with``: other states whose cached
    layers may hold the same large files (share_identical_files), besides its own.
    """

    state: str
    script: str
    inputs: dict = field(default_factory=dict)
    prepare: Callable[[], dict] | None = None
    files: dict = field(default_factory=dict)
    shares_with: tuple = ()


@dataclass(frozen=True)
class Layer:
    """A cached layer: its key and directory (``upper`` is what nodes mount)."""

    key: str
    path: Path

    @property
    def upper(self) -> Path:
        return self.path / "upper"

    def info(self) -> dict:
        """layer.json of the layer."""
        return json.loads((self.path / "layer.json").read_text())


def layers_dir() -> Path:
    """Where layers live: beside the base images (``python -m sandbox destroy`` removes both)."""
    return image.cache_dir() / "layers"


def layer_key(base_key: str, parent: str | None, step: Step) -> str:
    """``<state>-<16 hex>`` over the base image, the parent, the script, the inputs, the builder.

    >>> a = layer_key("bookworm-x", None, Step("operator", "echo hi"))
    >>> a.startswith("operator-"), a == layer_key("bookworm-x", None, Step("operator", "echo hi"))
    (True, True)
    >>> a == layer_key("trixie-y", None, Step("operator", "echo hi"))
    False
    """
    spec = {
        "base": base_key,
        "parent": parent,
        "state": step.state,
        "script": hashlib.sha256(step.script.encode()).hexdigest(),
        "inputs": step.inputs,
        "format": LAYER_FORMAT,
        "builder": hashlib.sha256(INIT_SCRIPT.read_bytes() + NODE_FS_SCRIPT.read_bytes()).hexdigest(),
    }
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    return f"{step.state}-{digest}"


def chain_keys(base_key: str, steps: list[Step]) -> list[str]:
    """The key of each step's layer, bottom first (each keyed by the ones below)."""
    keys, parent = [], None
    for step in steps:
        parent = layer_key(base_key, parent, step)
        keys.append(parent)
    return keys


def ensure_chain(os_name: str, steps: list[Step], log=sys.stderr) -> list[Layer]:
    """The layers of *steps* on *os_name*'s base image, bottom first, building the missing ones."""
    base = image.base_root(log, os_name=os_name)
    base_key = image.image_dir(os_name).name
    layers: list[Layer] = []
    for step, key in zip(steps, chain_keys(base_key, steps)):
        path = layers_dir() / key
        if not (path / "layer.json").is_file():
            _build_locked(os_name, base, base_key, layers, step, key, log)
        layers.append(Layer(key, path))
    return layers


def lowerdir(base: Path, layers: list[Layer]) -> str:
    """overlayfs lowerdir of a node: the top layer first, the base image last.

    >>> lowerdir(Path("/b"), [Layer("a-1", Path("/l/a-1")), Layer("b-2", Path("/l/b-2"))])
    '/l/b-2/upper:/l/a-1/upper:/b'
    """
    return ":".join([str(layer.upper) for layer in reversed(layers)] + [str(base)])


def cached() -> list[dict]:
    """layer.json of every cached layer, with its directory, by state then age."""
    found = []
    if layers_dir().is_dir():
        for meta in layers_dir().glob("*/layer.json"):
            found.append(dict(json.loads(meta.read_text()), path=str(meta.parent)))
    return sorted(found, key=lambda info: (info.get("state", ""), info.get("built_at", "")))


def in_use() -> set[str]:
    """Keys of the layers some overlay on this machine mounts (any checkout's nodes and builds).

    Read from every process's mountinfo: a node's mounts live in its own mount
    namespace, invisible in ours.
    """
    top, keys, seen = str(layers_dir()) + "/", set(), set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            namespace = os.readlink(f"/proc/{pid}/ns/mnt")
            if namespace in seen:
                continue
            seen.add(namespace)
            text = Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            continue
        for part in text.split(top)[1:]:
            keys.add(part.split("/", 1)[0])
    return keys


def prune(is_current: Callable[[dict], bool], log=sys.stderr) -> list[str]:
    """Delete the cached layers nothing can reach any more; return their keys.

    A layer is stale when *is_current* says its state's script and inputs no
    longer make it (an edited script, a rebuilt apt repository, a new lock), or
    when the layer below it is stale. Layers an overlay mounts are kept.
    """
    with file_lock(layers_dir() / ".lock"):
        infos = {info["key"]: info for info in cached()}
        stale: set[str] = set()
        for key in _bottom_first(infos):
            info = infos[key]
            if info.get("parent") in stale or (info.get("parent") and info["parent"] not in infos) \
                    or not is_current(info):
                stale.add(key)
        busy = in_use()
        removed = sorted(key for key in stale if key not in busy)
        for key in removed:
            safe_rmtree(layers_dir() / key)
            print(f"sandbox: removed stale layer {key}", file=log, flush=True)
        return removed


def _bottom_first(infos: dict[str, dict]) -> list[str]:
    """Layer keys ordered so that each comes after its parent."""
    depth = {}

    def level(key):
        if key not in depth:
            parent = infos[key].get("parent")
            depth[key] = 0 if parent not in infos else level(parent) + 1
        return depth[key]

    return sorted(infos, key=level)


def _build_locked(os_name, base, base_key, below, step, key, log) -> None:
    """Build one layer under the layers' lock (another process may have built it meanwhile)."""
    top = layers_dir()
    top.mkdir(parents=True, exist_ok=True)
    os.chmod(top, 0o755)
    with file_lock(top / ".lock"):
        if (top / key / "layer.json").is_file():
            return
        _clean_stale_tmp()
        _build(os_name, base, base_key, below, step, key, log)


def _clean_stale_tmp() -> None:
    """Delete what a killed build left (its namespaces, and so its mounts, died with it)."""
    for entry in layers_dir().glob(".tmp-*"):
        if mounts_under(entry):
            raise RuntimeError(f"stale layer build {entry} still has mounts; unmount them first")
        safe_rmtree(entry)


def _build(os_name, base, base_key, below, step, key, log) -> None:
    """Run the step's script in a throwaway overlay; keep its upper directory as the layer."""
    # First, so that a mirror that cannot be started leaves nothing behind.
    env = step.prepare() if step.prepare else {}
    tmp = layers_dir() / f".tmp-{key}-{os.getpid()}"
    for sub in ("upper", "work", "root", "inputs"):
        (tmp / sub).mkdir(parents=True, mode=0o755)
    os.chmod(tmp / "upper", os.stat(base).st_mode & 0o7777)
    _write_inputs(tmp / "inputs", step)
    print(f"sandbox: building layer {key} ({os_name}, state {step.state})...", file=log, flush=True)
    started = time.monotonic()
    returncode = run_script(tmp, lowerdir(base, below), env)
    seconds = round(time.monotonic() - started, 1)
    if returncode != 0:
        tail = log_tail(tmp / "build.log")
        safe_rmtree(tmp)
        raise LayerBuildError(f"state {step.state} failed on {os_name} (exit {returncode}); "
                              f"no layer cached. Last lines of its output:\n{tail}")
    for sub in ("work", "root", "inputs"):
        safe_rmtree(tmp / sub)
    states = (step.state, *step.shares_with)
    shared = share_identical_files(tmp / "upper", [p / "upper" for state in states
                                                   for p in layers_dir().glob(f"{state}-*")
                                                   if (p / "layer.json").is_file()])
    if shared:
        print(f"sandbox: layer {key} shares {shared / 1e9:.1f} GB with cached {', '.join(states)} layers", file=log,
              flush=True)
    meta = {
        "key": key, "state": step.state, "os": os_name, "base": base_key,
        "parent": below[-1].key if below else None, "inputs": step.inputs,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": seconds, "disk_bytes": disk_usage(tmp / "upper"),
    }
    # layer.json last: together with the rename it marks a finished layer.
    atomic_write(tmp / "layer.json", json.dumps(meta, indent=2) + "\n", 0o644)
    os.rename(tmp, layers_dir() / key)
    print(f"sandbox: layer {key} ready in {seconds} s, {meta['disk_bytes'] / 1e6:.0f} MB",
          file=log, flush=True)


# Files smaller than this are not worth a comparison.
SHARE_MIN_BYTES = 1 << 20


def _file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def stamped(path: Path) -> bool:
    """Whether something records *path*'s inode or modification time, so that a hard link
    (another file's inode and mtime) would make the record stale: Python sources (their
    ``__pycache__`` holds the source's mtime) and a wheel's install metadata (files/torch_info.py
    stamps torch's RECORD by size, mtime and inode).

    >>> stamped(Path("site-packages/torch/_tensor.py")), stamped(Path("site-packages/torch-2.14.1.dist-info/RECORD"))
    (True, True)
    >>> stamped(Path("site-packages/nvidia/cudnn/lib/libcudnn.so.9"))
    False
    """
    return path.suffix == ".py" or path.parent.name.endswith(".dist-info")


def share_identical_files(upper: Path, others: list[Path], min_bytes: int = SHARE_MIN_BYTES) -> int:
    """Hard-link the large files of the new layer *upper* to identical ones (content, mode,
    owner) in the cached layers *others*; returns the bytes saved. Another distribution's
    hand-built venv holds the same CUDA libraries (gigabytes, py3-none wheels). Only the new
    layer's files are replaced (it is not mounted yet); a lower layer is never written by
    overlayfs (a node's change is copied up), so a shared inode stays as it is. Files whose
    inode or mtime something records (``stamped``) keep their own.

    >>> import tempfile; top = Path(tempfile.mkdtemp())
    >>> for name in ("old", "new"):
    ...     (top / name).mkdir(); _ = (top / name / "lib.so").write_bytes(b"x" * 64)
    >>> share_identical_files(top / "new", [top / "old"], min_bytes=1)
    64
    >>> (top / "new" / "lib.so").stat().st_ino == (top / "old" / "lib.so").stat().st_ino
    True
    >>> for name in ("old", "new"):
    ...     _ = (top / name / "big.py").write_bytes(b"x" * 64)
    >>> share_identical_files(top / "new", [top / "old"], min_bytes=1)
    0
    """
    def large_files(root: Path):
        for folder, _, names in os.walk(root):
            for name in names:
                path = Path(folder) / name
                if stamped(path):
                    continue
                st = path.lstat()
                if stat.S_ISREG(st.st_mode) and st.st_size >= min_bytes:
                    yield path, st

    new = list(large_files(upper))
    sizes = {st.st_size for _, st in new}
    known: dict[tuple, Path] = {}
    for root in others:
        for path, st in large_files(root):
            if st.st_size in sizes:
                known.setdefault((st.st_size, st.st_mode, st.st_uid, st.st_gid, _file_digest(path)), path)
    known_sizes = {key[0] for key in known}
    saved = 0
    for path, st in new:
        if st.st_nlink != 1 or st.st_size not in known_sizes:
            continue
        match = known.get((st.st_size, st.st_mode, st.st_uid, st.st_gid, _file_digest(path)))
        if match is None or match.stat().st_dev != st.st_dev:
            continue
        link = path.with_name(f".{path.name}.share-{os.getpid()}")
        os.link(match, link)
        os.replace(link, path)
        saved += st.st_size
    return saved


def _write_inputs(folder: Path, step: Step) -> None:
    """The script (as script.sh) and its input files, for layer-init.sh to copy in."""
    (folder / "script.sh").write_text(step.script)
    for name, source in step.files.items():
        shutil.copyfile(source, folder / name)


def run_script(tmp: Path, lower: str, env: dict) -> int:
    """layer-init.sh in private mount+PID namespaces; its output goes to tmp/build.log."""
    cmd = [
        "unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
        "/bin/sh", str(INIT_SCRIPT), lower, str(tmp / "upper"), str(tmp / "work"), str(tmp / "root"),
        str(tmp / "inputs"), *[f"{name}={value}" for name, value in sorted(env.items())],
    ]
    with open(tmp / "build.log", "wb") as out:
        try:
            return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=BUILD_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            return 124


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    """Last lines of a build log."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def disk_usage(path: Path) -> int:
    """Bytes the tree under *path* takes on disk (each hard-linked file once)."""
    seen, total = set(), 0
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            st = os.lstat(os.path.join(folder, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total
