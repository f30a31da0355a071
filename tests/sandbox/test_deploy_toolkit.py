"""deploy.py's toolkit and environment tasks on a sandbox node in the incident's state,
through the real pyinfra CLI over SSH, with the toolkit from the signed local repo."""

import json
import subprocess
from pathlib import Path

import pytest

from sandbox import aptrepo, node as sandbox_nodes
from tests.sandbox_fixtures import PYINFRA, pyinfra_cli, ssh_command, validate

ROOT = Path(__file__).resolve().parents[2]
HOME = "/usr/local/cuda-13.0"
TOOLKIT_CODES = {"TOOLKIT_MISSING", "TOOLKIT_TORCH_MISMATCH", "CUDA_HOME_NOT_EXPLICIT", "FLASHINFER_ARCH_TRAP",
                 "PATH_SHADOWS_CUDA_HOME", "CUDA_SYMLINK_DRIFT"}
# Runs the service's environment file the way systemd does (literal KEY=value lines).
SERVICE_ENV = ("env -i sh -c 'while IFS= read -r l; do case $l in \"#\"*|\"\") ;; *) export \"$l\";; esac; "
               "done < /etc/sglang/sglang.env; {}'")

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def apt_repo():
    return aptrepo.ensure_served()


def deploy(host, json_output=False):
    return pyinfra_cli("inventory/gpu.py", "--limit", host, "deploy.py", json_output=json_output)


def codes(document):
    return {(f["code"], f["severity"]) for f in document["plan"]["findings"]}


def findings(host):
    return codes(validate(host)[1])


def changed_operations(result):
    operations = json.loads(result.stdout)["results"]["operations"]
    return [op["name"] for op in operations if op["success"] or op["error"]]


@pytest.fixture(scope="module")
def deployed(deployed_node):
    return deployed_node, codes(deployed_node["before"])


def test_incident_is_found_before(deployed):
    _, before = deployed
    assert {("TOOLKIT_TORCH_MISMATCH", "fix"), ("FLASHINFER_ARCH_TRAP", "fix"),
            ("PATH_SHADOWS_CUDA_HOME", "fix"), ("CUDA_SYMLINK_DRIFT", "fix")} <= before


def test_login_shell_resolves_13_0(deployed, sandbox_ssh):
    entry, _ = deployed
    out = sandbox_ssh(entry, "command -v nvcc; nvcc --version; echo CUDA_HOME=$CUDA_HOME", login=True).stdout
    assert out.startswith(f"{HOME}/bin/nvcc\n") and "release 13.0," in out and f"CUDA_HOME={HOME}" in out


def test_non_interactive_ssh_resolves_13_0(deployed, sandbox_ssh):
    entry, _ = deployed
    out = sandbox_ssh(entry, "command -v nvcc; nvcc --version; echo CUDA_HOME=$CUDA_HOME").stdout
    assert out.startswith(f"{HOME}/bin/nvcc\n") and "release 13.0," in out and f"CUDA_HOME={HOME}" in out


def test_service_environment_resolves_13_0(deployed, sandbox_ssh):
    entry, _ = deployed
    out = sandbox_ssh(entry, SERVICE_ENV.format('command -v nvcc; "$CUDA_HOME/bin/nvcc" --version; '
                                                'echo "$FLASHINFER_CUDA_ARCH_LIST"')).stdout
    assert out.startswith(f"{HOME}/bin/nvcc\n") and "release 13.0," in out and out.rstrip().endswith("12.0f")


def test_other_toolkit_stays_and_the_link_moves(deployed, sandbox_ssh):
    entry, _ = deployed
    out = sandbox_ssh(entry, "/usr/local/cuda-12.8/bin/nvcc --version; readlink -f /usr/local/cuda").stdout
    assert "release 12.8," in out and out.rstrip().endswith(HOME)


