"""docs/contributing.md stays true to the code: every module under bringup/ is named in
its table of modules, and every module it names exists; its "Where to edit" recipes name
files that exist, registries where they are defined and every module that reads the
registry a recipe is about; it holds no count of tests."""

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = REPO_ROOT / "docs" / "contributing.md"


def modules(root):
    """``bringup/...py`` of every module under ``root``/bringup but the package's own ``__init__``."""
    return sorted(str(path.relative_to(root)) for path in (root / "bringup").rglob("*.py")
                  if path != root / "bringup" / "__init__.py")


def unnamed(root, page_text):
    return [module for module in modules(root) if f"`{module}`" not in page_text]


def test_every_bringup_module_is_named():
    assert unnamed(REPO_ROOT, PAGE.read_text()) == []


def test_every_named_bringup_module_exists():
    named = set(re.findall(r"`(bringup/[\w/]+\.py)`", PAGE.read_text()))
    assert sorted(module for module in named if not (REPO_ROOT / module).is_file()) == []


def test_a_module_left_out_is_found(tmp_path):
    (tmp_path / "bringup" / "plan").mkdir(parents=True)
    for name in ("__init__.py", "named.py", "plan/new.py"):
        (tmp_path / "bringup" / name).write_text("")
    assert unnamed(tmp_path, "`bringup/named.py`") == ["bringup/plan/new.py"]


# ---------------------------------------------------------------- "Where to edit"

def where_to_edit(page_text):
    """The page's "Where to edit" section, up to its table of modules."""
    return page_text[page_text.index("## Where to edit"):page_text.index("### Every module of bringup/")]


def recipes(page_text):
    """``{"GPU": text, "deploy step": text, ...}``: each "**A new ...**" block of "Where to edit"."""
    blocks = re.split(r"^\*\*A new ", where_to_edit(page_text), flags=re.M)[1:]
    return {re.match(r"[\w ]+", block)[0].strip(): block for block in blocks}


def named_paths(text):
    """The repository paths a text names in backticks (``<...>`` a placeholder)."""
    return sorted(set(re.findall(r"`((?:[\w.<>-]+/)+[\w.<>-]*|[\w-]+\.(?:py|sh|md))`", text)))


def missing_paths(root, text):
    """Named paths that are not in the repository; a placeholder's path needs the folder
    its first placeholder is in, and a bare file name is at the root or in bringup/plan/
    (the section's "below, ``bringup/plan/<concern>.py``")."""
    missing = []
    for path in named_paths(text):
        if "<" in path:
            found = (root / path[:path.index("<")].rpartition("/")[0]).is_dir()
        elif "/" not in path:
            found = (root / path).exists() or (root / "bringup" / "plan" / path).exists()
        else:
            found = (root / path).exists()
        if not found:
            missing.append(path)
    return missing


def module_names(path):
    """The names a Python module defines at its top level."""
    import ast

    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        for target in getattr(node, "targets", None) or [getattr(node, "target", None)]:
            if isinstance(target, ast.Name):
                names.add(target.id)
    return names


def named_registries(text):
    """``(path, NAME)`` for each "`path` (`NAME`" and "`NAME` in `path`" of a text."""
    pairs = re.findall(r"`([\w/]+\.py)`\s+\(`([A-Z][A-Z_]+)`", text)
    pairs += [(path, name) for name, path in re.findall(r"`([A-Z][A-Z_]+)`\s+in\s+`([\w/]+\.py)`", text)]
    return sorted(set(pairs))


def readers(root, module):
    """The modules under bringup/ that import ``module`` (``bringup.gpu_archs``)."""
    dotted = re.escape(module)
    package, _, name = module.rpartition(".")
    pattern = re.compile(rf"^\s*(from {dotted} import|import {dotted}\b|from {re.escape(package)} import .*\b{name}\b)",
                         re.M)
    own = root / (module.replace(".", "/") + ".py")
    return sorted(str(path.relative_to(root)) for path in (root / "bringup").rglob("*.py")
                  if path != own and pattern.search(path.read_text()))


# Each recipe and the registry it is about: every module that reads the registry is named
# in the recipe (a new reader is a place the recipe must send the newcomer to).
REGISTRIES = {"GPU": "bringup.gpu_archs", "deploy step": "bringup.steps", "setting": "bringup.settings"}


def test_where_to_edit_names_only_paths_that_exist():
    assert missing_paths(REPO_ROOT, where_to_edit(PAGE.read_text())) == []


def test_where_to_edit_names_registries_where_they_are_defined():
    pairs = named_registries(where_to_edit(PAGE.read_text()))
    assert {("bringup/gpu_archs.py", "ARCHITECTURES"), ("bringup/steps.py", "STEPS"),
            ("bringup/cuda.py", "DRIVER_FLOOR_FOR_GPU")} <= set(pairs)
    assert [(path, name) for path, name in pairs if name not in module_names(REPO_ROOT / path)] == []


@pytest.mark.parametrize("recipe, registry", sorted(REGISTRIES.items()))
def test_each_recipe_names_every_reader_of_its_registry(recipe, registry):
    text = recipes(PAGE.read_text())[recipe]
    assert f"`{registry.replace('.', '/')}.py`" in text
    unnamed_readers = [path for path in readers(REPO_ROOT, registry)
                       if f"`{path}`" not in text and path[:-3].replace("/", ".") not in text]
    assert unnamed_readers == [], f"read {registry} but are not named in 'A new {recipe}'"


def test_the_recipes_are_the_ones_promised():
    assert {"GPU", "distribution", "deploy step", "setting"} <= set(recipes(PAGE.read_text()))


def test_the_page_holds_no_test_count():
    """A count of tests goes stale with the next test: the page gives none."""
    assert re.findall(r"\b\d[\d,]* (?:tests|test cases)\b", PAGE.read_text().replace("-n 2 tests/", "")) == []


def test_the_checks_find_what_is_wrong(tmp_path):
    (tmp_path / "bringup").mkdir()
    (tmp_path / "bringup" / "table.py").write_text("ROWS = ()\n")
    (tmp_path / "bringup" / "reader.py").write_text("from bringup.table import ROWS\n")
    (tmp_path / "bringup" / "other.py").write_text("from bringup import table\n")
    text = "`bringup/table.py` (`ROWS`), `bringup/gone.py`, `tasks/<step>.py`, `bringup/<x>.py`, `plan.py`"
    assert missing_paths(tmp_path, text) == ["bringup/gone.py", "plan.py", "tasks/<step>.py"]
    assert named_registries(text + ", `COLUMNS` in\n  `bringup/table.py`") == [
        ("bringup/table.py", "COLUMNS"), ("bringup/table.py", "ROWS")]
    assert module_names(tmp_path / "bringup" / "table.py") == {"ROWS"}
    assert readers(tmp_path, "bringup.table") == ["bringup/other.py", "bringup/reader.py"]
