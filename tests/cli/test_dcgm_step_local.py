"""The DCGM step (tasks/dcgm.py) through the real pyinfra CLI on @local
(tests/fixtures/deploy/dcgm_step.py: the step with a given DcgmPlan). Its packages are this
machine's own ``dpkg`` at its installed version, so nothing is installed; a machine without
systemd running (a CI container) starts no unit, as an image build would not."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def dpkg_version():
    result = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        pytest.skip("not a dpkg system")
    return result.stdout


def deploy(reports, **fields):
    plan = {"install": True, "lock": "files/locks/dcgm-4-x.txt", "pins": [f"dpkg={dpkg_version()}"],
            "unit": "nvidia-dcgm", **fields}
    env = dict(os.environ, GPU_BRINGUP_REPORTS=str(reports), DCGM_PLAN=json.dumps(plan))
    command = [PYINFRA, "-y", "@local", "--data", "target_sms=12.0", "tests/fixtures/deploy/dcgm_step.py"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
                            stdin=subprocess.DEVNULL, check=False)
    result.output = result.stdout + result.stderr
    document = json.loads((reports / "summary.json").read_text())
    return result, document["hosts"][0]


@pytest.mark.parametrize("fields,operation,changed", [
    ({}, "Install NVIDIA DCGM at files/locks/dcgm-4-x.txt's versions", "nothing"),
    ({"install": False, "pins": []}, None, "-"),
], ids=["installed already: no change", "not asked: no operation at all"])
def test_the_step_changes_nothing_where_the_lock_is_installed(tmp_path, fields, operation, changed):
    result, row = deploy(tmp_path, **fields)
    assert result.returncode == 0, result.output[-3000:]
    assert row["verdict"] == "deployed" and row["changed"] == changed, row
    if operation:
        assert operation in result.output
    else:
        assert "NVIDIA DCGM" not in result.output
    assert "Traceback" not in result.output
