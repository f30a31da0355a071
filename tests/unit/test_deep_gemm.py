"""DeepGEMM's pre-compile (bringup/deep_gemm.py): when deploy runs
``python -m sglang.compile_deep_gemm``, decided by the real planner CLI
(python -m bringup.plan) on facts recorded on each platform, and by the pure table."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from bringup.deep_gemm import deep_gemm_decision

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts"
MODEL = "deepseek-ai/DeepSeek-V3"

# enabled, model, GPU SMs -> runs, a fragment of why
DECISIONS = [
    (False, MODEL, ["9.0"], False, "prewarm_deep_gemm is off"),
    (True, "", ["9.0"], False, "no service_model"),
    (True, MODEL, [], False, "no GPU on the node"),
    (True, MODEL, ["8.9"], False, "SM 8.9 does not use DeepGEMM"),
    (True, MODEL, ["8.0", "9.0"], False, "SM 8.0 does not use DeepGEMM"),
    (True, MODEL, ["9.0"], True, "SM 9.0 uses DeepGEMM"),
    (True, MODEL, ["10.0"], True, "SM 10.0 uses DeepGEMM"),
    (True, MODEL, ["10.3"], True, "SM 10.3 uses DeepGEMM"),
    # configurer.py:44-47: SM 12.x too, with the SM120 APIs sgl-deep-gemm 0.2.3.post2 has.
    (True, MODEL, ["12.0"], True, "SM 12.0 uses DeepGEMM"),
    (True, MODEL, ["12.1"], True, "SM 12.1 uses DeepGEMM"),
]


@pytest.mark.parametrize("enabled, model, sms, runs, why", DECISIONS)
def test_decision(enabled, model, sms, runs, why):
    decided, reason = deep_gemm_decision(enabled, model, [Version(sm) for sm in sms])
    assert (decided, why in reason) == (runs, True), reason


def plan_cli(tmp_path, facts, settings):
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps(settings))
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(facts), "--config", str(config)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    return json.loads(result.stdout)


def findings(plan):
    return {f["code"]: f["severity"] for f in plan["findings"] if f["code"].startswith("DEEP_GEMM")}


# facts document, settings -> runs, DEEP_GEMM findings
PLANS = [
    ("ubuntu2204-x86_64-h100.json", {}, False, {}),
    ("ubuntu2204-x86_64-h100.json", {"prewarm_deep_gemm": True, "service_model": MODEL}, True,
     {"DEEP_GEMM_PRECOMPILE": "info"}),
    ("ubuntu2404-x86_64-b200.json", {"prewarm_deep_gemm": True, "service_model": MODEL}, True,
     {"DEEP_GEMM_PRECOMPILE": "info"}),
    ("incident.json", {"prewarm_deep_gemm": True, "service_model": MODEL}, True, {"DEEP_GEMM_PRECOMPILE": "info"}),
    ("ubuntu2404-aarch64-gb10.json", {"prewarm_deep_gemm": True}, False, {"DEEP_GEMM_NOT_PRECOMPILED": "warning"}),
]


@pytest.mark.parametrize("facts, settings, runs, codes", PLANS)
def test_plan_decides(tmp_path, facts, settings, runs, codes):
    plan = plan_cli(tmp_path, FACTS / facts, settings)
    assert plan["deep_gemm"]["run"] is runs
    assert findings(plan) == codes


def test_image_builder_never_compiles(tmp_path):
    """target_sms stand for GPUs the node does not have: the compile needs them."""
    facts = json.loads((FACTS / "incident.json").read_text())
    facts["gpus"], facts["nvidia_smi"] = [], {"present": False, "error": "nvidia-smi: command not found"}
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    plan = plan_cli(tmp_path, tmp_path / "facts.json",
                    {"prewarm_deep_gemm": True, "service_model": MODEL, "target_sms": ["9.0"]})
    assert plan["deep_gemm"]["run"] is False and "no GPU on the node" in plan["deep_gemm"]["why"]
    assert findings(plan) == {"DEEP_GEMM_NOT_PRECOMPILED": "warning"}


def test_command_carries_the_units_model_and_arguments(tmp_path):
    """The kernels depend on the model and the server arguments the service runs with
    (--tp-size, --quantization): the compile gets exactly the unit's, its server listens
    on loopback, and a change of any of them changes the request the manifest holds."""
    settings = {"prewarm_deep_gemm": True, "service_model": MODEL, "service_args": "--tp-size 8 --trust-remote-code",
                "service_port": "31000", "prewarm_deep_gemm_timeout": 7200}
    plan = plan_cli(tmp_path, FACTS / "ubuntu2204-x86_64-h100.json", settings)
    deep_gemm, unit = plan["deep_gemm"], plan["service"]["exec_start"]
    assert deep_gemm["command"][1:3] == ["-m", "sglang.compile_deep_gemm"]
    args = deep_gemm["command"][3:]
    assert args[:args.index("--host")] == ["--model-path", MODEL, "--tp-size", "8", "--trust-remote-code"]
    assert args[args.index("--host"):] == ["--host", "127.0.0.1", "--port", "31000", "--timeout", "7200"]
    assert set(args[:args.index("--host")]) <= set(unit)
    assert deep_gemm["request"] == {"sglang": "0.5.23", "model": MODEL, "sms": ["9.0"],
                                    "server_args": ["--model-path", MODEL, "--tp-size", "8", "--trust-remote-code"]}
    other = plan_cli(tmp_path, FACTS / "ubuntu2204-x86_64-h100.json", {**settings, "service_args": "--tp-size 4"})
    assert other["deep_gemm"]["request"] != deep_gemm["request"]
