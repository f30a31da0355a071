"""Sound hardware before serving (issue 37), through the real CLI: one light node
(``health1``, 8x RTX PRO 6000, Debian 12, no toolkit, ``deploy_steps: account``) whose GPUs
the test breaks between validates with the stand-in control (``python -m sandbox health
NAME STATE``, sandbox/gpu_health_states.py: the nvidia-smi stand-in's answers and the
state's NVRM Xid lines in the node's journal, ``--state kernel-log``).

For each health state validate names the finding with the GPU's index and bus id and
NVIDIA's action; where that action is a GPU reset, a reboot or a replacement, deploy
refuses (exit 1) and the node is as it was; ``gpu_health_accept`` lets it through; the
healthy node reports no health finding. NVIDIA's diagnostic (``gpu_diag``) runs on the
dcgmi stand-in, installed by the stand-in control or by deploy from the sandbox's repository
(``gpu_diag_install``: the declared stand-in DCGM packages at the lock's versions). Only the
GPU driver and DCGM are stand-ins."""

import subprocess
import sys

import pytest

from bringup.findings import BLOCKER, INFO, WARNING
from bringup.dcgm_locks import dcgm_lock_name
from bringup.toolkit_locks import parse_toolkit_lock
from tests.sandbox_fixtures import REPO_ROOT, changed_operations, pyinfra_cli, run_ssh, validate

pytestmark = pytest.mark.sandbox

NAME = "health1"
# Light: the service account alone (no apt, no venv); enough for deploy to change something.
DATA = ("deploy_steps=account",)
SICK = "GPU 3 (0000:48:00.0)"
# What deploy would change, listed before and after a refused deploy.
LISTING = "getent passwd sglang; ls -lA --time-style=+%s /etc /var/lib /opt /etc/sglang 2>&1; true"
# state -> (validate's exit status, {code: (severity, words of the message, words of the fix)})
STATES = {
    "ecc-uncorrectable": (1, {
        "GPU_ECC_UNCORRECTABLE": (BLOCKER, f"{SICK}: 2 uncorrectable ECC error(s)", "nvidia-smi -r -i 3"),
        "GPU_XID": (BLOCKER, f"{SICK}: Xid 95", "nvidia-smi -r -i 0000:48:00.0")}),
    "row-remap-pending": (1, {
        "GPU_ROW_REMAP_PENDING": (BLOCKER, f"{SICK}: memory rows are pending remapping", "a100-gpu-mem-error-mgmt"),
        # The catalog asks for nothing on Xid 63 itself: the pending remap is the blocker.
        "GPU_XID": (INFO, f"{SICK}: Xid 63", "NVIDIA asks for no action")}),
    "row-remap-failure": (1, {
        "GPU_ROW_REMAP_FAILED": (BLOCKER, f"{SICK}: row remapping failed", "replace the board (RMA)"),
        "GPU_XID": (BLOCKER, f"{SICK}: Xid 64", "nvidia-smi -r -i 0000:48:00.0")}),
    "link-x8": (0, {"GPU_PCIE_LINK_DEGRADED": (WARNING, f"{SICK}: its PCIe link trained at x8", "reseat the board")}),
    "hw-slowdown": (0, {"GPU_SLOWDOWN": (WARNING, f"{SICK}: clocks held down: HW Slowdown", "power supply")}),
    "gpu-missing": (1, {
        "GPU_MISSING_FROM_DRIVER": (BLOCKER, "the GPU at 0000:88:00.0: on the PCI bus but not listed by nvidia-smi "
                                             "(7 of 8", "reboot the node"),
        "GPU_XID": (BLOCKER, "the GPU at 0000:88:00.0: Xid 79 (GPU has fallen off the bus)", "restart the node")}),
    "reset-required": (1, {
        "GPU_RESET_REQUIRED": (BLOCKER, f"{SICK}: nvidia-smi answers \"[GPU requires reset]\"", "nvidia-smi -r -i 3"),
        "GPU_XID": (BLOCKER, f"{SICK}: Xid 154", "nvidia-smi -r -i 0000:48:00.0")}),
}


@pytest.fixture(scope="module")
def node(sandbox_node):
    return dict(sandbox_node(NAME, "127.0.0.179", gpu="rtx-pro-6000-x8", toolkit="none", states=["kernel-log"]),
                name=NAME)


