"""The node suite (tests/node) through its real CLI against sandbox nodes: red on the
node found in the incident's state, green for what deploy.py did, red again by name
after a deliberate break, two nodes in one run, a wrong host key refused, and a
testinfra --hosts run over OpenSSH."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inventory.sources import load_hosts
from sandbox import aptrepo
from tests.sandbox_fixtures import DEPLOY_DATA, DEPLOYED as NODE, REPO_ROOT, node_suite, validate

PYTEST = Path(sys.executable).parent / "pytest"

ENV_FILE = "/etc/sglang/sglang.env"
HOME = "/usr/local/cuda-13.0"

DRIVER_CHECKS = {"nvidia_smi_answers", "driver_runs_toolkit"}
CUDA_CHECKS = {"cuda_runs_on_every_gpu", "nvswitch_fabric_completed", "nccl_all_reduce", "p2p_matches_topology"}
# What only passes on the declared stand-in GPUs (gpu_standin, registered by the sandbox).
STANDIN_CHECKS = {"cuda_runs_on_every_gpu", "flashinfer_detects_gpu_arch", "nccl_all_reduce", "p2p_matches_topology"}
TOOLKIT_CHECKS = {"nvcc_reports_plan_version", "nvcc_lists_every_gpu_arch", "toolkit_packages_at_lock"}
RESOLUTION_CHECKS = {"login_shell_resolves_toolkit", "ssh_command_resolves_toolkit", "service_env_resolves_toolkit"}
ENV_FILE_CHECKS = {"service_env_file_owner_and_mode", "service_env_file_matches_plan"}
VENV_CHECKS = {"flashinfer_resolves_toolkit", "flashinfer_target_archs", "flashinfer_detects_gpu_arch",
               "torch_cuda_build", "torch_covers_gpu_sms", "service_entry_point_starts"}
JIT_CHECKS = {"prewarm_manifest_matches", "prewarm_libraries_exist", "prewarm_ninja_no_work",
              "prewarm_sglang_no_compile", "deployed_file_not_world_writable[prewarm-manifest]"}
UNIT_CHECKS = {"service_unit_file", "service_unit_directives", "service_unit_args_accepted", "deep_gemm_args_accepted",
               "service_model_set", "service_serving", "deployed_file_not_world_writable[service-unit]"}
CACHE_CHECKS = {f"service_cache_placed[{variable}]" for variable in (
    "CUDA_CACHE_PATH", "FLASHINFER_WORKSPACE_BASE", "SGLANG_CACHE_DIR", "SGLANG_DG_CACHE_DIR", "SGLANG_JIT_CACHE_DIR",
    "TILELANG_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TVM_FFI_CACHE_DIR", "XDG_CACHE_HOME")}
FILE_CHECKS = {f"deployed_file_not_world_writable[{label}]" for label in
               ("apt-keyring", "apt-source", "apt-pin", "profile", "pam-environment", "service-env-file",
                "service-unit", "prewarm-manifest")}
PERMISSION_CHECKS = {"service_user_reaches_its_paths"}
# The checks that run torch in the venv (venv, SGLang, cuda, comm, SGLang's --verify): 28
# of a run's 49 s. test_deployed_node_is_green runs them; a run about the toolkit, the
# environment or the transport leaves them out.
WITHOUT_TORCH = ("-k", "not test_venv and not test_sglang and not test_cuda and not test_comm "
                       "and not sglang_no_compile")
ALL_CHECKS = (DRIVER_CHECKS | CUDA_CHECKS | TOOLKIT_CHECKS | RESOLUTION_CHECKS | ENV_FILE_CHECKS | VENV_CHECKS
              | JIT_CHECKS | UNIT_CHECKS | CACHE_CHECKS | FILE_CHECKS | PERMISSION_CHECKS)

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def nodes(deployed_node, sandbox_node):
    aptrepo.ensure_served()
    return deployed_node, sandbox_node("ns-b", "127.0.0.72", gpu="rtx-pro-6000-x8", toolkit="incident")


@pytest.fixture(scope="module")
def before(deployed_node):
    """The suite's run on the shared node before deploy.py (tests/sandbox_fixtures.py)."""
    return deployed_node["before_suite"]


