"""Layers in a line: the planner (bringup/) is pure and imports nothing of the layers
that observe, act or stand in (control/, facts/, tasks/, sandbox/); no product module
imports the sandbox or the tests, not even in a docstring's example; the plan package's
decisions (bringup/plan/ but its CLI) read and write nothing; no product file is over
500 lines."""

import ast
import doctest
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported(path):
    """The top-level packages ``path`` imports."""
    return imported_by(ast.parse(path.read_text()))


def imported_by(tree):
    """The top-level packages a parsed module imports."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def called(path):
    """The names ``path`` calls directly (``open(...)``, ``print(...)``)."""
    return {node.func.id for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


@pytest.mark.parametrize("path", sorted((ROOT / "bringup").rglob("*.py")),
                         ids=lambda path: str(path.relative_to(ROOT / "bringup")))
def test_the_planner_imports_no_io_layer(path):
    assert imported(path) & {"control", "facts", "tasks", "sandbox", "inventory"} == set()


# What a decision of the plan package may use: the planner's own modules, packaging,
# and the standard library's modules that compute without reading or writing anything.
PURE = {"bringup", "packaging", "dataclasses", "typing", "re", "shlex", "ipaddress", "posixpath", "urllib"}
# The plan package's edges: its CLI reads the files it is given and prints the plan.
PLAN_EDGES = ("cli.py", "__main__.py")


@pytest.mark.parametrize("path", [path for path in sorted((ROOT / "bringup" / "plan").glob("*.py"))
                                  if path.name not in PLAN_EDGES], ids=lambda path: path.name)
def test_the_plan_decisions_do_no_io(path):
    assert imported(path) <= PURE, f"{path.name} imports {sorted(imported(path) - PURE)}"
    assert called(path) & {"open", "print", "input", "exec", "eval", "__import__"} == set()


PRODUCT = ("bringup", "control", "facts", "tasks", "inventory")


def sandbox_paths(path):
    """The string literals of ``path`` that spell a path into the sandbox's state."""
    return [node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ".sandbox" in node.value]


@pytest.mark.parametrize("path", sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py")),
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_the_product_never_reaches_into_the_sandbox(path):
    """The sandbox registers what it offers in the product's own inputs (inventory/hosts.d/,
    a --repo-url for make lock); no product module imports it or reads its state."""
    assert "sandbox" not in imported(path) and sandbox_paths(path) == []


def imported_by_examples(path):
    """The top-level packages the examples of ``path``'s docstrings import (its doctests)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for example in doctest.DocTestParser().get_examples(ast.get_docstring(node, clean=False) or ""):
                found |= imported_by(ast.parse(example.source))
    return found


def product_files(root):
    """The product's Python and shell: its packages, the node-side files/ (the locks are
    data; a helper without an extension, such as ``session-bound``, counts) and the entry
    points."""
    helpers = (path for path in (root / "files").iterdir() if path.is_file() and not path.suffix)
    return sorted([*(path for package in PRODUCT for path in (root / package).rglob("*.py")),
                   *(root / "files").rglob("*.py"), *(root / "files").rglob("*.sh"), *helpers,
                   *root.glob("*.py")])


def is_python(path):
    return path.suffix == ".py" or path.read_text().startswith('"""')


@pytest.mark.parametrize("path", [path for path in product_files(ROOT) if is_python(path)],
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_the_product_never_imports_the_tests(path):
    """Test fixtures stay in tests/: a product module's examples build what they need."""
    assert "tests" not in imported(path) | imported_by_examples(path)


def test_an_example_that_imports_the_tests_is_found(tmp_path):
    module = tmp_path / "module.py"
    module.write_text('def decide():\n    """Decides.\n\n    >>> from tests.model_facts import WHOLE\n    """\n')
    assert imported_by_examples(module) == {"tests"}


# A product file longer than this is split by concern (issue 35): it holds more than one.
MAX_LINES = 500


def too_long(root):
    """{path: lines} of the product files over ``MAX_LINES``."""
    return {str(path.relative_to(root)): lines for path in product_files(root)
            if (lines := len(path.read_text().splitlines())) > MAX_LINES}


def test_no_product_file_is_over_500_lines():
    assert too_long(ROOT) == {}


def test_a_product_file_over_500_lines_is_found(tmp_path):
    (tmp_path / "files" / "probe.d").mkdir(parents=True)
    (tmp_path / "bringup").mkdir()
    (tmp_path / "files" / "probe.d" / "long.sh").write_text("x\n" * 501)
    (tmp_path / "bringup" / "short.py").write_text("x\n" * 500)
    assert too_long(tmp_path) == {"files/probe.d/long.sh": 501}
