"""What a file the deploy writes looks like now: kind, owner, mode and content hash."""

import shlex

from pyinfra.api import FactBase


class ManagedFile(FactBase):
    """
    Returns ``{"kind", "user", "group", "mode", "sha1"}`` of ``path`` without following
    a link: ``kind`` is ``file``, ``link``, ``directory``, ``other`` or None (absent);
    the other keys are set for a regular file only (``mode`` as octal digits).

    + path: the file

    .. code:: python

        host.get_fact(ManagedFile, path="/etc/sglang/sglang.env")
        # {"kind": "file", "user": "root", "group": "root", "mode": "644", "sha1": "3f2a..."}
    """

    def command(self, path):
        quoted = shlex.quote(path)
        return (f"if [ -L {quoted} ]; then echo kind=link; "
                f"elif [ -f {quoted} ]; then stat -c 'kind=file user=%U group=%G mode=%a' {quoted}; "
                f"echo sha1=$(sha1sum < {quoted} | cut -d' ' -f1); "
                f"elif [ -d {quoted} ]; then echo kind=directory; "
                f"elif [ -e {quoted} ]; then echo kind=other; else echo kind=; fi")

    @staticmethod
    def default():
        return {"kind": None, "user": None, "group": None, "mode": None, "sha1": None}

    def process(self, output):
        return parse_managed_file(output)


def parse_managed_file(lines):
    """``key=value`` words -> the fact's dict.

    >>> parse_managed_file(["kind=file user=root group=root mode=644", "sha1=ab"])["mode"]
    '644'
    >>> parse_managed_file(["kind="])["kind"] is None
    True
    """
    found = ManagedFile.default()
    for line in lines:
        for word in line.split():
            key, _, value = word.partition("=")
            if key in found:
                found[key] = value or None
    return found
