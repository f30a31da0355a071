"""Every supported platform out of the box: the real planner CLI (python -m bringup.plan)
on facts documents recorded on each platform (tests/fixtures/facts/README.md says how).

Each row: the document, then what the plan must say: no blocker, the venv lock and
CPython the venv is built with, the packages deploy installs for it, the NVIDIA
repository directory, the FlashInfer arch list, the toolkit lock (or none), and the
findings of a platform's own (at that severity).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts"
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos"

PLATFORMS = [
    # Ubuntu 22.04's python3 is 3.10 and its python3.11 is 3.11.0rc1, on which torch's
    # torch._dynamo does not import (seen on a sandbox node): blocked, PYTHON_UNUSABLE.
    dict(facts="ubuntu2204-x86_64-h100.json", python3="3.10.12",
         lock="files/locks/sglang-0.5.23-cp311-x86_64.txt", uv_lock="files/locks/uv-cp311-x86_64.txt",
         python="/usr/bin/python3.11", python_version="3.11",
         system_packages=["python3-venv", "g++", "python3.11", "python3.11-venv"],
         repo=f"{NVIDIA}/ubuntu2204/x86_64/", arch_list="9.0a",
         toolkit_lock="files/locks/cuda-13.0-ubuntu2204-x86_64.txt", findings={"PYTHON_UNUSABLE": "blocker"}),
    dict(facts="ubuntu2404-x86_64-b200.json", python3="3.12.3",
         lock="files/locks/sglang-0.5.23-cp312-x86_64.txt", uv_lock="files/locks/uv-cp312-x86_64.txt",
         python="/usr/bin/python3", python_version="3.12", system_packages=["python3-venv", "g++"],
         repo=f"{NVIDIA}/ubuntu2404/x86_64/", arch_list="10.0a",
         toolkit_lock="files/locks/cuda-13.0-ubuntu2404-x86_64.txt", findings={}),
    # GB10 (DGX Spark): SM 12.1 builds 12.1a; Grace is an SBSA machine.
    dict(facts="ubuntu2404-aarch64-gb10.json", python3="3.12.3",
         lock="files/locks/sglang-0.5.23-cp312-aarch64.txt", uv_lock="files/locks/uv-cp312-aarch64.txt",
         python="/usr/bin/python3", python_version="3.12", system_packages=["python3-venv", "g++"],
         repo=f"{NVIDIA}/ubuntu2404/sbsa/", arch_list="12.1a",
         toolkit_lock="files/locks/cuda-13.0-ubuntu2404-aarch64.txt", findings={}),
    # CPython 3.13: the lock has no outlines-core, and the plan says what that costs.
    dict(facts="debian13-x86_64-rtx-pro-6000.json", python3="3.13.5",
         lock="files/locks/sglang-0.5.23-cp313-x86_64.txt", uv_lock="files/locks/uv-cp313-x86_64.txt",
         python="/usr/bin/python3", python_version="3.13", system_packages=["python3-venv", "g++"],
         repo=f"{NVIDIA}/debian13/x86_64/", arch_list="12.0f",
         toolkit_lock="files/locks/cuda-13.0-debian13-x86_64.txt", findings={"LOCK_OMITS_PACKAGE": "info"}),
    # The sandbox's own platform, for contrast: everything locked, nothing platform-specific.
    dict(facts="incident.json", python3="3.11.2",
         lock="files/locks/sglang-0.5.23-cp311-x86_64.txt", uv_lock="files/locks/uv-cp311-x86_64.txt",
         python="/usr/bin/python3", python_version="3.11", system_packages=["python3-venv", "g++"],
         repo=f"{NVIDIA}/debian12/x86_64/", arch_list="12.0f",
         toolkit_lock="files/locks/cuda-13.0-debian12-x86_64.txt", findings={}),
]
# Codes a platform row may (or may not) have that are about the platform, not the node's state.
PLATFORM_CODES = {"PYTHON_TOO_OLD", "PYTHON_UNUSABLE", "TOOLKIT_UNLOCKED", "LOCK_OMITS_PACKAGE", "REPO_UNVERIFIED",
                  "VENV_LOCK_MISSING", "VENV_LOCK_MISMATCH", "UNSUPPORTED_OS"}


def plan_cli(facts):
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(FACTS / facts)], capture_output=True,
                            text=True, cwd=ROOT, timeout=120)
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    return json.loads(result.stdout)


@pytest.mark.parametrize("row", PLATFORMS, ids=[row["facts"].removesuffix(".json") for row in PLATFORMS])
def test_platform_plan(row):
    facts = json.loads((FACTS / row["facts"]).read_text())
    assert facts["python"]["version"] == row["python3"]
    printed = plan_cli(row["facts"])
    blockers = [f["code"] for f in printed["findings"] if f["severity"] == "blocker"]
    expected = [code for code, severity in row["findings"].items() if severity == "blocker"]
    assert blockers == expected and printed["ok"] == (not expected), printed["findings"]
    venv = printed["venv"]
    assert (venv["lock"], venv["uv_lock"]) == (row["lock"], row["uv_lock"])
    assert (venv["python"], venv["python_version"]) == (row["python"], row["python_version"])
    assert venv["system_packages"] == row["system_packages"]
    assert printed["repo"]["url"] == row["repo"]
    assert printed["arch_list"] == row["arch_list"]
    assert printed["env"]["FLASHINFER_CUDA_ARCH_LIST"] == row["arch_list"]
    assert printed["toolkit"]["lock"] == row["toolkit_lock"]
    seen = {f["code"]: f["severity"] for f in printed["findings"] if f["code"] in PLATFORM_CODES}
    assert seen == row["findings"], printed["findings"]


def test_locked_toolkit_pins_every_package():
    """Where a toolkit lock exists, deploy's apt arguments carry its versions."""
    toolkit = plan_cli("incident.json")["toolkit"]
    lock = (ROOT / toolkit["lock"]).read_text()
    pins = [line for line in lock.splitlines() if line and not line.startswith("#")]
    assert sorted(toolkit["pins"]) == sorted(pins)
    assert set(toolkit["packages"]) == {pin.split("=")[0] for pin in pins}


