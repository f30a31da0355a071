"""needrestart (Ubuntu's server and cloud images) must never prompt during a deploy:
every apt call the tasks make carries APT_ENV, pyinfra's apt operations as ``_env``,
the tasks' own apt-get command lines as assignments before it."""

import ast
import re
from pathlib import Path

from tasks.operations import packages

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _calls(tree):
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_pyinfra_apt_operations_get_the_apt_env():
    found = []
    for path in sorted(TASKS.rglob("*.py")):
        for call in _calls(ast.parse(path.read_text())):
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "apt":
                env = [kw.value for kw in call.keywords if kw.arg == "_env"]
                found.append((path.name, func.attr, bool(env) and isinstance(env[0], ast.Name)
                              and env[0].id == "APT_ENV"))
    assert found, "no apt operation found in tasks/"
    assert [entry for entry in found if not entry[2]] == []


def test_every_apt_get_command_line_is_prefixed():
    """The tasks' apt-get command lines (``apt-get -...``, ``apt-get {...}``, f-strings included) come right
    after apt_env_prefix(); prose naming apt-get is not a command line."""
    bare = []
    for path in sorted(TASKS.rglob("*.py")):
        tree = ast.parse(path.read_text())
        # An f-string's literal parts are read with it, not alone.
        parts = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
        for node in ast.walk(tree):
            if id(node) in parts:
                continue
            if isinstance(node, ast.JoinedStr):
                text = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            bare += [(path.name, match.group(0)) for match in re.finditer(r"(\S*) apt-get [-{]", text)
                     if not match.group(1).endswith("{}")]
    assert bare == []


def test_the_prefix_suspends_needrestart_and_keeps_debconf_quiet():
    prefix = packages.apt_env_prefix()
    assert prefix.split() == ["DEBIAN_FRONTEND=noninteractive", "NEEDRESTART_MODE=a", "NEEDRESTART_SUSPEND=1"]
