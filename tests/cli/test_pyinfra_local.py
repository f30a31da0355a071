"""validate.py, deploy.py and the fact CLI, run through the real pyinfra CLI on @local.

This machine has no GPU, so the plan blocks with NO_GPU unless target_sms is set.
Assertions avoid this machine's own toolkits (CI machines differ).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.hub_double import answering_hub

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
# This suite's own reports directory (control/reports.py): runs of other suites beside
# it (make test runs two workers) write reports/summary.json, never this one.
REPORTS = ROOT / "reports" / "cli-local"
REPORT = REPORTS / "@local.json"


def pyinfra(*args):
    result = subprocess.run([PYINFRA, "-y", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, GPU_BRINGUP_REPORTS=str(REPORTS)))
    # pyinfra logs to stderr and our reports print to stdout: read them together.
    result.output = result.stdout + result.stderr
    return result


def test_validate_blocks_a_gpu_less_machine():
    REPORT.unlink(missing_ok=True)
    result = pyinfra("@local", "validate.py")
    output = result.output
    assert result.returncode == 1, output
    assert "[BLOCKER] NO_GPU: no NVIDIA GPU visible (nvidia-smi not found)" in output
    assert "validate refused, nothing changed: 1 blocker(s): NO_GPU" in output
    report = json.loads(REPORT.read_text())
    assert report["facts"]["gpus"] == [] and report["plan"]["ok"] is False
    assert [f["code"] for f in report["plan"]["findings"] if f["severity"] == "blocker"] == ["NO_GPU"]


def test_validate_passes_for_an_image_builder():
    result = pyinfra("-v", "@local", "--data", "target_sms=12.0", "validate.py")
    assert result.returncode == 0, result.output
    assert "TARGET_SMS_FROM_CONFIG" in result.output
    assert json.loads(REPORT.read_text())["plan"]["arch_list"] == "12.0f"


def test_validate_names_a_bad_setting():
    result = pyinfra("@local", "--data", "stack_torch_cuda=cu130", "validate.py")
    output = result.output
    assert result.returncode == 1
    assert "@local: setting stack_torch_cuda='cu130' is invalid: use torch's CUDA build as X.Y" in output


def test_deploy_refuses_a_blocked_host_without_running_anything():
    result = pyinfra("@local", "deploy.py")
    assert result.returncode == 1
    assert "deploy refused, nothing changed: 1 blocker(s): NO_GPU" in result.output
    # What deploy.py queued for the host (pyinfra's --dry --json plan): nothing, the host
    # refused as it was planned; a run that executes nothing says no too.
    dry = pyinfra("--dry", "--json", "@local", "deploy.py")
    assert dry.returncode == 1 and "deploy refused, nothing changed: 1 blocker(s): NO_GPU" in dry.output
    assert json.loads(dry.stdout)["plan"] == []


def test_fact_cli_prints_the_document():
    result = pyinfra("@local", "fact", "facts.node.NodeFacts")
    assert result.returncode == 0, result.stderr
    start = result.output.index("{\n")
    document = json.loads(result.output[start:result.output.index("\n}\n") + 2])["@local"]
    assert set(document) >= {"os", "driver", "gpus", "toolkits", "cuda_symlink", "path_nvcc",
                             "resolution", "torch", "flashinfer"}
    assert document["gpus"] == [] and document["driver"] is None


def test_narrow_fact_cli():
    result = pyinfra("@local", "fact", "facts.node.GpuDevices")
    assert result.returncode == 0 and '"@local": []' in result.output


def test_validate_blocks_a_lock_for_another_platform():
    result = pyinfra("@local", "--data", "target_sms=12.0", "--data",
                     "venv_lock=files/locks/sglang-0.5.23-cp312-aarch64.txt", "validate.py")
    assert result.returncode == 1, result.output
    assert "VENV_LOCK_MISMATCH" in result.output
    assert "is resolved for CPython 3.12 on aarch64" in result.output


def test_validate_names_a_missing_lock_file_in_one_line():
    result = pyinfra("@local", "--data", "target_sms=12.0", "--data", "venv_lock=files/locks/nope-cp311-x86_64.txt",
                     "validate.py")
    assert result.returncode == 1 and "Traceback" not in result.output
    assert ("@local: setting venv_lock='files/locks/nope-cp311-x86_64.txt' is invalid: no such file in "
            f"{ROOT}; use a lock under files/locks (make lock writes them)") in result.output


def test_validate_report_names_the_chosen_lock():
    result = pyinfra("@local", "--data", "target_sms=12.0", "--data", "report_detail=true", "validate.py")
    assert result.returncode == 0, result.output
    venv = json.loads(REPORT.read_text())["plan"]["venv"]
    assert venv["lock"].startswith("files/locks/sglang-0.5.23-cp3") and venv["lock"] in result.output


SUMMARY = REPORTS / "summary.json"


def test_fleet_summary_is_short_by_default_and_written_whole():
    SUMMARY.unlink(missing_ok=True)
    result = pyinfra("@local", "validate.py")
    assert result.returncode == 1
    assert "== fleet summary: validate.py, 1 host(s)" in result.stderr
    row = next(line for line in result.stderr.splitlines() if line.startswith("@local "))
    assert row.split()[:3] == ["@local", "none", "none"] and {"blocked", "NO_GPU"} <= set(row.split()), row
    assert "-- 1 blocked: 1 of 1 host(s) need a look (exit status 1)" in result.stderr
    assert "@local: [BLOCKER] NO_GPU: no NVIDIA GPU visible (nvidia-smi not found)" in result.stderr
    # Short: the per-host report (its GPU, driver, toolkit lines) is not printed; -v prints it.
    assert "  GPUs      :" not in result.output
    assert f"python -m bringup.report {REPORTS}/<host>.json" in result.stderr
    document = json.loads(SUMMARY.read_text())
    assert document["purpose"] == "validate" and document["ok"] is False
    assert [(row["host"], row["verdict"], row["blockers"]) for row in document["hosts"]] == \
        [("@local", "blocked", ["NO_GPU"])]
    detailed = pyinfra("-v", "@local", "validate.py")
    assert "== @local: BLOCKED" in detailed.stderr and "  GPUs      : none (nvidia-smi not found)" in detailed.stderr


def test_saved_report_prints_as_the_detail_did():
    pyinfra("@local", "validate.py")
    shown = subprocess.run([sys.executable, "-m", "bringup.report", str(REPORT)], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 1, shown.stderr  # 1: the saved plan has a blocker
    assert shown.stdout.startswith("== @local: BLOCKED\n") and "[BLOCKER] NO_GPU" in shown.stdout
    missing = subprocess.run([sys.executable, "-m", "bringup.report", "reports/nope.json"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip() == "error: reports/nope.json: No such file or directory"


def test_ready_host_exits_zero_and_json_stdout_stays_json():
    result = pyinfra("--json", "@local", "--data", "target_sms=12.0", "validate.py")
    assert result.returncode == 0, result.output
    json.loads(result.stdout)  # pure JSON: the summary went to stderr
    assert "== fleet summary: validate.py, 1 host(s)" in result.stderr
    document = json.loads(SUMMARY.read_text())
    assert document["ok"] is True and document["hosts"][0]["verdict"] in ("ready", "needs deploy")


def test_deploy_summary_names_the_refused_host():
    result = pyinfra("@local", "deploy.py")
    assert result.returncode == 1
    document = json.loads(SUMMARY.read_text())
    assert document["purpose"] == "deploy"
    assert [(row["host"], row["verdict"], row["changed"]) for row in document["hosts"]] == [("@local", "blocked", "-")]


def test_no_summary_for_a_fact_run():
    SUMMARY.unlink(missing_ok=True)
    result = pyinfra("@local", "fact", "facts.node.GpuDevices")
    assert result.returncode == 0 and "fleet summary" not in result.output and not SUMMARY.exists()


def test_validate_says_a_node_without_a_model_is_not_serving_ready():
    """No service_model: validate exits 0 (deploy can run), and its report and the fleet
    summary say the node will not serve, naming service_model; with a model, neither does."""
    result = pyinfra("-v", "@local", "--data", "target_sms=12.0", "validate.py")
    assert result.returncode == 0, result.output
    assert "[WARN   ] SERVICE_NOT_SERVING_READY: service_model is empty" in result.output
    assert "@local: not serving-ready: service_model is empty: deploy writes sglang.service without --model-path" \
        in result.stderr
    row = json.loads(SUMMARY.read_text())["hosts"][0]
    assert (row["verdict"], row["service"]) in (("ready", "not serving-ready (service_model)"),
                                                ("needs deploy", "not serving-ready (service_model)")), row
    # A hub that answers (tests/hub_double.py, on loopback): the model can be had.
    with answering_hub(200) as (endpoint, _):
        served = pyinfra("@local", "--data", "target_sms=12.0", "--data", "service_model=Qwen/Qwen3-0.6B",
                         "--data", f"service_env=HF_ENDPOINT={endpoint}", "validate.py")
    assert served.returncode == 0, served.output
    assert "not serving-ready" not in served.output and "SERVICE_NOT_SERVING_READY" not in served.output
    assert json.loads(SUMMARY.read_text())["hosts"][0]["service"] == "enabled"


def test_rollback_with_nothing_to_roll_back_is_refused_in_one_line_and_changes_nothing():
    # A venv root with no release recorded (the rollback looks there first): nothing to go back to.
    data = ("--data", "target_sms=12.0", "--data", "venv_path=/var/lib/cli-local-no-releases/venv")
    result = pyinfra("@local", *data, "rollback.py")
    assert result.returncode == 1, result.output
    assert ("@local: rollback refused, nothing changed: no previous release recorded; fix: nothing to go back to "
            "(none recorded yet, or a rollback already used it)") in result.output
    assert "@local: failed: rollback refused: no previous release recorded" in result.output
    assert not Path("/var/lib/cli-local-no-releases").exists()
    # The refusal only: no lock taken, nothing changed on the node.
    planned = json.loads(pyinfra("--dry", "--json", "@local", *data, "rollback.py").stdout)
    assert [operation["name"] for operation in planned["plan"]] == ["Refuse the rollback"]


def test_service_rollback_takes_never_or_on_failure():
    result = pyinfra("@local", "--data", "service_rollback=always", "validate.py")
    assert result.returncode == 1
    assert "@local: setting service_rollback='always' is invalid" in result.output
