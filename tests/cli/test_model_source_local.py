"""Where service_model comes from, through the real CLI (``pyinfra @local validate.py``,
an image builder's target_sms as tests/cli/test_pyinfra_local.py): the probe runs on this
machine, the hub is tests/hub_double.py's on loopback (huggingface.co is never asked).
An uncached model behind a hub that refuses the connection is a blocker naming the hub
and its error (a warning where deploy does not start the service); planted in the
service's hub cache, it is "from the cache" and the plan's env file gets HF_HUB_OFFLINE=1."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.hub_double import closed_endpoint, plant_cache_entry

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
REPORTS = ROOT / "reports" / "cli-model-source"
REPORT = REPORTS / "@local.json"
MODEL = "Qwen/Qwen3-0.6B"


@pytest.fixture
def hub_cache():
    """A hub cache every user may search, outside the checkout (a clone may be under /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="cli-model-source-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path / "hub"
    shutil.rmtree(path)


def validate(*data):
    REPORT.unlink(missing_ok=True)
    args = [item for pair in (("--data", d) for d in ("target_sms=12.0", f"service_model={MODEL}", *data))
            for item in pair]
    result = subprocess.run([PYINFRA, "-y", "-v", "@local", *args, "validate.py"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env=dict(os.environ, GPU_BRINGUP_REPORTS=str(REPORTS)),
                            stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result, json.loads(REPORT.read_text())


def model_findings(report):
    return {f["code"]: f for f in report["plan"]["findings"] if f["code"].startswith("MODEL_")}


def test_an_uncached_model_behind_an_unreachable_hub_is_named_before_deploy(hub_cache):
    endpoint = closed_endpoint()
    env = f"service_env=HF_ENDPOINT={endpoint} HF_HUB_CACHE={hub_cache}"
    result, report = validate(env)
    assert result.returncode == 1, result.output
    finding = model_findings(report)["MODEL_UNAVAILABLE"]
    assert finding["severity"] == "blocker"
    assert finding["message"] == (f"service_model={MODEL} is not in the service's hub cache ({hub_cache}, from "
                                  f"HF_HUB_CACHE) and the hub ({endpoint}) does not answer from the node ([Errno 111] "
                                  "Connection refused): the service would never serve"), finding["message"]
    assert "MODEL_UNAVAILABLE" in result.output
    # The probe saw the endpoint the service will use, and no HF_HUB_OFFLINE is planned.
    assert report["facts"]["model"]["endpoint"] == endpoint and "HF_HUB_OFFLINE" not in report["plan"]["env"]
    # The same node, a deploy that does not start the service: a warning, validate passes.
    staged, report = validate(env, "deploy_steps=repo,toolkit,env,account,venv")
    assert staged.returncode == 0, staged.output
    assert model_findings(report)["MODEL_UNAVAILABLE"]["severity"] == "warning"


def test_a_model_in_the_services_hub_cache_is_from_the_cache_and_the_node_goes_offline(hub_cache):
    entry = plant_cache_entry(hub_cache, MODEL)
    result, report = validate(f"service_env=HF_ENDPOINT={closed_endpoint()} HF_HUB_CACHE={hub_cache}")
    assert result.returncode == 0, result.output
    finding = model_findings(report)["MODEL_OFFLINE"]
    assert finding["severity"] == "fix" and f"service_model={MODEL} from the cache {entry}" in finding["message"]
    assert "deploy writes HF_HUB_OFFLINE=1" in finding["fix"]
    assert report["plan"]["env"]["HF_HUB_OFFLINE"] == "1"
    assert report["plan"]["service"]["env"]["HF_HUB_OFFLINE"] == "1"


def test_an_interrupted_fetch_behind_an_unreachable_hub_is_a_blocker_not_offline(hub_cache):
    """What a fetch killed midway leaves (refs/main and config.json, the weights' blob still
    .incomplete: huggingface_hub's order) is not a cached model: validate names the partial
    entry and the fix, and plans no HF_HUB_OFFLINE."""
    entry = plant_cache_entry(hub_cache, MODEL, weights=False)
    (entry / "blobs" / "9a1c.incomplete").write_bytes(b"\0" * 16)
    result, report = validate(f"service_env=HF_ENDPOINT={closed_endpoint()} HF_HUB_CACHE={hub_cache}")
    assert result.returncode == 1, result.output
    finding = model_findings(report)["MODEL_UNAVAILABLE"]
    assert finding["severity"] == "blocker" and f"entry {entry} in the service's hub cache is partial" in \
        finding["message"] and "still .incomplete" in finding["message"], finding
    assert "service_model_fetch: true" in finding["fix"]
    assert "HF_HUB_OFFLINE" not in report["plan"]["env"] and report["facts"]["model"]["snapshot"]["incomplete"] == 1


def test_deploys_own_hf_hub_offline_is_taken_back_when_the_hub_answers(hub_cache):
    """The env file holds HF_HUB_OFFLINE=1 that deploy's record (root's, 0600) says deploy
    wrote; the hub answers again: validate asks it and plans the key taken back."""
    from tests.hub_double import answering_hub

    plant_cache_entry(hub_cache, MODEL)
    # service_env_file may not be under /tmp or /var/tmp (a setting's check): root's scratch directory.
    scratch = Path(tempfile.mkdtemp(prefix="cli-model-env-", dir="/var/lib"))
    etc = scratch / "sglang"  # a directory of its own, named for the service (a setting's check)
    etc.mkdir()
    try:
        env_file = etc / "sglang.env"
        env_file.write_text("# gpu-bringup\nHF_HUB_OFFLINE=1\n")
        env_file.chmod(0o640)
        (etc / "sglang.env.deploy-owned").write_text("# gpu-bringup\nHF_HUB_OFFLINE=1\n")
        (etc / "sglang.env.deploy-owned").chmod(0o600)
        with answering_hub(200) as (endpoint, asked):
            result, report = validate(f"service_env=HF_ENDPOINT={endpoint} HF_HUB_CACHE={hub_cache}",
                                      f"service_env_file={env_file}")
    finally:
        shutil.rmtree(scratch)
    assert result.returncode == 0, result.output
    # The hub was asked (the old code took deploy's value for the operator's and never asked again).
    assert asked and "HF_HUB_OFFLINE is set" not in model_findings(report)["MODEL_SOURCE"]["message"]
    assert report["facts"]["model"]["offline_by"] == "deploy", report["facts"]["model"]
    assert "MODEL_SOURCE" in model_findings(report) and "HF_HUB_OFFLINE" not in report["plan"]["service"]["env"]
    assert report["plan"]["env_drop"] == {"HF_HUB_OFFLINE": "1"}
def test_an_endpoint_password_in_the_env_file_is_in_no_output_report_or_argv(hub_cache):
    """HF_ENDPOINT with a user and a password holding "/" in the service's env file (root's,
    0600: the one place such a value may live): validate at -vvv (pyinfra prints every
    command and fact output) shows it nowhere, nor does the report or the summary; the
    probe reports the endpoint cut at its last "@", and the hub's error is urllib's own,
    not "nonnumeric port: 'PASSWORD@host'"."""
    directory = Path(tempfile.mkdtemp(prefix="sglang-cli-secrets-", dir="/etc"))
    directory.chmod(0o755)
    env_file = directory / "sglang.env"
    host = closed_endpoint().split("//", 1)[1]
    env_file.write_text(f"HF_ENDPOINT=http://svc:pw_plantedZq7/x@cli_plantedZq8@{host}\nHF_HUB_CACHE={hub_cache}\n")
    env_file.chmod(0o600)
    try:
        REPORT.unlink(missing_ok=True)
        result = subprocess.run([PYINFRA, "-y", "-vvv", "@local", "--data", "target_sms=12.0", "--data",
                                 f"service_model={MODEL}", "--data", f"service_env_file={env_file}", "validate.py"],
                                cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
                                env=dict(os.environ, GPU_BRINGUP_REPORTS=str(REPORTS)))
        output = result.stdout + result.stderr
        saved = "".join(path.read_text() for path in REPORTS.rglob("*") if path.is_file())
        for where, text in (("pyinfra -vvv", output), ("reports", saved)):
            assert "plantedZq7" not in text and "plantedZq8" not in text, where
        report = json.loads(REPORT.read_text())
        assert report["facts"]["model"]["endpoint"] == f"http://<redacted>@{host}", report["facts"]["model"]
        assert "Connection refused" in model_findings(report)["MODEL_UNAVAILABLE"]["message"]
    finally:
        shutil.rmtree(directory)