def set_health(state):
    """The stand-in control, as an operator of the sandbox runs it."""
    run = subprocess.run([sys.executable, "-m", "sandbox", "health", NAME, state], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr


def health_findings(report):
    return {f["code"]: f for f in report["plan"]["findings"] if f["code"].startswith("GPU_") and
            f["code"] != "GPU_STANDIN"}


def test_each_health_state_is_named_with_its_gpu_and_nvidias_action(node):
    for state, (rc, expected) in STATES.items():
        set_health(state)
        _, report = validate(NAME, expect_rc=rc, data=DATA)
        found = health_findings(report)
        assert {code: f["severity"] for code, f in found.items()} == {
            code: severity for code, (severity, _, _) in expected.items()}, (state, found)
        for code, (_, seen, fix) in expected.items():
            assert seen in found[code]["message"], (state, found[code])
            assert fix in found[code]["fix"] and found[code]["fix"].startswith("NVIDIA's action: "), (state, found[code])
        if rc:
            before = run_ssh(node, LISTING).stdout
            refused = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA)
            assert refused.returncode == 1 and "blocked" in refused.output, (state, refused.output[-3000:])
            assert run_ssh(node, LISTING).stdout == before, state


def test_the_xid_lines_are_in_the_nodes_kernel_log_in_the_drivers_format(node):
    set_health("gpu-missing")
    lines = run_ssh(node, "journalctl -k -b -o cat -q --no-pager").stdout.splitlines()
    assert lines == ["NVRM: Xid (PCI:0000:88:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."]
    # Healthy again: the stand-in's kernel log of the state is gone with it.
    set_health("healthy")
    assert run_ssh(node, "journalctl -k -b -o cat -q --no-pager").stdout.strip() == ""


def test_accepting_the_gpus_findings_lets_deploy_through_and_a_healthy_node_has_none(node):
    set_health("row-remap-pending")
    accept = "gpu_health_accept=GPU_ROW_REMAP_PENDING@0000:48:00.0"
    _, report = validate(NAME, data=(*DATA, accept))
    found = health_findings(report)
    assert {code: f["severity"] for code, f in found.items()} == {"GPU_ROW_REMAP_PENDING": WARNING, "GPU_XID": INFO}
    assert "accepted by gpu_health_accept GPU_ROW_REMAP_PENDING@0000:48:00.0" in found["GPU_ROW_REMAP_PENDING"]["message"]
    deployed = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=(*DATA, accept))
    assert deployed.returncode == 0, deployed.output[-3000:]
    assert run_ssh(node, "getent passwd sglang").stdout.startswith("sglang:")

    set_health("healthy")
    _, report = validate(NAME, data=DATA)
    assert health_findings(report) == {}
    assert report["facts"]["gpu_health"]["kernel_log"] == {"source": "journal", "read_error": None, "xid": []}
    assert len(report["facts"]["gpu_health"]["gpus"]) == 8


def dcgm_runs(node):
    """The diagnostics the dcgmi stand-in answered (sandbox/files/dcgmi records each)."""
    return run_ssh(node, "cat /var/lib/sandbox-gpu/dcgm-runs 2>/dev/null; true").stdout.splitlines()


def diag_findings(report):
    return {f["code"]: f for f in report["plan"]["findings"] if f["code"].startswith("GPU_DIAG_")}


def test_nvidias_diagnostic_runs_only_when_asked_on_idle_gpus_and_a_failure_blocks_deploy(node):
    """gpu_diag through the real CLI, DCGM's dcgmi a declared stand-in answering the public
    samples (``python -m sandbox health NAME dcgm-pass|dcgm-fail|gpu-process``)."""
    set_health("healthy")
    set_health("gpu-idle")
    set_health("dcgm-pass")
    try:
        # Not asked: nothing runs, nothing is said.
        _, report = validate(NAME, data=DATA)
        assert dcgm_runs(node) == [] and report["facts"].get("gpu_diag") is None and not diag_findings(report)
        # Asked, and passing: one run, no finding.
        _, report = validate(NAME, data=(*DATA, "gpu_diag=1"))
        assert dcgm_runs(node) == ["diag -r 1 -j"], dcgm_runs(node)
        diag = report["facts"]["gpu_diag"]
        assert (diag["ran"], diag["dcgm_version"], diag["error"]) == (True, "4.2.3", None) and not diag_findings(report)
        # Failing: the GPU, the test and NVIDIA's action named; deploy refuses, nothing changes.
        set_health("dcgm-fail")
        _, report = validate(NAME, expect_rc=1, data=(*DATA, "gpu_diag=2"))
        failed = diag_findings(report)
        assert list(failed) == ["GPU_DIAG_FAILED"] and failed["GPU_DIAG_FAILED"]["severity"] == BLOCKER, failed
        message, fix = failed["GPU_DIAG_FAILED"]["message"], failed["GPU_DIAG_FAILED"]["fix"]
        assert f"{SICK}: NVIDIA's diagnostic (`dcgmi diag -r 2`) failed its test memory (Hardware)" in message
        assert "double-bit ECC" in message and "contact NVIDIA support" in fix, failed
        before = run_ssh(node, LISTING).stdout
        refused = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=(*DATA, "gpu_diag=2"))
        assert refused.returncode == 1 and "blocked" in refused.output, refused.output[-3000:]
        assert run_ssh(node, LISTING).stdout == before
        # A process on a GPU: not run, and the warning says why.
        set_health("gpu-process")
        runs = len(dcgm_runs(node))
        _, report = validate(NAME, data=(*DATA, "gpu_diag=1"))
        assert len(dcgm_runs(node)) == runs and report["facts"]["gpu_diag"]["ran"] is False
        not_run = diag_findings(report)
        assert list(not_run) == ["GPU_DIAG_NOT_RUN"] and not_run["GPU_DIAG_NOT_RUN"]["severity"] == WARNING
        assert "process 4242, python3, 00000000:18:00.0" in not_run["GPU_DIAG_NOT_RUN"]["message"], not_run
    finally:
        set_health("gpu-idle")
        set_health("dcgm-none")


