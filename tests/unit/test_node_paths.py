"""Node paths in one place: outside bringup/layout.py no module of
tasks/, facts/, control/, inventory/, files/*.py, deploy.py or validate.py spells a path
where the product places something on a node (under /opt, /etc, /var, /usr/local, /run,
/srv, /home), the service's unit by name, or a name the layout puts below one of its
roots. They read them from the plan's ``NodeLayout`` or its constants. Docstrings,
comments and a facts key's ``meaning=`` and ``example=`` (its docs/facts.md row) are
documentation (their examples name the default paths) and are not read.

bringup/ is the planner's own (bringup/plan.py and bringup/explain.py still spell the
toolkit's home; they move to ``layout.toolkit_home``): it joins this list when they do.
"""

import ast
import re
from pathlib import Path

import pytest

from bringup import layout

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(path for folder in ("tasks", "facts", "control", "inventory")
                    for path in (ROOT / folder).rglob("*.py")),
                  *(ROOT / "files").glob("*.py"), ROOT / "deploy.py", ROOT / "validate.py"])

# An absolute path under a root the product writes into, up to the end of the word.
NODE_PATH = re.compile(r"(?<![\w.~-])/(?:opt|etc|var|usr/local|run|srv|home)(?:/[^\s'\"`;:|)]*)?")
# Names the layout places below its roots (the venv, the cache dir, a user's home), and
# the unit's name (not the control side's template, sglang.service.j2).
PLACED_NAMES = (layout.MANIFEST, layout.DEEP_GEMM_MANIFEST, layout.FLASHINFER_CACHE, layout.TORCH_RECORD,
                layout.UPLOAD_STAGE, layout.VENV_COMPLETE)
UNIT_NAME = re.compile(re.escape(layout.DEFAULT_LAYOUT.unit_name) + r"(?![\w.])")

# The system's own paths, which the product reads and never places: (file, path) -> why.
ALLOWED = {
    ("tasks/service.py", "/run/systemd/system"):
        "systemd's own mark that it runs the node (sd_booted(3)): no unit is started without it",
    ("tasks/driver.py", "/run/systemd/system"):
        "systemd's own mark that it runs the node (sd_booted(3)): the driver's units start only under it",
    ("tasks/dcgm.py", "/run/systemd/system"):
        "systemd's own mark that it runs the node (sd_booted(3)): DCGM's host engine starts only under it",
    ("facts/dpkg.py", "/var/lib/dpkg/updates"):
        "dpkg's journal of an interrupted run (dpkg --audit misses a half-written one): dpkg's, not ours",
}


def documentation(tree):
    """The ids of the documentation constants of a module: the docstrings of it, its
    classes and functions, and those of each ``meaning=`` and ``example=`` a probe
    section's ``Key`` gives."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        elif isinstance(node, ast.keyword) and node.arg in ("meaning", "example"):
            found |= {id(part) for part in ast.walk(node.value) if isinstance(part, ast.Constant)}
    return found


def spelled(source):
    """(line, what) of each node path a module's code spells (its string constants and
    f-string parts, documentation left out).

    >>> spelled('x = f"{home}/bin"; y = "/etc/sglang/sglang.env"; z = "prewarm/manifest.json"')
    [(1, '/etc/sglang/sglang.env'), (1, 'prewarm/manifest.json')]
    >>> spelled('def f():\\n    "Writes /etc/environment."\\n    return "files/templates/sglang.service.j2"')
    []
    >>> spelled('KEY = Key(parse=f, meaning="who holds `/var/lib/dpkg/lock-frontend`")')
    []
    """
    tree = ast.parse(source)
    skipped = documentation(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            text = node.value
            found += [(node.lineno, match.group()) for match in NODE_PATH.finditer(text)]
            found += [(node.lineno, name) for name in PLACED_NAMES if name in text]
            found += [(node.lineno, match.group()) for match in UNIT_NAME.finditer(text)]
    return sorted(found)


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_module_spells_a_node_path(path):
    name = str(path.relative_to(ROOT))
    found = [(line, what) for line, what in spelled(path.read_text()) if (name, what) not in ALLOWED]
    assert found == [], f"{name} spells node paths (read them from bringup/layout.py): {found}"


def test_every_allowed_exception_is_still_there():
    # An exception whose path is gone from its file is dropped from the list, so the list
    # stays the true set of paths the product spells outside layout.py.
    present = {(str(path.relative_to(ROOT)), what) for path in SOURCES for _, what in spelled(path.read_text())}
    assert set(ALLOWED) <= present


def test_the_check_sees_what_a_task_would_spell():
    # A task that took the venv root apart again, or named the unit, is caught.
    assert spelled('directory_if_missing(path="/opt/sglang")') == [(1, "/opt/sglang")]
    assert spelled('systemd.service(service="sglang.service")') == [(1, "sglang.service")]
    assert spelled('cmd = f"update-alternatives --install /usr/local/cuda cuda {home}"') == [(1, "/usr/local/cuda")]


@pytest.mark.parametrize("path", sorted((ROOT / "tasks").glob("*.py")), ids=lambda path: path.name)
def test_no_step_takes_a_node_path_apart(path):
    # A step (tasks/<step>.py) reads the directories it needs from the layout (venv_root,
    # env_dir, stage_dirs, ...); the operations below it may split the paths they are given.
    tree = ast.parse(path.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported & {"posixpath", "os.path", "os", "pathlib"} == set()


def test_the_toolkit_home_is_spelled_only_in_the_layout():
    """Issue 25's reader check: ``grep -rn /usr/local/cuda- bringup control facts tasks
    inventory`` finds bringup/layout.py only (code, docstrings and examples alike)."""
    product = [path for folder in ("bringup", "control", "facts", "tasks", "inventory")
               for path in (ROOT / folder).rglob("*.py")]
    product += [*(ROOT / "files").glob("*.py"), ROOT / "deploy.py", ROOT / "validate.py"]
    spelled = sorted(str(path.relative_to(ROOT)) for path in product if "/usr/local/cuda-" in path.read_text())
    assert spelled == ["bringup/layout.py"]
