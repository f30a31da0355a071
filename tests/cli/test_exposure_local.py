"""The server's exposure through the real CLI, ``pyinfra @local validate.py`` (an image
builder's target_sms, as tests/cli/test_pyinfra_local.py): a bind beyond loopback with
no key is the SERVICE_OPEN warning; with ``service_api_key_file`` the unit's ExecStart
names the file (``--config``) and the key it holds appears nowhere (output, report,
summary); bad values are refused in one line with no report."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.hub_double import answering_hub

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
REPORTS = ROOT / "reports" / "cli-exposure"
# Root's, outside every shared tree, wherever the checkout is (a clone under /tmp too).
NODE_FILES = "/var/lib"
REPORT = REPORTS / "@local.json"


def validate(*data):
    REPORT.unlink(missing_ok=True)
    args = [item for pair in (("--data", d) for d in ("target_sms=12.0", *data)) for item in pair]
    result = subprocess.run([PYINFRA, "-y", "@local", *args, "validate.py"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env=dict(os.environ, GPU_BRINGUP_REPORTS=str(REPORTS)),
                            stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result


def test_open_server_is_a_warning():
    result = validate("service_host=0.0.0.0", "service_model=m", "report_detail=true")
    assert "SERVICE_OPEN" in result.output, result.output
    report = json.loads(REPORT.read_text())
    finding = next(f for f in report["plan"]["findings"] if f["code"] == "SERVICE_OPEN")
    assert finding["severity"] == "warning" and "0.0.0.0:30000 with no API key" in finding["message"]
    assert " --host 0.0.0.0 --port 30000" in report["plan"]["service"]["exec_line"]


def test_a_keyed_server_names_the_file_and_never_the_key():
    secret = "sk-exposure-test-9f8e7d6c5b4a"
    # It stands for the node's file (validate never reads it), in a directory of its own
    # outside the checkout: service_api_key_file may not be under /tmp, where a clone may be.
    REPORTS.mkdir(parents=True, exist_ok=True)
    key_dir = Path(tempfile.mkdtemp(prefix="cli-exposure-", dir=NODE_FILES))
    key_file = key_dir / "api-key.yaml"
    # The key kept on the control machine (service_api_key_source), for deploy to upload:
    # the node's file need not exist yet (this machine has no service account).
    source = key_dir / "source.yaml"
    source.write_text(f"api-key: {secret}\n")
    source.chmod(0o600)
    # A hub that answers for the model (tests/hub_double.py, on loopback).
    with answering_hub(200) as (endpoint, _):
        result = validate("service_host=0.0.0.0", "service_model=m", f"service_api_key_file={key_file}",
                          f"service_api_key_source={source}", "report_detail=true",
                          f"service_env=HF_ENDPOINT={endpoint}")
    assert result.returncode == 0, result.output
    report_text = REPORT.read_text()
    report = json.loads(report_text)
    assert "SERVICE_OPEN" not in [f["code"] for f in report["plan"]["findings"]]
    assert report["plan"]["service"]["exec_line"].endswith(f"--host 0.0.0.0 --port 30000 --config {key_file}")
    summary = (REPORTS / "summary.json").read_text()
    shutil.rmtree(key_dir)
    for where, text in (("output", result.output), ("report", report_text), ("summary", summary)):
        assert secret not in text, f"the key is in the {where}"


@pytest.mark.parametrize("setting,value,fix", [
    ("service_host", "gpu-7.example.com", "use an IP address to listen on"),
    ("service_api_key_file", "/etc/sglang/api-key.txt", "ending in .yaml or .yml"),
    ("service_args", "--tp 8 --api-key k", "remove --api-key/--admin-api-key"),
])
def test_bad_exposure_settings_are_refused_in_one_line(setting, value, fix):
    result = validate(f"{setting}={value}")
    assert result.returncode != 0 and "Traceback" not in result.output, result.output
    assert [line for line in result.output.splitlines() if f"@local: setting {setting}=" in line and fix in line]
    assert not REPORT.exists(), "a refused host leaves no report"