def test_ubuntu_2204_names_the_release_candidate_that_cannot_run_the_stack():
    printed = plan_cli("ubuntu2204-x86_64-h100.json")
    blocker = next(f for f in printed["findings"] if f["code"] == "PYTHON_UNUSABLE")
    assert "/usr/bin/python3.11" in blocker["message"] and "3.11.0rc1" in blocker["message"]
    assert "torch._dynamo" in blocker["message"] and "Ubuntu 24.04" in blocker["fix"]


def test_cp313_omission_is_named_with_its_cost():
    printed = plan_cli("debian13-x86_64-rtx-pro-6000.json")
    info = next(f for f in printed["findings"] if f["code"] == "LOCK_OMITS_PACKAGE")
    assert "outlines-core" in info["message"] and "--grammar-backend outlines is unavailable" in info["message"]


def test_a_fresh_gb200_tray_is_told_to_set_up_imex_not_fabric_manager():
    """The derived GB200 compute tray (tests/fixtures/facts/README.md): Ubuntu 24.04 on Grace,
    SM 10.0; without nvidia-imex and its channel the plan blocks on IMEX, never on Fabric Manager."""
    printed = plan_cli("ubuntu2404-aarch64-gb200.json")
    blockers = [f["code"] for f in printed["findings"] if f["severity"] == "blocker"]
    assert blockers == ["IMEX_MISSING", "IMEX_NO_CHANNEL"] and not printed["ok"]
    assert not any(f["code"].startswith(("FABRIC_MANAGER", "NVLSM")) for f in printed["findings"])
    assert printed["repo"]["url"] == f"{NVIDIA}/ubuntu2404/sbsa/" and printed["arch_list"] == "10.0a"
    assert printed["venv"]["lock"] == "files/locks/sglang-0.5.23-cp312-aarch64.txt"
    fixes = {f["code"]: f["fix"] for f in printed["findings"]}
    assert "nvidia-imex=580.95.05*" in fixes["IMEX_MISSING"]
    assert "NVreg_CreateImexChannel0=1" in fixes["IMEX_NO_CHANNEL"]
