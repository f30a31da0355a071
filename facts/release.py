"""The service's releases on the node (files/release.sh): the records of what was live,
and what is live now, as digests and names only (never a file's content)."""

import shlex
from pathlib import Path

from pyinfra.api import FactBase

from bringup.release import parse_look

SCRIPT = (Path(__file__).resolve().parents[1] / "files" / "release.sh").read_text()


def release_command(layout, action):
    """The shell words that run files/release.sh's ``action`` for this layout (the
    script's text travels in the command: root runs nothing a user could have changed,
    and no step has to install it first).

    >>> from bringup.layout import DEFAULT_LAYOUT
    >>> release_command(DEFAULT_LAYOUT, "look").split()[:3]
    ['env', 'RELEASES=/opt/sglang/releases', 'VENV=/opt/sglang/venv']
    """
    inputs = {"RELEASES": layout.releases, "VENV": layout.venv, "VENVS": layout.venvs, "UNIT": layout.unit,
              "ENV_FILE": layout.env_file}
    return shlex.join(["env", *(f"{key}={value}" for key, value in inputs.items()), "sh", "-c", SCRIPT,
                       "release.sh", action])


class ReleaseLook(FactBase):
    """
    ``{"current", "live", "previous", "previous_venv", "previous_problem"}``: the digest
    of the release the service was last started with, of what is live now, of the one
    a rollback goes back to, its venv, and why it cannot be used ("" when it can).
    """

    def command(self, layout):
        return release_command(layout, "look")

    def process(self, output):
        return parse_look(output)
