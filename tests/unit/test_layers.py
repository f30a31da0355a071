"""Layers in a line: the planner (bringup/) is pure and imports nothing of the layers
that observe, act or stand in (control/, facts/, tasks/, sandbox/); no product module
imports the sandbox."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported(path):
    """The top-level packages ``path`` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "bringup").glob("*.py")), ids=lambda path: path.name)
def test_the_planner_imports_no_io_layer(path):
    assert imported(path) & {"control", "facts", "tasks", "sandbox", "inventory"} == set()
