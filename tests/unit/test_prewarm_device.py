"""The pre-warm compiles without a device only where the plan says so
(bringup.plan.prewarm.compiles_without_device, files/prewarm.py --no-device): by the
pure table, by the real planner CLI (python -m bringup.plan) on recorded facts, and by
files/prewarm.py itself, which refuses in one line when CUDA does not start."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bringup.plan.prewarm import compiles_without_device

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts"
SCRIPT = ROOT / "files" / "prewarm.py"
GPU = {"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_cap": "12.0"}

# GPUs nvidia-smi lists, target_sms, gpu_standin -> compiles without a device
DECISIONS = [
    ([GPU], (), False, False),          # a GPU node: CUDA must start
    ([GPU], ("12.0",), False, False),   # target_sms do not make a GPU node GPU-less
    ([GPU], (), True, True),            # the test bed's declared stand-in
    ([], ("12.0",), False, True),       # an image builder
    ([], ("12.0",), True, True),
    ([], (), False, False),             # nothing to build for (no arch list)
]


@pytest.mark.parametrize("gpus, target_sms, gpu_standin, no_device", DECISIONS)
def test_decision(gpus, target_sms, gpu_standin, no_device):
    assert compiles_without_device(gpus, target_sms, gpu_standin) is no_device


def plan_cli(tmp_path, facts, settings):
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    (tmp_path / "config.yaml").write_text(json.dumps(settings))
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(tmp_path / "facts.json"),
                             "--config", str(tmp_path / "config.yaml")],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    return json.loads(result.stdout)


def without_gpus(facts):
    return {**facts, "gpus": []}


# facts document (a function of the recorded one), settings -> no_device, arch list
PLANS = [
    ("ubuntu2204-x86_64-h100.json", lambda facts: facts, {}, False, "9.0a"),
    ("debian13-x86_64-rtx-pro-6000.json", lambda facts: facts, {}, False, "12.0f"),
    ("debian13-x86_64-rtx-pro-6000.json", lambda facts: facts, {"gpu_standin": True}, True, "12.0f"),
    ("debian13-x86_64-rtx-pro-6000.json", without_gpus, {"target_sms": ["12.0"]}, True, "12.0f"),
    ("debian13-x86_64-rtx-pro-6000.json", without_gpus, {}, False, ""),
]


@pytest.mark.parametrize("facts, change, settings, no_device, arch_list", PLANS)
def test_plan_says_where_the_prewarm_needs_no_device(tmp_path, facts, change, settings, no_device, arch_list):
    plan = plan_cli(tmp_path, change(json.loads((FACTS / facts).read_text())), settings)
    assert (plan["prewarm"]["no_device"], plan["arch_list"]) == (no_device, arch_list)


@pytest.fixture
def prewarm(monkeypatch):
    """files/prewarm.py as a module, with the service environment it requires."""
    spec = importlib.util.spec_from_file_location("prewarm_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for key, value in (("CUDA_HOME", "/usr/local/cuda-13.0"), ("FLASHINFER_CUDA_ARCH_LIST", "10.0a 12.0f"),
                       ("FLASHINFER_WORKSPACE_BASE", "/var/cache/sglang")):
        monkeypatch.setenv(key, value)
    return module


def test_without_no_device_cuda_must_start(prewarm, monkeypatch):
    monkeypatch.setattr(prewarm, "cuda_failure", lambda: "RuntimeError: No CUDA GPUs are available")
    monkeypatch.setattr(prewarm, "sglang_entries", lambda *args: pytest.fail("built without CUDA"))
    with pytest.raises(SystemExit) as refused:
        prewarm.main(["--verify", "--modules", "sglang-activation"])
    assert str(refused.value) == prewarm.cuda_refusal("RuntimeError: No CUDA GPUs are available")
    assert "\n" not in str(refused.value) and "validate.py" in str(refused.value)


def test_no_device_asks_nothing_of_cuda_and_reaches_each_target(prewarm, monkeypatch):
    monkeypatch.setattr(prewarm, "cuda_failure", lambda: pytest.fail("asked CUDA on a node without a device"))
    children = []

    def run(command, **_):
        children.append(command)
        return SimpleNamespace(returncode=0, stdout="@@entries []\n")

    monkeypatch.setattr(prewarm.subprocess, "run", run)
    assert prewarm.main(["--verify", "--no-device", "--modules", "sglang-activation"]) == 0
    assert [command[command.index("--sglang-arch") + 1] for command in children] == ["10.0", "12.0"]
    assert all("--no-device" in command for command in children)


def test_a_gpu_node_child_is_not_told_no_device(prewarm, monkeypatch):
    monkeypatch.setattr(prewarm, "cuda_failure", lambda: "")
    children = []
    monkeypatch.setattr(prewarm.subprocess, "run",
                        lambda command, **_: children.append(command) or SimpleNamespace(returncode=0,
                                                                                         stdout="@@entries []\n"))
    assert prewarm.main(["--verify", "--modules", "sglang-activation"]) == 0
    assert children and not any("--no-device" in command for command in children)


def test_the_refusal_is_one_line_from_torch_itself(tmp_path):
    """The script run as deploy runs it, in a python whose torch (a stand-in raising as
    torch does where no driver is loaded) cannot start CUDA: exit 1, torch's reason in
    one line, no traceback, no manifest."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "class cuda:\n    @staticmethod\n    def init():\n"
        "        raise RuntimeError('Found no NVIDIA driver on your system. '\n"
        "                           'Please check that you have an NVIDIA GPU')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "CUDA_HOME": "/usr/local/cuda-13.0",
           "FLASHINFER_CUDA_ARCH_LIST": "12.0f", "FLASHINFER_WORKSPACE_BASE": str(tmp_path / "cache")}
    manifest = tmp_path / "cache" / "prewarm" / "manifest.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--modules", "norm", "--manifest", str(manifest)],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "prewarm: CUDA does not start (RuntimeError: Found no NVIDIA driver on your system. Please check that you "
        "have an NVIDIA GPU), nothing was built: the node's GPUs must answer (run validate.py: its driver-layer "
        "findings name the cause); a GPU-less image builder sets target_sms, where the plan compiles without a device"]
    assert not manifest.exists() and not (tmp_path / "cache").exists()
