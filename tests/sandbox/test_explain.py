"""validate.py explains a unit that keeps failing, over real SSH to a sandbox node with
real systemd (docs/findings.md: "Explain a failed start").

The node gets the toolkit, the environment and the unit from deploy.py (no venv: too
slow for CI), with a model set so the unit is enabled and started. Its start first
fails for want of the venv (systemd cannot execute its program: 203/EXEC, the
entry point's signature); then a drop-in makes the
unit run the recorded ptxas configuration (tests/fixtures/failures/ptxas-12.8-sm120f.log:
NVIDIA's ptxas 12.8 asked for sm_120f), a failure the corpus knows. The node is taken
down at the end of the module.
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sandbox_fixtures import node_addr, pyinfra_cli, run_ssh
from tests.sandbox_fixtures import validate as validate_host

ROOT = Path(__file__).resolve().parents[2]
NAME, ADDR = "explain-e2e", "127.0.0.46"
DATA = ("deploy_steps=repo,toolkit,env,account,service", "service_model=/opt/models/none")
DROP_IN = "/etc/systemd/system/sglang.service.d/ptxas-12.8.conf"
PTX = "/var/lib/sglang/k.ptx"

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def failing_node(sandbox_host):
    from sandbox import aptrepo, node

    aptrepo.ensure_served()
    entry = node.up(NAME, node_addr(ADDR), "rtx-pro-6000-x8", "none")
    try:
        # A model directory (SGLang never gets to read it: the unit cannot start): a
        # service_model that is not there blocks a deploy that starts the service.
        run_ssh(entry, "install -d -m 0755 /opt/models/none && echo '{}' > /opt/models/none/config.json")
        deployed = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA)
        # The unit is written, enabled and started; with no venv its start fails, and the
        # readiness gate fails the host at the first failed start (no known cause).
        assert deployed.returncode == 1, deployed.output[-4000:]
        assert "sglang.service is not serving: " in deployed.output, deployed.output[-4000:]
        yield entry
    finally:
        node.down([NAME])


def wait_failing(entry, text="", timeout=120):
    """Until systemd has seen the unit's start fail (waiting to restart, or restarted),
    with ``text`` in its journal."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = run_ssh(entry, "systemctl show sglang.service -p ActiveState -p SubState -p NRestarts").stdout
        state = dict(line.split("=", 1) for line in out.split())
        failing = state["ActiveState"] == "failed" or state["SubState"] == "auto-restart" or int(state["NRestarts"]) > 0
        if failing and text in run_ssh(entry, "journalctl -u sglang.service --no-pager -o cat").stdout:
            return state
        time.sleep(2)
    raise AssertionError(f"sglang.service did not fail with {text!r} within {timeout} s: {out}")


def validate():
    """validate.py with the per-host detail (-v: the fleet summary alone is the default)."""
    result, document = validate_host(NAME, data=DATA, options=("-v",), timeout=600)
    failed = [finding for finding in document["plan"]["findings"] if finding["code"] == "SERVICE_FAILED"]
    return result, document, failed


def test_validate_explains_the_failing_unit(failing_node):
    entry = failing_node
    # 1. The deployed unit cannot start: there is no venv, so systemd cannot execute its
    #    program (status=203/EXEC), which explain names. The wait is for systemd's
    #    "Failed at step EXEC spawning" line itself: the executor logs it, PID 1 its "Main
    #    process exited ... 203/EXEC", and under load the journal can hold the latter first.
    wait_failing(entry, "Failed at step EXEC spawning")
    result, document, failed = validate()
    unit = document["facts"]["service_unit"]
    assert unit["name"] == "sglang.service" and unit["journal"], unit
    assert len(failed) == 1 and "SERVICE_ENTRY_POINT_BROKEN (systemd could not execute" in failed[0]["message"], failed
    assert "Failed at step EXEC spawning /opt/sglang/venv/bin/sglang" in failed[0]["message"], failed
    assert "service   : sglang.service" in result.output

    # 2. The unit now runs the recorded ptxas configuration: NVIDIA's ptxas 12.8 asked for sm_120f.
    run_ssh(entry, "DEBIAN_FRONTEND=noninteractive apt-get -y -q install cuda-nvcc-12-8 >/dev/null && "
                   "printf '__global__ void k(float *x) { x[threadIdx.x] = 1.0f; }\\n' > /tmp/k.cu && "
                   f"/usr/local/cuda-13.0/bin/nvcc -ptx -arch=compute_120 /tmp/k.cu -o {PTX} && chmod 0644 {PTX} && "
                   f"mkdir -p {Path(DROP_IN).parent} && "
                   f"printf '[Service]\\nExecStart=\\nExecStart=/usr/local/cuda-12.8/bin/ptxas -arch=sm_120f {PTX} "
                   f"-o /tmp/k.cubin\\n' > {DROP_IN} && systemctl daemon-reload && systemctl restart sglang.service",
            check=False)
    wait_failing(entry, "Value 'sm_120f' is not defined")
    result, document, failed = validate()
    journal = document["facts"]["service_unit"]["journal"]
    assert any("Value 'sm_120f' is not defined" in line for line in journal), journal
    assert len(failed) == 1, document["plan"]["findings"]
    assert "FLASHINFER_ARCH_TRAP (the toolkit's ptxas does not know the target arch" in failed[0]["message"]
    assert "CUDA_HOME=/usr/local/cuda-13.0" in failed[0]["fix"]
    assert 'FLASHINFER_CUDA_ARCH_LIST="12.0f"' in failed[0]["fix"]
    assert "[WARN   ] SERVICE_FAILED" in result.output

    # The CLI says the same of the journal read by hand.
    journal_text = run_ssh(entry, "journalctl -u sglang.service --no-pager -o cat").stdout
    cli = subprocess.run([sys.executable, "-m", "bringup.explain", "-"], cwd=ROOT, input=journal_text,
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0 and "FLASHINFER_ARCH_TRAP: the toolkit's ptxas does not know" in cli.stdout