def test_files_are_root_owned_and_not_world_writable(deployed, sandbox_ssh):
    entry, _ = deployed
    paths = ("/etc/apt/keyrings/nvidia-cuda.gpg /etc/apt/sources.list.d/nvidia-cuda.sources "
             "/etc/apt/preferences.d/nvidia-cuda /etc/profile.d/zz-cuda-home.sh /etc/sglang/sglang.env")
    out = sandbox_ssh(entry, f"stat -c '%n %U:%G %a' {paths}").stdout.splitlines()
    assert all(line.endswith(" root:root 644") for line in out), out


def test_apt_source_is_signed_and_pinned(deployed, sandbox_ssh, apt_repo):
    entry, _ = deployed
    out = sandbox_ssh(entry, "cat /etc/apt/sources.list.d/nvidia-cuda.sources; apt-cache policy cuda-nvcc-13-0;"
                             " grep -rh trusted /etc/apt/sources.list.d/ || true").stdout
    assert "Signed-By: /etc/apt/keyrings/nvidia-cuda.gpg" in out and "trusted" not in out
    assert "*** 13.0.88-1 600" in out


def test_validate_after_deploy_has_no_toolkit_fix(deployed):
    after = findings(deployed[0]["name"])
    assert not {(code, severity) for code, severity in after if code in TOOLKIT_CODES and severity in ("fix", "blocker")}


def test_second_deploy_changes_nothing(deployed):
    result = deploy(deployed[0]["name"], json_output=True)
    assert result.returncode == 0, result.output
    assert changed_operations(result) == []


def test_dry_run_shows_changes_and_changes_nothing(apt_repo, sandbox_node, sandbox_ssh):
    entry = sandbox_node("dep-dry", "127.0.0.52", gpu="rtx-pro-6000-x8", toolkit="incident")
    result = subprocess.run([PYINFRA, "inventory/gpu.py", "--limit", "dep-dry", "--dry", "deploy.py"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Detected changes" in output and "Install CUDA 13.0 compiler and JIT headers" in output
    after = sandbox_ssh(entry, f"ls {HOME} /etc/apt/sources.list.d/nvidia-cuda.sources 2>&1 || true").stdout
    assert after.count("No such file or directory") == 2


def test_blocked_host_is_not_touched(apt_repo, sandbox_node, sandbox_ssh):
    entry = sandbox_node("dep-blocked", "127.0.0.53", gpu="driver-failed", toolkit="incident")
    result = deploy("dep-blocked")
    assert result.returncode == 1
    assert "deploy refused, nothing changed: 1 blocker(s): DRIVER_NOT_LOADED" in result.output
    after = sandbox_ssh(entry, "ls /etc/apt/sources.list.d/ /etc/profile.d/").stdout
    assert "nvidia-cuda" not in after and "zz-cuda-home" not in after


def test_deploy_killed_in_the_apt_step_converges(apt_repo, sandbox_node, sandbox_ssh):
    entry = sandbox_node("dep-killed", "127.0.0.54", gpu="rtx-pro-6000-x8", toolkit="incident")
    # On the node: wait for dpkg to start unpacking, then kill it and apt, as a crash would.
    killer = subprocess.Popen(
        ssh_command(entry,
                    "for i in $(seq 3000); do if pgrep -x dpkg >/dev/null && ls /usr/local/cuda-13.0 >/dev/null 2>&1; "
                    "then pkill -9 -x dpkg; pkill -9 -x apt-get; echo killed; exit 0; fi; sleep 0.01; done; exit 1"),
        stdout=subprocess.PIPE, text=True)
    first = deploy("dep-killed")
    assert killer.wait(timeout=60) == 0 and killer.stdout.read().strip() == "killed"
    assert first.returncode == 1, first.output
    second = deploy("dep-killed")
    assert second.returncode == 0, second.output
    out = sandbox_ssh(entry, "dpkg --audit; nvcc --version").stdout
    assert "release 13.0," in out and "not" not in out.split("nvcc:")[0]
    assert not {code for code, severity in findings("dep-killed") if code in TOOLKIT_CODES and severity == "fix"}
    assert changed_operations(deploy("dep-killed", json_output=True)) == []
    # Its venv and JIT cache take gigabytes: free them before the next suite.
    sandbox_nodes.down(["dep-killed"])
