"""An upgrade's first step and its failure text (docs/upgrades.md): ``python -m
control.locks new-sglang VERSION`` writes ``sglang-<VERSION>.in`` from the newest input
(by packaging.version, not by name), keeps one that exists, refuses a version PyPI would
not name so in one line; a ``stack_sglang`` with no input is VENV_LOCK_MISSING whose fix
names the documented steps, through ``pyinfra @local validate.py``."""

import json
import os
import subprocess
import sys
from pathlib import Path

from bringup.config import Config
from bringup.plan import plan
from tests.unit.scenarios import converged, varied

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def new_sglang(root, *args):
    return subprocess.run([sys.executable, "-m", "control.locks", "new-sglang", *args, "--root", str(root)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def checkout(tmp_path, inputs):
    locks = tmp_path / "files" / "locks"
    locks.mkdir(parents=True)
    for name, text in inputs.items():
        (locks / name).write_text(text)
    return locks


def test_the_new_input_is_the_newest_ones_with_the_pin_moved(tmp_path):
    locks = checkout(tmp_path, {"sglang-0.5.9.in": "sglang==0.5.9\n", "sglang-0.5.23.in": "sglang[all]==0.5.23\n"
                                "# from the 0.5.23 notes\n", "uv.in": "uv==0.13.9\n", "cuda-13.0.in": "x 1\n"})
    result = new_sglang(tmp_path, "0.5.24")
    assert result.returncode == 0, result.stderr
    assert (locks / "sglang-0.5.24.in").read_text() == "sglang[all]==0.5.24\n# from the 0.5.23 notes\n"
    assert "files/locks/sglang-0.5.24.in written from sglang-0.5.23.in" in result.stderr
    # A second run keeps it (an operator's edits stay).
    (locks / "sglang-0.5.24.in").write_text("sglang==0.5.24\nsome-fix==1\n")
    again = new_sglang(tmp_path, "0.5.24")
    assert again.returncode == 0 and "exists: kept as it is" in again.stderr
    assert (locks / "sglang-0.5.24.in").read_text() == "sglang==0.5.24\nsome-fix==1\n"


def test_a_version_pypi_would_not_name_so_is_one_line_and_writes_nothing(tmp_path):
    locks = checkout(tmp_path, {"sglang-0.5.23.in": "sglang==0.5.23\n"})
    for version, words in (("0.5.x", "is not a release version"), ("v0.5.24", "write the release as PyPI names it")):
        result = new_sglang(tmp_path, version)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, result.stderr
    assert sorted(path.name for path in locks.iterdir()) == ["sglang-0.5.23.in"]


def test_no_input_to_start_from_is_one_line(tmp_path):
    checkout(tmp_path, {"uv.in": "uv==0.13.9\n"})
    result = new_sglang(tmp_path, "0.5.24")
    assert result.returncode == 2 and "no files/locks/sglang-<version>.in to start from" in result.stderr


def test_a_stack_sglang_without_a_lock_names_the_upgrade_steps(tmp_path):
    reports = tmp_path / "reports"
    result = subprocess.run([PYINFRA, "-y", "@local", "--data", "target_sms=12.0", "--data", "stack_sglang=0.5.99",
                             "validate.py"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                            env={**os.environ, "GPU_BRINGUP_REPORTS": str(reports)}, stdin=subprocess.DEVNULL)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((reports / "@local.json").read_text())
    [finding] = [f for f in report["plan"]["findings"] if f["code"] == "VENV_LOCK_MISSING"]
    assert finding["severity"] == "blocker"
    assert "files/locks/sglang-0.5.99-cp" in finding["message"]
    fix = finding["fix"]
    for step in ("stack_sglang=0.5.99 has no input files/locks/sglang-0.5.99.in", "docs/upgrades.md",
                 "python -m control.locks new-sglang 0.5.99", "make lock", "git diff files/locks", "validate",
                 "service_rollback: on-failure", "batches"):
        assert step in fix, fix
    assert not (ROOT / "files" / "locks" / "sglang-0.5.99.in").exists()


def test_a_venv_of_another_sglang_is_drift_deploy_fixes():
    """SGLang moved alone (torch and FlashInfer as they were): validate says deploy
    rebuilds the venv (VENV_STACK_DRIFT, a fix), so the upgrade's hosts are `needs deploy`,
    not `ready`; an explicit venv_lock is its own release and is not compared."""
    node = plan(varied(converged(), sglang={"version": "0.5.23"}), Config(stack_sglang="0.5.24"))
    [drift] = [f for f in node.findings if f.code == "VENV_STACK_DRIFT"]
    assert drift.severity == "fix" and "sglang 0.5.23 (want 0.5.24)" in drift.message
    same = plan(varied(converged(), sglang={"version": "0.5.23"}), Config())
    assert "VENV_STACK_DRIFT" not in same.codes()
    pinned = plan(varied(converged(), sglang={"version": "0.5.23"}),
                  Config(stack_sglang="0.5.24", venv_lock="files/locks/sglang-0.5.23-cp311-x86_64.txt"))
    assert "VENV_STACK_DRIFT" not in pinned.codes()
