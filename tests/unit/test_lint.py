"""Dead code does not land: pyflakes' rules (unused imports and variables, undefined
names, syntax errors) over every Python file of the project, through ruff."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"


def test_no_unused_or_undefined_names():
    result = subprocess.run([str(RUFF), "check", "--no-cache", "--select", "F,E9", "--exclude", ".venv,.sandbox",
                             "--output-format", "concise", "."], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
