"""Drift after deploy: what commonly moves toolkits does not move the service. On the
shared deployed node (locked to CUDA 13.0's GA release while the repository also
serves update 2): another toolkit selected for /usr/local/cuda, `apt-get upgrade` and
`apt-get autoremove` leave the node suite's service and FlashInfer checks green, and
validate says what moved. Then the lock is moved on purpose, and back."""

import pytest

from tests.sandbox_fixtures import DEPLOY_DATA, DEPLOYED, node_suite, pyinfra_cli, run_ssh, validate

pytestmark = pytest.mark.sandbox

SERVICE_AND_FLASHINFER = {"service_env_resolves_toolkit", "service_env_file_matches_plan",
                          "flashinfer_resolves_toolkit", "flashinfer_target_archs", "flashinfer_detects_gpu_arch",
                          "prewarm_manifest_matches", "prewarm_ninja_no_work", "prewarm_sglang_no_compile"}


def toolkit_versions(node):
    """The installed versions of nvcc and cudart, in that order (dpkg-query lists in its
    database's order, not the arguments')."""
    out = run_ssh(node, "dpkg-query -W -f '${Package}=${Version}\\n' cuda-nvcc-13-0 cuda-cudart-13-0").stdout
    installed = dict(line.split("=", 1) for line in out.split())
    return [installed.get("cuda-nvcc-13-0"), installed.get("cuda-cudart-13-0")]


def test_the_locked_patch_release_is_installed_while_a_newer_one_is_served(deployed_node):
    assert toolkit_versions(deployed_node) == ["13.0.48-1", "13.0.48-1"]
    policy = run_ssh(deployed_node, "apt-cache policy cuda-nvcc-13-0").stdout
    assert "13.0.88-1 600" in policy and "*** 13.0.48-1 990" in policy, policy


def test_what_moves_toolkits_does_not_move_the_service(deployed_node, tmp_path):
    run_ssh(deployed_node, """
        export DEBIAN_FRONTEND=noninteractive
        update-alternatives --set cuda /usr/local/cuda-12.8 >/dev/null
        apt-get update -qq && apt-get upgrade -y -qq >/dev/null && apt-get autoremove -y -qq >/dev/null""", timeout=600)
    assert toolkit_versions(deployed_node) == ["13.0.48-1", "13.0.48-1"], "apt-get upgrade moved the held toolkit"
    assert run_ssh(deployed_node, "readlink -f /usr/local/cuda").stdout.strip() == "/usr/local/cuda-12.8"
    # The suite's files that hold those checks (not CUDA's, NCCL's or SGLang's arguments').
    run = node_suite(tmp_path, "--node-limit", DEPLOYED, "-k", "test_service_env or test_resolution or test_venv "
                                                               "or test_jit_cache or test_toolkit")
    assert SERVICE_AND_FLASHINFER | {"toolkit_packages_at_lock"} <= run.checks(DEPLOYED), run
    assert not (SERVICE_AND_FLASHINFER | {"toolkit_packages_at_lock"}) & run.failing(DEPLOYED), run
    _, report = validate(DEPLOYED)
    moved = {(f["code"], f["severity"]) for f in report["plan"]["findings"]}
    assert ("CUDA_SYMLINK_DRIFT", "fix") in moved
    assert not {code for code, severity in moved if severity in ("fix", "blocker")} - {"CUDA_SYMLINK_DRIFT"}, moved
    assert pyinfra_cli("inventory/gpu.py", "--limit", DEPLOYED, "deploy.py").returncode == 0
    assert run_ssh(deployed_node, "readlink -f /usr/local/cuda").stdout.strip() == "/usr/local/cuda-13.0"


def test_the_lock_moves_the_toolkit_on_purpose_and_back(deployed_node, tmp_path):
    """Validate and the node suite report a node whose toolkit differs from the lock
    (here the shipped lock, update 2); deploy brings it there and pre-warms SGLang's
    modules again (their cache key holds nvcc's version); the fixture's lock brings it
    back."""
    shipped = tuple(item for item in DEPLOY_DATA if not item.startswith("cuda_toolkit_lock=")) + (
        "cuda_toolkit_lock=files/locks/cuda-13.0-debian12-x86_64.txt",)
    _, report = validate(DEPLOYED, data=shipped)
    drift = [f for f in report["plan"]["findings"] if f["code"] == "TOOLKIT_LOCK_DRIFT"]
    assert drift and "cuda-nvcc-13-0 13.0.48-1 (lock 13.0.88-1)" in drift[0]["message"], report["plan"]["findings"]
    run = node_suite(tmp_path / "drifted", "--node-limit", DEPLOYED, data=shipped)
    assert run.failing(DEPLOYED) == {"toolkit_packages_at_lock"}, run
    assert "cuda-nvcc-13-0 13.0.48-1" in run.report, run.report
    try:
        moved = pyinfra_cli("inventory/gpu.py", "--limit", DEPLOYED, "deploy.py", data=shipped)
        assert moved.returncode == 0, moved.output[-3000:]
        assert toolkit_versions(deployed_node) == ["13.0.88-1", "13.0.96-1"]
        assert "built with another toolchain" in moved.output, "the pre-warm did not follow the toolkit"
        run = node_suite(tmp_path / "moved", "--node-limit", DEPLOYED, data=shipped)
        assert run.rc == 0 and run.failing(DEPLOYED) == set(), run
    finally:
        # Back to the fixture's lock whatever failed: the suites after this one share the node.
        back = pyinfra_cli("inventory/gpu.py", "--limit", DEPLOYED, "deploy.py")
    assert back.returncode == 0, back.output[-3000:]
    assert toolkit_versions(deployed_node) == ["13.0.48-1", "13.0.48-1"]