def test_incident_node_is_red_by_name(before):
    assert before.rc == 1, before
    assert before.checks(NODE) == ALL_CHECKS, before
    # The operator's env file is there (root 0644), without the plan's keys.
    assert TOOLKIT_CHECKS | RESOLUTION_CHECKS | {"service_env_file_matches_plan"} <= before.failing(NODE), before
    assert not DRIVER_CHECKS & before.failing(NODE), before
    assert before.report.splitlines()[0].split("|")[2].strip() == NODE
    assert f"- {NODE} login_shell_resolves_toolkit: login shell (bash -lc): expected CUDA_HOME=/usr/local/cuda-13.0" \
           in before.report


def test_deployed_node_is_green(deployed_node):
    """Green, with the checks only the stand-in GPUs let pass named as stand-ins: make
    demo's run of the suite, right after its deploy (tests/sandbox_fixtures.py)."""
    after = deployed_node["after_suite"]
    assert after.checks(NODE) == ALL_CHECKS, after
    assert after.failing(NODE) == set(), after
    assert after.rc == 0, after
    assert after.standins(NODE) == STANDIN_CHECKS, after
    ready = next(line for line in after.report.splitlines() if line.startswith("| **ready**"))
    assert f"YES ({len(ALL_CHECKS)} passed, {len(STANDIN_CHECKS)} stand-in)" in ready, after.report
    assert f"- {NODE} cuda_runs_on_every_gpu: CUDA in the venv (torch, as the service user with the service env): " \
           "stand-in (gpu_standin: a recorded nvidia-smi, no device): 8 GPU(s) listed; CUDA does not start: " \
        in after.report


def test_deployed_node_without_the_declaration_fails_as_cuda_cannot_start(nodes, tmp_path):
    """The same deployed node with gpu_standin=false (as a real node without a working
    GPU would be seen): what needs CUDA fails by name, nothing is a stand-in."""
    run = node_suite(tmp_path, "--node-limit", NODE, data=(*DEPLOY_DATA, "gpu_standin=false"))
    assert run.rc == 1, run
    # prewarm_sglang_no_compile: --verify without --no-device needs CUDA, as on a GPU node.
    assert run.failing(NODE) == STANDIN_CHECKS | {"prewarm_sglang_no_compile"}, run
    assert run.standins(NODE) == set() and "Stand-ins" not in run.report, run
    assert ("cuda_runs_on_every_gpu: CUDA in the venv (torch, as the service user with the service env): expected "
            "CUDA to start and run a kernel on each of the 8 GPU(s) nvidia-smi lists; actual CUDA does not start: "
            ) in run.report
    assert "(empty: CUDA does not start)" in run.report


def test_cuda_home_rewritten_fails_by_name(nodes, sandbox_ssh, tmp_path):
    node = nodes[0]
    sandbox_ssh(node, f"cp -p {ENV_FILE} {ENV_FILE}.keep && "
                      f"sed -i 's|^CUDA_HOME=.*|CUDA_HOME=/usr/local/cuda-12.8|' {ENV_FILE}")
    try:
        run = node_suite(tmp_path, "--node-limit", NODE, *WITHOUT_TORCH)
        # validate reads the same file through the probe and says what deploy would reset.
        _, report = validate(NODE)
    finally:
        sandbox_ssh(node, f"mv {ENV_FILE}.keep {ENV_FILE}")
    overridden = [f for f in report["plan"]["findings"] if f["code"] == "SERVICE_ENV_OVERRIDDEN"]
    assert [f["severity"] for f in overridden] == ["fix"], report["plan"]["findings"]
    assert "CUDA_HOME=/usr/local/cuda-12.8" in overridden[0]["message"], overridden
    assert {"service_env_resolves_toolkit", "service_env_file_matches_plan"} <= run.failing(NODE), run
    assert not {"login_shell_resolves_toolkit", "ssh_command_resolves_toolkit"} & run.failing(NODE), run
    assert ("CUDA_HOME=/usr/local/cuda-13.0, first nvcc /usr/local/cuda-13.0/bin/nvcc, release 13.0; "
            "actual CUDA_HOME=/usr/local/cuda-12.8") in run.report
    assert "CUDA_HOME=/usr/local/cuda-12.8 (want /usr/local/cuda-13.0)" in run.report


