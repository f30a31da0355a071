"""validate.py through the real pyinfra CLI and inventory/gpu.py, over real SSH to
sandbox nodes (issue: the sandbox node)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox_fixtures import report_path

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")

pytestmark = pytest.mark.sandbox


def pyinfra(*args):
    result = subprocess.run([PYINFRA, "-y", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    result.output = result.stdout + result.stderr
    return result


def report(host):
    return json.loads(report_path(host).read_text())


def codes(document, severity=None):
    return [f["code"] for f in document["plan"]["findings"] if severity in (None, f["severity"])]


def test_incident_node_shows_the_trap(sandbox_node):
    sandbox_node("val-incident", "127.0.0.41", gpu="rtx-pro-6000-x8", toolkit="incident")
    report_path("val-incident").unlink(missing_ok=True)
    result = pyinfra("-v", "inventory/gpu.py", "--limit", "val-incident", "validate.py")
    assert result.returncode == 0, result.output
    document = report("val-incident")
    assert {"TOOLKIT_TORCH_MISMATCH", "FLASHINFER_ARCH_TRAP", "TOOLKIT_MISSING",
            "PATH_SHADOWS_CUDA_HOME", "CUDA_SYMLINK_DRIFT"} <= set(codes(document, "fix"))
    facts = document["facts"]
    assert facts["resolution"]["version"] == "12.8"
    assert facts["path_nvcc"] == {"path": "/usr/local/cuda-12.8/bin/nvcc", "version": "12.8"}
    assert len(facts["gpus"]) == 8 and facts["driver"]["cuda_version"] == "13.0"
    assert document["plan"]["arch_list"] == "12.0f" and document["plan"]["toolkit"]["version"] == "13.0"
    assert "== val-incident: READY TO DEPLOY" in result.output


def test_two_nodes_one_blocked_the_other_carries_on(sandbox_node):
    sandbox_node("val-b200", "127.0.0.42", gpu="b200-x8", toolkit="none")
    sandbox_node("val-broken", "127.0.0.43", gpu="driver-failed", toolkit="none")
    for host in ("val-b200", "val-broken"):
        report_path(host).unlink(missing_ok=True)
    result = pyinfra("inventory/gpu.py", "--limit", "val-*", "validate.py")
    assert result.returncode == 1, result.output
    assert codes(report("val-broken"), "blocker") == ["DRIVER_NOT_LOADED"]
    assert "validate refused, nothing changed: 1 blocker(s): DRIVER_NOT_LOADED" in result.output
    b200 = report("val-b200")
    assert b200["plan"]["ok"] and b200["plan"]["arch_list"] == "10.0a"
    assert codes(b200, "blocker") == []


def test_fact_cli_over_ssh(sandbox_node):
    sandbox_node("val-gb10", "127.0.0.44", gpu="gb10", toolkit="none")
    result = pyinfra("inventory/gpu.py", "--limit", "val-gb10", "fact", "facts.node.GpuDevices")
    assert result.returncode == 0, result.output
    assert '"compute_cap": "12.1"' in result.output and '"name": "NVIDIA GB10"' in result.output
