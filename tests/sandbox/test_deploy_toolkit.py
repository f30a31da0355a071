"""deploy.py's repository, toolkit and environment tasks on the shared node found in the
incident's state (NVIDIA's apt source, CUDA 12.8 by apt, Debian's toolkit, the
operator's marks), through the real pyinfra CLI over SSH, with the toolkit from the
signed local repository; and on light nodes: --dry, a refused host, a killed apt run."""

import functools
import subprocess
from pathlib import Path

import pytest

from sandbox import aptrepo, node as sandbox_nodes
from tests.sandbox_fixtures import (DEPLOY_DATA, PYINFRA, changed_operations, pyinfra_cli, said_for, ssh_command,
                                    validate)

ROOT = Path(__file__).resolve().parents[2]
HOME = "/usr/local/cuda-13.0"
TOOLKIT_CODES = {"TOOLKIT_MISSING", "TOOLKIT_TORCH_MISMATCH", "CUDA_HOME_NOT_EXPLICIT", "FLASHINFER_ARCH_TRAP",
                 "PATH_SHADOWS_CUDA_HOME", "CUDA_SYMLINK_DRIFT"}
# The service's environment, as systemd makes it: a transient unit with the env file.
SERVICE_ENV = "systemd-run --quiet --wait --pipe --collect --property=EnvironmentFile=/etc/sglang/sglang.env -- sh -c '{}'"
NVIDIA_LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
NVIDIA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
LIGHT = ("deploy_steps=repo,toolkit,env",)

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def apt_repo():
    return aptrepo.ensure_served()


def deploy(host, json_output=False, data=DEPLOY_DATA):
    return pyinfra_cli("inventory/gpu.py", "--limit", host, "deploy.py", json_output=json_output, data=data)


def codes(document):
    return {(f["code"], f["severity"]) for f in document["plan"]["findings"]}


def findings(host, data=DEPLOY_DATA):
    return codes(validate(host, data=data)[1])


@pytest.fixture(scope="module")
def deployed(deployed_node):
    return deployed_node, codes(deployed_node["before"])


def test_incident_is_found_before(deployed):
    _, before = deployed
    assert {("TOOLKIT_TORCH_MISMATCH", "fix"), ("FLASHINFER_ARCH_TRAP", "fix"), ("PATH_SHADOWS_CUDA_HOME", "fix"),
            ("CUDA_SYMLINK_DRIFT", "fix"), ("OTHER_TOOLKITS", "info"), ("APT_SOURCE_CONFLICT", "info"),
            ("TOOLKIT_MISSING", "fix"), ("JIT_CACHE_COLD", "fix")} <= before


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
    out = sandbox_ssh(entry, "/usr/local/cuda-12.8/bin/nvcc --version; /usr/bin/nvcc --version; "
                             "readlink -f /usr/local/cuda").stdout
    assert "release 12.8," in out and "release 11.8," in out and out.rstrip().endswith(HOME)


def test_files_are_root_owned_and_not_world_writable(deployed, sandbox_ssh):
    entry, _ = deployed
    paths = (f"{NVIDIA_KEYRING} {NVIDIA_LIST} "
             "/etc/apt/preferences.d/nvidia-cuda /etc/profile.d/zz-cuda-home.sh /etc/sglang/sglang.env")
    out = sandbox_ssh(entry, f"stat -c '%n %U:%G %a' {paths}").stdout.splitlines()
    # The service env file holds the operator's secrets: root's, read by the service's group only.
    assert all(line.endswith(" root:sglang 640" if line.startswith("/etc/sglang/") else " root:root 644")
               for line in out), out


def test_apt_source_is_signed_and_pinned(deployed, sandbox_ssh, apt_repo):
    """NVIDIA's own source was adopted (its keyring holds the pinned key): no second source."""
    entry, _ = deployed
    out = sandbox_ssh(entry, f"cat {NVIDIA_LIST}; ls /etc/apt/sources.list.d/ /etc/apt/keyrings/; "
                             "apt-cache policy cuda-nvcc-13-0; grep -rh trusted /etc/apt/sources.list.d/ || true").stdout
    assert f"deb [signed-by={NVIDIA_KEYRING}] " in out and "trusted" not in out
    assert "nvidia-cuda.sources" not in out and "nvidia-cuda.gpg" not in out
    assert "*** 13.0.48-1 990" in out


def test_validate_after_deploy_has_no_toolkit_fix(deployed):
    after = findings(deployed[0]["name"])
    assert not {(code, severity) for code, severity in after if code in TOOLKIT_CODES and severity in ("fix", "blocker")}


def test_second_deploy_changes_nothing(deployed):
    result = deploy(deployed[0]["name"], json_output=True)
    assert result.returncode == 0, result.output
    assert changed_operations(result) == []


@pytest.fixture(scope="module")
def bare_node(apt_repo, sandbox_node):
    """A light node with no CUDA 13.0 (CUDA 12.8 by apt): the --dry run first, then the refused lock."""
    return sandbox_node("dep-dry", "127.0.0.52", gpu="rtx-pro-6000-x8", toolkit="none", states=("cuda-12.8",))


