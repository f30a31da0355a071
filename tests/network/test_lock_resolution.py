"""NETWORK TESTS (PyPI's simple index): every venv lock resolves for its own platform,
wheels only, and make lock's venv step reproduces every committed lock byte for byte.

Resolution is uv's installer in dry-run mode for the lock's CPython and CPU, wheels
only, no dependency resolution: a pin with no wheel for that platform tag (what
outlines-core 0.1.26 is on CPython 3.13) fails it. It downloads no wheels. It does not
check hashes (they are checked when a node installs).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup import locks, venv_locks
from bringup.plan import MIN_PYTHON
from bringup.platforms import REPO_ARCH, supported_pythons
from control import locks as lockgen

pytestmark = pytest.mark.network

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
STEMS = sorted(path.name[:-3] for path in lockgen.python_inputs(ROOT))
MATRIX = venv_locks.venv_lock_matrix(STEMS, supported_pythons(MIN_PYTHON), list(REPO_ARCH))
IDS = [m[3].rsplit("/", 1)[1] for m in MATRIX]


def dry_run(lock, python, machine, target):
    return subprocess.run(
        [str(UV), "pip", "install", "--dry-run", "--only-binary", ":all:", "--no-deps", "--require-hashes",
         "--python-platform", venv_locks.python_platform(machine), "--python-version", python,
         "--no-python-downloads", "--target", str(target), "-r", str(lock)],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, UV_PYTHON_DOWNLOADS="never"))


@pytest.mark.parametrize("stem,python,machine,name", MATRIX, ids=IDS)
def test_lock_resolves_for_its_platform(tmp_path, stem, python, machine, name):
    result = dry_run(ROOT / name, python, machine, tmp_path / "target")
    assert result.returncode == 0, result.stderr
    pins = sum(1 for line in (ROOT / name).read_text().splitlines() if "==" in line and not line.startswith(" "))
    assert f"Would install {pins} package" in result.stderr, result.stderr


def test_resolution_catches_a_pin_without_a_wheel(tmp_path):
    """The check can fail: outlines-core 0.1.26 on CPython 3.13 has only an sdist."""
    cp311 = (ROOT / venv_locks.sglang_lock_name("0.5.23", "3.11", "x86_64")).read_text()
    block = cp311[cp311.index("\noutlines-core==0.1.26"):]
    block = block[:block.index("\n", block.index("# via")) + 1]
    lock = tmp_path / "lock.txt"
    lock.write_text(block.lstrip("\n"))
    assert dry_run(lock, "3.11", "x86_64", tmp_path / "a").returncode == 0
    failed = dry_run(lock, "3.13", "x86_64", tmp_path / "b")
    assert failed.returncode != 0 and "outlines-core" in failed.stderr


@pytest.mark.parametrize("stem,python,machine,name", MATRIX, ids=IDS)
def test_make_lock_reproduces_the_lock(stem, python, machine, name):
    """make lock's venv step on the committed lock changes nothing."""
    target = ROOT / name
    text = lockgen.compile_venv_lock(UV, ROOT / locks.LOCKS_DIR / f"{stem}.in", stem, python, machine, target)
    assert text == target.read_text()
