"""What a file the deploy writes looks like now: kind, owner, mode and content hash."""

import base64
import binascii
import posixpath
import shlex

from pyinfra.api import FactBase


class ManagedFile(FactBase):
    """
    Returns ``{"kind", "user", "group", "mode", "sha1", "text"}`` of ``path`` without
    following a link: ``kind`` is ``file``, ``link``, ``directory``, ``other`` or None
    (absent); the other keys are set for a regular file only (``mode`` as octal digits).
    With ``text``, ``text`` is the content (of a regular file, or read through a link),
    in the same round trip: an operation that merges into a file reads it once.

    + path: the file
    + text: also return the content

    .. code:: python

        host.get_fact(ManagedFile, path="/etc/sglang/sglang.env")
        # {"kind": "file", "user": "root", "group": "root", "mode": "644", "sha1": "3f2a..."}
    """

    def command(self, path, text=False):
        quoted = shlex.quote(path)
        content = f"echo text=$(base64 -w0 < {quoted} 2>/dev/null); " if text else ""
        return (f"if [ -L {quoted} ]; then echo kind=link; {content}"
                f"elif [ -f {quoted} ]; then stat -c 'kind=file user=%U group=%G mode=%a' {quoted}; "
                f"echo sha1=$(sha1sum < {quoted} | cut -d' ' -f1); {content}"
                f"elif [ -d {quoted} ]; then echo kind=directory; "
                f"elif [ -e {quoted} ]; then echo kind=other; else echo kind=; fi")

    @staticmethod
    def default():
        return {"kind": None, "user": None, "group": None, "mode": None, "sha1": None, "text": None}

    def process(self, output):
        return parse_managed_file(output)


def parse_managed_file(lines):
    """``key=value`` words -> the fact's dict (``text`` base64 on a line of its own).

    >>> parse_managed_file(["kind=file user=root group=root mode=644", "sha1=ab"])["mode"]
    '644'
    >>> parse_managed_file(["kind="])["kind"] is None
    True
    >>> parse_managed_file(["kind=file", "text=QT0xCg=="])["text"]
    'A=1\\n'
    >>> parse_managed_file(["kind=file", "text="])["text"]
    ''
    """
    found = ManagedFile.default()
    for line in lines:
        if line.startswith("text="):
            try:
                found["text"] = base64.b64decode(line[5:].strip()).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                found["text"] = None
            continue
        for word in line.split():
            key, _, value = word.partition("=")
            if key in found:
                found[key] = value or None
    return found


class KeyFileAccess(FactBase):
    """
    Returns ``{"kind", "user", "group", "mode", "sha1", "readable", "writable_dir",
    "closed_dir"}`` of the API key file
    ``path`` without following a link (``ManagedFile``'s keys), and whether the service
    user ``user`` can read it: True/False, None when the account does not exist (yet).
    The content is never read into the output; ``sha1`` is the file's digest (kept out
    of pyinfra's log by its caller). The read test runs root's own ``/usr/bin/test`` as
    the service user with a clean environment.

    + path: ``service_api_key_file``
    + user: the service user

    .. code:: python

        host.get_fact(KeyFileAccess, path="/etc/sglang/api-key.yaml", user="sglang")
        # {"kind": "file", "user": "root", "group": "sglang", "mode": "640", "sha1": "3f2a...", "readable": True}
    """

    def command(self, path, user):
        quoted, who = shlex.quote(path), shlex.quote(user)
        readable = (f"if id -u -- {who} >/dev/null 2>&1; then if env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "
                    f"runuser -u {who} -- /usr/bin/test -r {quoted}; then echo readable=yes; "
                    f"else echo readable=no; fi; else echo readable=; fi")
        # The first directory above the file (links resolved) that a user other than root
        # may write: there root's upload (stage, chown, rename) could be swapped for a link.
        directory = shlex.quote(posixpath.dirname(path) or "/")
        writable = (f"d=$(readlink -m -- {directory}); while :; do if [ -e \"$d\" ] && "
                    f"! stat -c '%u %a' -- \"$d\" | grep -qE '^0 ([0-7]?[0-7][0145][0145])$'; then "
                    "echo \"writable_dir=$d\"; break; fi; [ \"$d\" = / ] && break; d=$(dirname -- \"$d\"); done")
        # The nearest directory of the file that exists (deploy makes the missing ones 0755):
        # one the service user cannot reach hides the key deploy uploads from SGLang.
        reach = (f"if id -u -- {who} >/dev/null 2>&1; then d=$(readlink -m -- {directory}); "
                 "while [ ! -e \"$d\" ] && [ \"$d\" != / ]; do d=$(dirname -- \"$d\"); done; "
                 f"env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin runuser -u {who} -- /usr/bin/test -x \"$d\" "
                 "|| echo \"closed_dir=$d\"; fi")
        return f"{ManagedFile().command(path)}; {readable}; {writable}; {reach}"

    @staticmethod
    def default():
        return {**ManagedFile.default(), "readable": None, "writable_dir": None, "closed_dir": None}

    def process(self, output):
        found = {**parse_managed_file([line for line in output
                                       if not line.startswith(("readable=", "writable_dir=", "closed_dir="))]),
                 "readable": None, "writable_dir": None, "closed_dir": None}
        found.pop("text", None)
        for line in output:
            if line.startswith("readable="):
                found["readable"] = {"yes": True, "no": False}.get(line.partition("=")[2].strip())
            elif line.startswith("writable_dir="):
                found["writable_dir"] = line.partition("=")[2]
            elif line.startswith("closed_dir="):
                found["closed_dir"] = line.partition("=")[2]
        return found
