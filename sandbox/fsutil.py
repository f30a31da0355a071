"""Small filesystem helpers shared by the image builder and the node manager.

Kept free of sandbox policy: an exclusive file lock, mount inspection and a
mount-aware recursive delete, and a whole-file link-or-copy for the apt repository's
cached packages (whole-file writes: control.atomic).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import shutil
import subprocess
import time
from pathlib import Path


def write_file(path: Path, data: str | bytes, mode: int) -> None:
    """Write a (non-state) file with an explicit mode, whatever the umask."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    with open(path, "wb") as fh:
        fh.write(raw)
    os.chmod(path, mode)


@contextlib.contextmanager
def file_lock(path: Path):
    """Hold an exclusive flock on ``path`` (created 0644, its directory 0755) while inside.

    >>> import tempfile; from pathlib import Path
    >>> with file_lock(Path(tempfile.mkdtemp()) / "x" / ".lock"):
    ...     pass
    """
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    with open(path, "a") as handle:
        os.chmod(path, 0o644)
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def swap_in(new: Path, final: Path) -> None:
    """Put directory *new* at *final* in one step; the old *final*, if any, is left at *new*.

    renameat2(RENAME_EXCHANGE) swaps the two names at once, so a reader of *final* (an HTTP
    server handing out a repository's indexes) finds the old tree or the new one, never none;
    where the filesystem cannot exchange, two renames.

    >>> import tempfile; from pathlib import Path
    >>> top = Path(tempfile.mkdtemp()); (top / "new").mkdir(); (top / "new" / "v2").touch()
    >>> swap_in(top / "new", top / "final"); sorted(p.name for p in (top / "final").iterdir())
    ['v2']
    >>> (top / "new").mkdir(); (top / "new" / "v3").touch(); swap_in(top / "new", top / "final")
    >>> [p.name for p in (top / "final").iterdir()], [p.name for p in (top / "new").iterdir()]
    (['v3'], ['v2'])
    """
    if not final.exists():
        os.rename(new, final)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 and renameat2(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(final), _RENAME_EXCHANGE) == 0:
        return
    if renameat2 and ctypes.get_errno() not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        raise OSError(ctypes.get_errno(), f"renameat2 {new} <-> {final}: {os.strerror(ctypes.get_errno())}")
    aside = new.with_name(new.name + ".old")
    os.rename(final, aside)
    os.rename(new, final)
    os.rename(aside, new)


def _unescape_mountinfo(field: str) -> str:
    """Undo the octal escapes (\\040 for a space...) used in /proc/*/mountinfo."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(prefix: Path, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points at or below *prefix* in the given mountinfo table."""
    prefix_s = str(Path(prefix).resolve())
    found = []
    try:
        with open(mountinfo, encoding="utf-8") as fh:
            lines = fh.readlines()
    except OSError:
        return []
    for line in lines:
        point = _unescape_mountinfo(line.split()[4])
        if point == prefix_s or point.startswith(prefix_s.rstrip("/") + "/"):
            found.append(point)
    return found


def _deletable(path: Path) -> bool:
    """Whether *path* is there to delete; refuses (RuntimeError) a tree with anything mounted
    under it."""
    if not path.exists() and not path.is_symlink():
        return False
    left = mounts_under(path)
    if left:
        raise RuntimeError(f"refusing to delete {path}: still mounted: {', '.join(left)}")
    return True


def safe_rmtree(path: Path) -> None:
    """Delete *path* recursively, refusing to descend into anything mounted.

    A stray bind mount of /dev or /proc under a node root would otherwise
    let rmtree delete host files.
    """
    path = Path(path)
    if not _deletable(path):
        return
    # rm, not shutil.rmtree: a node's tree holds a venv of tens of thousands of
    # directories, and the test process deleting one ran out of file descriptors
    # (EMFILE inside rmtree); --one-file-system is a second guard
    # against a mount that appeared after the check.
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=True)


def discard(path: Path, trash: Path) -> None:
    """Move *path* into *trash* (one rename) and delete it there in the background.

    A node's tree is gigabytes (a venv, a toolkit): deleting it took 15 - 25 s, which
    ``sandbox down`` spent holding the state lock while the next node waited. Renamed
    first, the name is free at once and nothing else knows the new path, so nothing can
    be mounted under it; ``rm`` runs detached (``setsid -f``) and outlives its caller.

    >>> import tempfile; top = Path(tempfile.mkdtemp()); (top / "node" / "venv").mkdir(parents=True)
    >>> discard(top / "node", top / "trash"); (top / "node").exists()
    False
    """
    path = Path(path)
    if not _deletable(path):
        return
    trash.mkdir(mode=0o700, exist_ok=True)
    doomed = trash / f"{path.name}.{os.getpid()}.{time.time_ns()}"
    os.rename(path, doomed)
    # At the caller's priority: the test workers keep every core busy, and a niced rm got
    # so little of them (nice 10: 5 s of CPU in 3 minutes, a venv node's 45,000 inodes
    # still there) that the trees held the disk the next venv node needed.
    subprocess.run(["setsid", "-f", "rm", "-rf", "--one-file-system", "--", str(doomed)], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def link_or_copy(source, target):
    """Put ``source``'s content at ``target`` whole: a hard link where both are on one
    file system (no bytes copied), else a copy; then a rename over ``target``."""
    target = Path(target)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        os.link(source, temp)
    except OSError:
        shutil.copy2(source, temp)
    os.replace(temp, target)