def test_dry_run_shows_changes_and_changes_nothing(bare_node, sandbox_ssh):
    entry = bare_node
    result = subprocess.run([PYINFRA, "inventory/gpu.py", "--limit", "dep-dry", "--dry", "deploy.py"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Detected changes" in output and "Install CUDA 13.0 compiler and JIT headers" in output
    after = sandbox_ssh(entry, f"ls {HOME} /etc/apt/sources.list.d/nvidia-cuda.sources 2>&1 || true").stdout
    assert after.count("No such file or directory") == 2


def test_a_lock_line_the_repository_lacks_is_refused_before_any_install(bare_node, sandbox_ssh, tmp_path):
    """A toolkit lock resolved against another index (one line the repository does not
    serve): deploy fails the host right after the repository step, naming the lock, the
    line and the command that resolves the locks, and installs no package."""
    shipped = (ROOT / "files/locks/cuda-13.0-debian12-x86_64.txt").read_text()
    lock = tmp_path / "cuda-13.0-debian12-x86_64.txt"
    lock.write_text(shipped.replace("cuda-nvcc-13-0=13.0.88-1", "cuda-nvcc-13-0=13.0.999-1"))
    assert lock.read_text() != shipped
    before = sandbox_ssh(bare_node, "dpkg-query -W -f '${Package}=${Version}\\n' | sort").stdout
    result = pyinfra_cli("inventory/gpu.py", "--limit", "dep-dry", "deploy.py",
                         data=(*LIGHT, f"cuda_toolkit_lock={lock}"))
    assert result.returncode == 1, result.output
    refusal = [line.strip() for line in result.output.splitlines() if "does not serve what the locks pin" in line]
    # pyinfra's line for the host, then the fleet summary's, which names the step.
    assert len(refusal) == 2 and said_for("dep-dry", "dep-dry: ", refusal[0]), result.output
    assert refusal[1].startswith("dep-dry: failed: Locked packages served | "), result.output
    assert f"({lock}: cuda-nvcc-13-0=13.0.999-1)" in refusal[0] and "no package was installed" in refusal[0]
    assert "make lock-cuda lock-driver CUDA_REPO_URL=http://" in refusal[0]
    assert "Traceback" not in result.output
    after = sandbox_ssh(bare_node, "dpkg-query -W -f '${Package}=${Version}\\n' | sort").stdout
    assert after == before
    # The node's lists now hold the repository: validate says the same before any deploy.
    document = validate("dep-dry", data=(*LIGHT, f"cuda_toolkit_lock={lock}"))[1]
    [served] = [f for f in document["plan"]["findings"] if f["code"] == "LOCK_NOT_SERVED"]
    assert served["severity"] == "warning" and f"({lock}: cuda-nvcc-13-0=13.0.999-1)" in served["message"]


def test_blocked_host_is_not_touched(apt_repo, sandbox_node, sandbox_ssh):
    entry = sandbox_node("dep-blocked", "127.0.0.53", gpu="driver-failed", toolkit="none", states=("cuda-12.8",))
    result = deploy("dep-blocked")
    assert result.returncode == 1
    assert "deploy refused, nothing changed: 1 blocker(s): DRIVER_NOT_LOADED" in result.output
    after = sandbox_ssh(entry, "ls /etc/apt/sources.list.d/ /etc/apt/preferences.d/ /etc/profile.d/").stdout
    assert "nvidia-cuda" not in after and "zz-cuda-home" not in after


def test_deploy_killed_in_the_apt_step_converges(apt_repo, sandbox_node, sandbox_ssh):
    entry = sandbox_node("dep-killed", "127.0.0.54", gpu="rtx-pro-6000-x8", toolkit="incident")
    deploy = functools.partial(pyinfra_cli, "inventory/gpu.py", "--limit", "dep-killed", "deploy.py", data=LIGHT)
    # On the node: wait for dpkg to start unpacking, then kill it and apt, as a crash would.
    killer = subprocess.Popen(
        ssh_command(entry,
                    "for i in $(seq 3000); do if pgrep -x dpkg >/dev/null && ls /usr/local/cuda-13.0 >/dev/null 2>&1; "
                    "then pkill -9 -x dpkg; pkill -9 -x apt-get; echo killed; exit 0; fi; sleep 0.01; done; exit 1"),
        stdout=subprocess.PIPE, text=True)
    first = deploy()
    assert killer.wait(timeout=60) == 0 and killer.stdout.read().strip() == "killed"
    assert first.returncode == 1, first.output
    second = deploy()
    assert second.returncode == 0, second.output
    out = sandbox_ssh(entry, "dpkg --audit; nvcc --version").stdout
    assert "release 13.0," in out and "not" not in out.split("nvcc:")[0]
    assert not {code for code, severity in findings("dep-killed", LIGHT)
                if code in TOOLKIT_CODES and severity == "fix"}
    assert changed_operations(deploy(json_output=True)) == []
    sandbox_nodes.down(["dep-killed"])
