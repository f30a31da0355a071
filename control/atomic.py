"""The control side's one way to write a file: whole or not at all.

Readers (pyinfra reading a registered host list, an operator tailing reports/, the
apt repository's server) see the old file or the new one, never half of one.
"""

import os
import tempfile
from pathlib import Path


def atomic_write(path, data, mode=0o644):
    """Write ``data`` (str or bytes) to ``path`` through a temp file in the same
    directory, flushed to disk, then renamed over it; the mode is set explicitly
    (mkstemp makes 0600 whatever the umask). Creates missing parent directories.

    >>> import tempfile; from pathlib import Path
    >>> target = Path(tempfile.mkdtemp()) / "a" / "b.json"
    >>> atomic_write(target, "{}\\n"); target.read_text(), oct(target.stat().st_mode & 0o777)
    ('{}\\n', '0o644')
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(raw)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise

