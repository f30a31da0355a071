"""The API key's source on the control machine (``service_api_key_source``) and its file
on the node (``service_api_key_file``), read for validate's decision (bringup/api_key.py).
The key is never printed: the source's content is only searched for an ``api-key:`` line
and hashed, and the node's fact is read with pyinfra's fact output off (at -vvv pyinfra
prints every fact's output)."""

import hashlib
import os
import stat

from pyinfra import host, state

from bringup.api_key import SOURCE_MOST_BYTES, api_key_findings, has_key
from facts.files import KeyFileAccess


def source_state(path):
    """What the control machine's key source looks like (bringup.api_key.source_problem's
    state), without following a link; ``sha1`` as the node's ``sha1sum`` prints it.

    >>> import tempfile; from pathlib import Path
    >>> key = Path(tempfile.mkdtemp()) / "k.yaml"; _ = key.write_text("api-key: x\\n")
    >>> found = source_state(str(key)); found["kind"], found["has_key"], len(found["sha1"])
    ('file', True, 40)
    >>> source_state(str(key) + ".missing")["kind"] is None
    True
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {"kind": None}
    except OSError:
        return {"kind": "file", "readable": False}
    if stat.S_ISLNK(info.st_mode):
        # A link kept on the control machine is the operator's own: followed for reading.
        try:
            info = os.stat(path)
        except OSError:
            return {"kind": None}
    if not stat.S_ISREG(info.st_mode):
        return {"kind": "directory" if stat.S_ISDIR(info.st_mode) else "other"}
    if info.st_size > SOURCE_MOST_BYTES:
        return {"kind": "file", "readable": True, "size": info.st_size}
    try:
        with open(path, "rb") as source:
            raw = source.read(SOURCE_MOST_BYTES + 1)
    except OSError:
        return {"kind": "file", "readable": False}
    return {"kind": "file", "readable": True, "size": len(raw), "mode": stat.S_IMODE(info.st_mode),
            "has_key": has_key(raw.decode("utf-8", "replace")),
            "sha1": hashlib.sha1(raw).hexdigest()}


def node_key_file(path, user):
    """The node's key file (facts.files.KeyFileAccess), its output kept out of pyinfra's log."""
    saved = getattr(state, "print_fact_output", False)
    state.print_fact_output = False
    try:
        return host.get_fact(KeyFileAccess, path=path, user=user)
    finally:
        state.print_fact_output = saved


def key_findings(config, node):
    """The key file's findings for this host's settings and plan ([] without a key file)."""
    dest, source = config.service_api_key_file, config.service_api_key_source
    if not dest:
        return []
    found = api_key_findings(source, source_state(source) if source else None, dest,
                             node_key_file(dest, config.service_user), config.service_user, node.runs("account"))
    # The upload is the service step's: a deploy without it uploads nothing.
    return [f for f in found if f.code != "API_KEY_FILE_UPLOAD" or node.runs("service")]
