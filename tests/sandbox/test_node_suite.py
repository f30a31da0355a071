"""The node suite (tests/node) through its real CLI against sandbox nodes: red on the
incident's node, green for what deploy.py did, red again by name after a deliberate
break, two nodes in one run, and a wrong host key refused."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sandbox import aptrepo

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV_FILE = "/etc/sglang/sglang.env"
HOME = "/usr/local/cuda-13.0"
# Settings given to deploy.py and to the suite alike (pyinfra --data / --node-data):
# one pre-warmed module keeps the deploy short.
DEPLOY_DATA = ("prewarm_modules=sampling",)

DRIVER_CHECKS = {"nvidia_smi_answers", "driver_runs_toolkit"}
TOOLKIT_CHECKS = {"nvcc_reports_plan_version", "nvcc_lists_every_gpu_arch"}
RESOLUTION_CHECKS = {"login_shell_resolves_toolkit", "ssh_command_resolves_toolkit", "service_env_resolves_toolkit"}
ENV_FILE_CHECKS = {"service_env_file_owner_and_mode", "service_env_file_matches_plan"}
VENV_CHECKS = {"flashinfer_resolves_toolkit", "flashinfer_target_archs", "torch_cuda_build", "torch_covers_gpu_sms"}
JIT_CHECKS = {"prewarm_manifest_matches", "prewarm_libraries_exist", "prewarm_ninja_no_work",
              "deployed_file_not_world_writable[prewarm-manifest]"}
UNIT_CHECKS = {"service_unit_file", "service_unit_directives", "deployed_file_not_world_writable[service-unit]"}
FILE_CHECKS = {f"deployed_file_not_world_writable[{label}]" for label in
               ("apt-keyring", "apt-source", "apt-pin", "profile", "pam-environment", "service-env-file",
                "service-unit", "prewarm-manifest")}
ALL_CHECKS = (DRIVER_CHECKS | TOOLKIT_CHECKS | RESOLUTION_CHECKS | ENV_FILE_CHECKS | VENV_CHECKS | JIT_CHECKS
              | UNIT_CHECKS | FILE_CHECKS)

pytestmark = pytest.mark.sandbox


class SuiteRun:
    """One run of ``pytest tests/node``: exit code, output, per-(host, check) outcome
    from its JUnit XML, and its Markdown report."""

    def __init__(self, proc, junit, report):
        self.rc, self.output = proc.returncode, proc.stdout + proc.stderr
        self.report = report.read_text() if report.exists() else ""
        self.results = {}
        if junit.exists():
            for case in ET.parse(junit).iter("testcase"):
                props = {p.get("name"): p.get("value") for p in case.iter("property")}
                if "node" not in props:
                    continue
                status = next((tag.upper() for tag in ("failure", "error", "skipped") if case.find(tag) is not None),
                              "PASS")
                self.results[(props["node"], props["check"])] = status

    def hosts(self):
        return {host for host, _ in self.results}

    def checks(self, host):
        return {check for name, check in self.results if name == host}

    def failing(self, host):
        return {check for (name, check), status in self.results.items()
                if name == host and status in ("FAILURE", "ERROR")}

    def __repr__(self):
        return f"SuiteRun(rc={self.rc})\n{self.output[-6000:]}"


def node_suite(tmp, *args, env=None):
    """Run the suite's CLI exactly as an operator would, against inventory/gpu.py."""
    tmp.mkdir(parents=True, exist_ok=True)
    junit, report = tmp / "junit.xml", tmp / "report.md"
    for path in (junit, report):
        path.unlink(missing_ok=True)
    data = [arg for item in DEPLOY_DATA for arg in ("--node-data", item)]
    command = [str(BIN / "pytest"), "tests/node", "--inventory", "inventory/gpu.py", *data, *args,
               f"--junitxml={junit}", f"--node-report={report}", "-p", "no:cacheprovider"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return SuiteRun(proc, junit, report)


@pytest.fixture(scope="module")
def nodes(sandbox_node):
    aptrepo.ensure_served()
    return (sandbox_node("ns-a", "127.0.0.71", gpu="rtx-pro-6000-x8", toolkit="incident"),
            sandbox_node("ns-b", "127.0.0.72", gpu="rtx-pro-6000-x8", toolkit="incident"))


@pytest.fixture(scope="module")
def before(nodes, tmp_path_factory):
    return node_suite(tmp_path_factory.mktemp("before"), "--node-limit", "ns-a")


@pytest.fixture(scope="module")
def deployed(before):
    data = [arg for item in DEPLOY_DATA for arg in ("--data", item)]
    result = subprocess.run([str(BIN / "pyinfra"), "-y", *data, "inventory/gpu.py", "--limit", "ns-a", "deploy.py"],
                            cwd=ROOT, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result


def test_incident_node_is_red_by_name(before):
    assert before.rc == 1, before
    assert before.checks("ns-a") == ALL_CHECKS, before
    assert TOOLKIT_CHECKS | RESOLUTION_CHECKS | ENV_FILE_CHECKS <= before.failing("ns-a"), before
    assert not DRIVER_CHECKS & before.failing("ns-a"), before
    assert before.report.splitlines()[0].split("|")[2].strip() == "ns-a"
    assert "- ns-a login_shell_resolves_toolkit: login shell (bash -lc): expected CUDA_HOME=/usr/local/cuda-13.0" \
           in before.report


def test_deployed_node_is_green(deployed, tmp_path):
    after = node_suite(tmp_path, "--node-limit", "ns-a")
    assert after.checks("ns-a") == ALL_CHECKS, after
    assert after.failing("ns-a") == set(), after
    assert after.rc == 0, after
    ready = next(line for line in after.report.splitlines() if line.startswith("| **ready**"))
    assert f"YES ({len(ALL_CHECKS)} passed)" in ready, after.report


def test_cuda_home_rewritten_fails_by_name(deployed, nodes, sandbox_ssh, tmp_path):
    node = nodes[0]
    sandbox_ssh(node, f"cp -p {ENV_FILE} {ENV_FILE}.keep && "
                      f"sed -i 's|^CUDA_HOME=.*|CUDA_HOME=/usr/local/cuda-12.8|' {ENV_FILE}")
    try:
        run = node_suite(tmp_path, "--node-limit", "ns-a")
    finally:
        sandbox_ssh(node, f"mv {ENV_FILE}.keep {ENV_FILE}")
    assert {"service_env_resolves_toolkit", "service_env_file_matches_plan"} <= run.failing("ns-a"), run
    assert not {"login_shell_resolves_toolkit", "ssh_command_resolves_toolkit"} & run.failing("ns-a"), run
    assert ("CUDA_HOME=/usr/local/cuda-13.0, first nvcc /usr/local/cuda-13.0/bin/nvcc, release 13.0; "
            "actual CUDA_HOME=/usr/local/cuda-12.8") in run.report
    assert "CUDA_HOME=/usr/local/cuda-12.8 (want /usr/local/cuda-13.0)" in run.report


def test_toolkit_moved_away_fails_by_name(deployed, nodes, sandbox_ssh, tmp_path):
    node = nodes[0]
    sandbox_ssh(node, f"mv {HOME} {HOME}.away")
    try:
        run = node_suite(tmp_path, "--node-limit", "ns-a")
    finally:
        sandbox_ssh(node, f"mv {HOME}.away {HOME}")
    assert TOOLKIT_CHECKS | RESOLUTION_CHECKS <= run.failing("ns-a"), run
    assert not ENV_FILE_CHECKS & run.failing("ns-a"), run
    assert f"{HOME}/bin/nvcc --version: expected release 13.0; actual exit 127" in run.report


def test_two_nodes_in_one_run(deployed, tmp_path):
    run = node_suite(tmp_path, "--node-limit", "ns-*")
    assert run.hosts() == {"ns-a", "ns-b"}, run
    header = [cell.strip() for cell in run.report.splitlines()[0].split("|")[1:-1]]
    assert header == ["check", "ns-a", "ns-b"], run.report
    assert TOOLKIT_CHECKS <= run.failing("ns-b") and not TOOLKIT_CHECKS & run.failing("ns-a"), run
    assert "test_nvcc_reports_plan_version[ns-b]" in run.output


def test_wrong_host_key_refuses_the_host(nodes, tmp_path):
    node = nodes[1]
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = (tmp_path / "other.pub").read_text().split()[:2]
    (tmp_path / "known_hosts").write_text(f"{node['ssh_hostname']} {' '.join(other)}\n")
    (tmp_path / "hosts.yml").write_text(
        f"hosts:\n  ns-b:\n    ssh_hostname: {node['ssh_hostname']}\n    ssh_port: {node['ssh_port']}\n"
        f"    ssh_user: {node['ssh_user']}\n    ssh_key: {node['ssh_key']}\n"
        f"    ssh_known_hosts_file: {tmp_path / 'known_hosts'}\n")
    run = node_suite(tmp_path / "run", env={"GPU_BRINGUP_HOSTS": str(tmp_path / "hosts.yml")})
    assert run.rc == 1, run
    assert set(run.results.values()) == {"ERROR"} and run.checks("ns-b") == ALL_CHECKS, run
    assert f"- ns-b all {len(ALL_CHECKS)} checks: cannot run the facts probe: BadHostKeyException" in run.report
