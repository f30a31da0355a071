"""The live SGLang venv: where its link points and which lock it was completed from."""

import shlex

from pyinfra.api import FactBase

from bringup.layout import VENV_COMPLETE


class VenvLink(FactBase):
    """
    Returns ``{"target": link target or None, "complete": digest in the target's
    .complete marker or None}`` for the live venv link.

    + path: the live venv path (a symlink to ``venvs/<digest>``)

    .. code:: python

        host.get_fact(VenvLink, path="/opt/sglang/venv")
        # {"target": "venvs/3f2a...", "complete": "3f2a..."}
    """

    def command(self, path):
        quoted, marker = shlex.quote(path), shlex.quote(f"{path}/{VENV_COMPLETE}")
        return (f"printf 'target=%s\\n' \"$(readlink {quoted} 2>/dev/null)\"; "
                f"printf 'complete=%s\\n' \"$(cat {marker} 2>/dev/null)\"")

    @staticmethod
    def default():
        return {"target": None, "complete": None}

    def process(self, output):
        link = {"target": None, "complete": None}
        for line in output:
            key, _, value = line.partition("=")
            if key in link:
                link[key] = value or None
        return link
