"""The service's releases on the node (files/release.sh): the records of what was live,
and what is live now, as digests and names only (never a file's content)."""

import shlex
from pathlib import Path

from pyinfra.api import FactBase

from bringup.release import parse_look

SCRIPT = (Path(__file__).resolve().parents[1] / "files" / "release.sh").read_text()


def release_paths(layout):
    """What files/release.sh is given of the layout, as the fact's arguments.

    >>> from bringup.layout import DEFAULT_LAYOUT
    >>> release_paths(DEFAULT_LAYOUT)["releases"]
    '/opt/sglang/releases'
    """
    return {"releases": layout.releases, "venv": layout.venv, "venvs": layout.venvs, "unit": layout.unit,
            "env_file": layout.env_file}


def script_command(action, releases, venv, venvs, unit, env_file):
    """The shell words that run files/release.sh's ``action`` on these paths (the
    script's text travels in the command: root runs nothing a user could have changed,
    and no step has to install it first).

    >>> script_command("look", "/r", "/v", "/vs", "/u", "/e").split()[:3]
    ['env', 'RELEASES=/r', 'VENV=/v']
    """
    inputs = {"RELEASES": releases, "VENV": venv, "VENVS": venvs, "UNIT": unit, "ENV_FILE": env_file}
    return shlex.join(["env", *(f"{key}={value}" for key, value in inputs.items()), "sh", "-c", SCRIPT,
                       "release.sh", action])


def release_command(layout, action):
    """``script_command`` for this layout."""
    return script_command(action, **release_paths(layout))


class ReleaseLook(FactBase):
    """
    ``{"current", "live", "previous", "previous_venv", "previous_problem"}``: the digest
    of the release the service was last started with, of what is live now, of the one
    a rollback goes back to, its venv, and why it cannot be used ("" when it can).
    """

    def command(self, releases, venv, venvs, unit, env_file):
        return script_command("look", releases, venv, venvs, unit, env_file)

    def process(self, output):
        return parse_look(output)
