"""Locks: what ``make lock`` generates from ``files/locks/*.in`` and how a plan finds them.

Three kinds, all generated (``control/locks.py``), all checked for staleness by a unit
test that compares each lock's ``input-sha256`` header with its ``.in``:

- venv locks ``<input>-cp<XY>-<machine>.txt`` (pins with hashes, ``uv pip compile``), for
  every CPython a supported platform builds its venv with and every supported CPU
  (bringup/venv_locks.py);
- toolkit locks ``cuda-<X.Y>-<distro>-<machine>.txt`` (``package=version`` lines), read
  from the CUDA repository's ``Packages`` index of that distro and CPU, holding the
  release ``cuda-<X.Y>.in`` names (bringup/toolkit_locks.py);
- driver locks ``driver-<branch>-<distro>-<machine>.txt`` (``<role> package=version``
  lines), from the same index: ``driver-<branch>.in``'s version, each kernel module
  flavour's packages with everything of the repository they depend on, Fabric Manager's,
  NVLSM's and the pinning package (bringup/driver_locks.py; bringup/driver_packages.py
  names them).

The toolkit's and the driver's packages are picked from the index by one resolver
(bringup/deb_index.py). Here: what every kind shares, their directory, their header,
their error, and the one reader of lock files the planner has (``LockFiles``).
Reading, fetching and running uv is control/locks.py's job.
"""

import hashlib
import posixpath

LOCKS_DIR = "files/locks"
HEADER_KEYS = ("input-sha256", "target", "omits", "index", "branch", "version")


def sha256(data):
    """Hex sha256 of bytes.

    >>> sha256(b"")[:8]
    'e3b0c442'
    """
    return hashlib.sha256(data).hexdigest()


def read_header(text):
    """``key: value`` of a lock's leading comment lines (``HEADER_KEYS``); ``omits`` is a list.

    >>> read_header("# input-sha256: ab\\n# omits: x (y)\\nfoo==1\\n")
    {'omits': ['x'], 'input-sha256': 'ab'}
    """
    header = {"omits": []}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].strip().partition(": ")
        if sep and key in HEADER_KEYS:
            if key == "omits":
                header["omits"].append(value.split(" ", 1)[0])
            else:
                header[key] = value
    return header


class LockError(ValueError):
    """A lock input or index cannot give a lock; the message names what and the fix."""


class LockFiles:
    """Read access to the control side's lock files, relative paths under ``root`` (the
    directory pyinfra and ``python -m bringup.plan`` run in: the repository root). The
    one place the planner reads a file; tests hand it a dict (``LockFiles.of``)."""

    def __init__(self, root=".", files=None):
        self.root, self.files = root, files

    @classmethod
    def of(cls, files):
        """Lock files held in memory: {path: text}.

        >>> LockFiles.of({"a.txt": "x"}).read("a.txt"), LockFiles.of({}).read("a.txt")
        ('x', None)
        """
        return cls(files=dict(files))

    def read(self, path):
        """The lock's text, or None when there is no such file."""
        if self.files is not None:
            return self.files.get(path)
        full = path if posixpath.isabs(path) else posixpath.join(self.root, path)
        try:
            with open(full, encoding="utf-8") as handle:
                return handle.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
