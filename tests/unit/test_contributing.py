"""docs/contributing.md stays true to the code: every module under bringup/ is named in
its table of modules, and every module it names exists."""

import re
from pathlib import Path

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
