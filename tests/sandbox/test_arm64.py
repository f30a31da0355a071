"""An arm64 node: a GB10 (DGX Spark class, SM 12.1) on Debian 12 for aarch64, its
programs Debian's arm64 builds run through QEMU (sandbox.cpus). validate plans NVIDIA's
sbsa directory, the aarch64 toolkit and venv locks and 12.1a; deploy's repository,
toolkit and environment steps install the sbsa packages (arm64 nvcc, targets/sbsa-linux)
at the aarch64 toolkit lock; the node suite's driver, toolkit, resolution and service
environment checks pass; the arm64 nvcc compiles a kernel for sm_121a in the service's
environment; a second deploy changes nothing.

Not here: the venv and the pre-warm (torch, FlashInfer's JIT and g++ emulated would take
hours on two cores); the aarch64 venv locks are proved by resolution
(tests/network/test_lock_resolution.py)."""

import subprocess
import sys

import pytest

from sandbox import aptrepo, cpus
from sandbox import node as sandbox_nodes
from tests.sandbox.test_gpu_profiles import sass_targets
from tests.sandbox_fixtures import REPO_ROOT, changed_operations, node_suite, pyinfra_cli, run_ssh, validate

pytestmark = pytest.mark.sandbox

NAME = "arm1"
DATA = ("deploy_steps=repo,toolkit,env",)
TOOLKIT_LOCK = "files/locks/cuda-13.0-debian12-aarch64.txt"
# The node suite's checks of what those three steps bring (docs/node-suite.md: the checks).
CHECKS = ("test_driver or test_toolkit or test_resolution or test_service_env or "
          "(test_deployed_file_not_world_writable and (apt or profile or pam or service-env-file))")
# e_machine of an ELF file (bytes 18-19, little endian): 183 is EM_AARCH64.
ELF_MACHINE = "od -An -j18 -N2 -tu2 {path}"


@pytest.fixture(scope="module")
def node(sandbox_node):
    aptrepo.ensure_served()
    entry = dict(sandbox_node(NAME, "127.0.0.181", gpu="gb10", toolkit="none", machine="aarch64"), name=NAME)
    # Registered (sandbox.cpus), with F: the kernel holds QEMU open for the node's root.
    assert "F" in cpus.handler_flags(cpus.handler("aarch64").read_text())[1]
    yield entry
    sandbox_nodes.down([NAME])


def locked_versions():
    return dict(line.split("=", 1) for line in (REPO_ROOT / TOOLKIT_LOCK).read_text().splitlines()
                if line and not line.startswith("#"))


def test_the_node_runs_arm64_debian(node):
    assert node["arch"] == "arm64"
    facts = run_ssh(node, "uname -m; dpkg --print-architecture; cat /proc/1/comm; "
                          + ELF_MACHINE.format(path="/usr/bin/python3.11")).stdout.split()
    assert facts == ["aarch64", "arm64", "systemd", "183"], facts


def test_validate_plans_sbsa_the_aarch64_locks_and_12_1a(node):
    _, report = validate(NAME, data=DATA)
    assert report["facts"]["os"]["arch"] == "aarch64"
    plan = report["plan"]
    assert not [f for f in plan["findings"] if f["severity"] == "blocker"], plan["findings"]
    assert plan["repo"]["arch"] == "sbsa" and plan["repo"]["url"].endswith("/debian12/sbsa/"), plan["repo"]
    assert plan["arch_list"] == "12.1a"
    assert plan["toolkit"]["lock"] == TOOLKIT_LOCK
    assert set(plan["toolkit"]["pins"]) == {f"{name}={version}" for name, version in locked_versions().items()}
    assert plan["venv"]["lock"] == "files/locks/sglang-0.5.23-cp311-aarch64.txt"
    assert plan["venv"]["uv_lock"] == "files/locks/uv-cp311-aarch64.txt"


def test_deploy_installs_the_sbsa_toolkit_at_its_lock(node, tmp_path):
    deployed = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA)
    assert deployed.returncode == 0, deployed.output[-4000:]
    listed = run_ssh(node, "dpkg-query -W -f '${Package} ${Version} ${Architecture}\\n' "
                           + " ".join(locked_versions())).stdout.split("\n")
    installed = {name: (version, arch) for name, version, arch in (line.split() for line in listed if line)}
    assert {name: version for name, (version, _) in installed.items()} == locked_versions()
    assert {arch for name, (_, arch) in installed.items() if not name.endswith("config-common")} == {"arm64"}
    home = "/usr/local/cuda-13.0"
    assert run_ssh(node, ELF_MACHINE.format(path=f"{home}/bin/nvcc")).stdout.split() == ["183"]
    assert run_ssh(node, f"readlink {home}/include; test -f {home}/targets/sbsa-linux/include/cuda_runtime.h"
                   ).stdout.strip() == "targets/sbsa-linux/include"
    sources = run_ssh(node, "cat /etc/apt/sources.list.d/nvidia-cuda.sources").stdout
    assert "/debian12/sbsa/" in sources, sources

    run = node_suite(tmp_path, "--node-limit", NAME, "-k", CHECKS, data=DATA)
    assert run.rc == 0 and run.failing(NAME) == set(), run
    assert {"nvcc_reports_plan_version", "nvcc_lists_every_gpu_arch", "toolkit_packages_at_lock",
            "service_env_resolves_toolkit", "service_env_file_matches_plan"} <= run.checks(NAME), run.checks(NAME)


def test_the_arm64_nvcc_builds_sm_121a_in_the_service_environment(node, tmp_path):
    assert sass_targets(node, tmp_path) == {"sm_121a"}


def test_a_second_deploy_changes_nothing(node):
    again = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA, json_output=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert changed_operations(again) == []


def test_states_are_refused_on_arm64_before_anything_is_built():
    refused = subprocess.run([sys.executable, "-m", "sandbox", "up", "arm-states", "--addr", "127.0.0.182",
                              "--gpu", "gb10", "--arch", "arm64", "--state", "incident"],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.strip() == ("sandbox: error: --state incident is built for amd64 nodes only; "
                                      "start the arm64 node without --state"), refused.stderr