def test_gpu_diag_install_installs_dcgm_at_its_lock_and_validate_runs_the_diagnostic(node):
    """gpu_diag_install through the real CLI: deploy (the repo and dcgm steps) installs DCGM's
    packages at the lock's exact versions from the sandbox's repository (declared stand-ins,
    sandbox/aptrepo/dcgm_debs.py) and starts nvidia-dcgm; a second deploy changes nothing;
    validate with gpu_diag=1 then runs the diagnostic through the installed dcgmi."""
    from sandbox import aptrepo

    aptrepo.ensure_served()
    set_health("healthy")
    set_health("gpu-idle")
    set_health("dcgm-none")
    data = ("deploy_steps=repo,dcgm", "gpu_diag_install=true")
    lock = parse_toolkit_lock((REPO_ROOT / dcgm_lock_name("debian12", "x86_64")).read_text())
    try:
        # Before: no dcgmi; validate says deploy installs it.
        _, report = validate(NAME, data=(*data, "gpu_diag=1"))
        fixes = {f["code"]: f for f in report["plan"]["findings"] if f["code"].startswith("DCGM_")}
        assert list(fixes) == ["DCGM_INSTALL"] and fixes["DCGM_INSTALL"]["severity"] == "fix", fixes
        assert report["plan"]["dcgm"]["pins"] == [f"{name}={version}" for name, version in lock.items()]
        deployed = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=data)
        assert deployed.returncode == 0, deployed.output[-4000:]
        installed = run_ssh(node, "dpkg-query -W -f '${Package}=${Version}\\n' 'datacenter-gpu-manager-4-*'").stdout
        assert sorted(installed.split()) == sorted(f"{name}={version}" for name, version in lock.items()), installed
        assert run_ssh(node, "systemctl is-enabled nvidia-dcgm; systemctl is-active nvidia-dcgm").stdout.split() == [
            "enabled", "active"]
        # Held at the lock as the toolkit is: the newer 1:4.4.2-1 served stays a candidate apt
        # does not take (`apt-get upgrade` would otherwise move it past the lock).
        policy = run_ssh(node, "apt-cache policy datacenter-gpu-manager-4-core").stdout
        core = lock["datacenter-gpu-manager-4-core"]
        assert f"Candidate: {core}" in policy and f"*** {core} 990" in policy and "1:4.4.2-1" in policy, policy
        again = pyinfra_cli("--json", "inventory/gpu.py", "--limit", NAME, "deploy.py", data=data)
        assert again.returncode == 0 and changed_operations(again) == [], changed_operations(again)
        # The diagnostic, through the installed dcgmi and its running host engine.
        _, report = validate(NAME, data=(*data, "gpu_diag=1"))
        assert dcgm_runs(node) == ["diag -r 1 -j"], dcgm_runs(node)
        assert report["facts"]["gpu_diag"]["ran"] is True and not diag_findings(report), report["facts"]["gpu_diag"]
        assert not [f for f in report["plan"]["findings"] if f["code"].startswith("DCGM_")]
    finally:
        run_ssh(node, "systemctl disable --now nvidia-dcgm; DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "
                      "'datacenter-gpu-manager-4-*'; rm -f /var/lib/sandbox-gpu/dcgm-runs", check=False)
        set_health("dcgm-none")