def test_toolkit_moved_away_fails_by_name(nodes, sandbox_ssh, tmp_path):
    node = nodes[0]
    sandbox_ssh(node, f"mv {HOME} {HOME}.away")
    try:
        run = node_suite(tmp_path, "--node-limit", NODE, *WITHOUT_TORCH)
    finally:
        sandbox_ssh(node, f"mv {HOME}.away {HOME}")
    # dpkg's records still say the locked versions are installed: only the files went.
    on_disk = TOOLKIT_CHECKS - {"toolkit_packages_at_lock"}
    assert on_disk | RESOLUTION_CHECKS <= run.failing(NODE), run
    assert not (ENV_FILE_CHECKS | {"toolkit_packages_at_lock"}) & run.failing(NODE), run
    assert f"{HOME}/bin/nvcc --version: expected release 13.0; actual exit 127" in run.report


def test_two_nodes_in_one_run(nodes, tmp_path):
    run = node_suite(tmp_path, "--node-limit", f"{NODE},ns-*", *WITHOUT_TORCH)
    assert run.hosts() == {NODE, "ns-b"}, run
    header = [cell.strip() for cell in run.report.splitlines()[0].split("|")[1:-1]]
    assert header == ["check", NODE, "ns-b"], run.report
    assert TOOLKIT_CHECKS <= run.failing("ns-b") and not TOOLKIT_CHECKS & run.failing(NODE), run
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


def test_testinfra_hosts_over_openssh(nodes, tmp_path):
    """--hosts keeps testinfra's own backends: ssh:// (OpenSSH) with the node's key and
    known_hosts through an ssh_config; the suite's shipped default settings apply. The
    checks that run torch in the venv (venv, SGLang, cuda, comm, SGLang's --verify: 28 of
    the run's 49 s) are left to test_deployed_node_is_green's run: here the transport and the
    settings, with the checks the settings file decides (WITHOUT_TORCH)."""
    node = nodes[0]
    config = tmp_path / "ssh_config"
    config.write_text(f"Host {NODE}\n    HostName {node['ssh_hostname']}\n    Port {node['ssh_port']}\n"
                      f"    User root\n    IdentityFile {node['ssh_key']}\n    IdentitiesOnly yes\n"
                      f"    UserKnownHostsFile {node['ssh_known_hosts_file']}\n    StrictHostKeyChecking yes\n")
    # The settings an operator keeps beside such a run: the repository mirror (the
    # sandbox's, as inventory/gpu.py gives it) and the deploy's own choices.
    data = dict(load_hosts())[NODE]
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump({
        **{key: data[key] for key in ("cuda_repo_url", "cuda_repo_key_url", "cuda_repo_fingerprint")},
        "prewarm_modules": ["activation:silu", "norm", "sglang-activation"], "service_model": "Qwen/Qwen3-0.6B",
        "service_enable": False, "cuda_toolkit_lock": "tests/fixtures/locks/cuda-13.0.48-debian12-x86_64.txt",
        # The sandbox's declaration of its stand-in GPUs, as it registers it for the node.
        "gpu_standin": data["gpu_standin"]}))
    report = tmp_path / "report.md"
    result = subprocess.run([str(PYTEST), "tests/node", f"--hosts=ssh://{NODE}", f"--ssh-config={config}",
                             f"--node-config={settings}", f"--node-report={report}", "-p", "no:cacheprovider",
                             *WITHOUT_TORCH],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    text = report.read_text()
    assert "| **ready**" in text and "YES" in text, text
    # What the settings file decides: the toolkit lock, the pre-warm's modules, the stand-in GPUs.
    for check in ("toolkit_packages_at_lock", "prewarm_manifest_matches", "nvidia_smi_answers"):
        assert check in text, text
