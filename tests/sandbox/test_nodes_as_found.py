"""Nodes as they are found (docs/nodes-as-found.md), on sandbox nodes started in field
states: NVIDIA's own apt source adopted, never doubled; the incident's trap shown with
FlashInfer's own code before deploy and gone after; an external hand-built venv used
without changing a file of it; the operator's marks kept; a deploy killed in the
repository step leaves apt working."""

import json
import shlex
import subprocess
import time

import pytest

from sandbox import aptrepo, pypimirror
from sandbox import node as sandbox_nodes
from tests.sandbox_fixtures import (DEPLOYED, PYINFRA, REPO_ROOT, changed_operations, pyinfra_cli, run_ssh, ssh_command,
                                   validate)

pytestmark = pytest.mark.sandbox

NVIDIA_LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
HANDBUILT = "/opt/venv_sglang211"
# FlashInfer's own arch detection and its first JIT spec, in the service's real
# environment (a transient systemd unit with the service's env file when there is
# one). No GPU here: torch is told what the driver stand-in reports, 8x SM 12.0.
TRAP_CHECK = r"""
import json, torch
torch.cuda.device_count = lambda: 8
torch.cuda.get_device_capability = lambda device=None: (12, 0)
from flashinfer.compilation_context import CompilationContext
out = {"archs": sorted(f"{major}.{minor}" for major, minor in CompilationContext().TARGET_CUDA_ARCHS)}
try:
    from flashinfer.jit.sampling import gen_sampling_module
    gen_sampling_module()
    out["spec"] = "ok"
except Exception as error:
    out["spec"] = f"{type(error).__name__}: {error}"
print("@@trap " + json.dumps(out))
"""


def trap_check(entry, python=f"{HANDBUILT}/bin/python", env_file=None):
    """FlashInfer's answer under the service's environment (systemd-run, as systemd
    would start the service), with the env file when given."""
    properties = f"--property=EnvironmentFile={env_file} " if env_file else ""
    command = (f"systemd-run --quiet --wait --pipe --collect --service-type=exec {properties}"
               f"-- {python} -c {shlex.quote(TRAP_CHECK)} 2>&1 </dev/null")
    out = run_ssh(entry, command, check=False).stdout
    line = next((line for line in out.splitlines() if line.startswith("@@trap ")), None)
    assert line, out[-3000:]
    return json.loads(line[len("@@trap "):]), out


def deploy(host, *data):
    return pyinfra_cli("inventory/gpu.py", "--limit", host, "deploy.py", data=data)


def codes(report):
    return {(f["code"], f["severity"]) for f in report["plan"]["findings"]}


# -- the shared deployed node (tests/sandbox_fixtures.py: incident, operator and
#    distro-cuda states, deployed with a managed venv)

def test_nvidia_source_is_adopted_and_never_doubled(deployed_node):
    before = deployed_node["before"]
    adopted = [f for f in before["plan"]["findings"] if f["code"] == "APT_SOURCE_CONFLICT"]
    assert [f["severity"] for f in adopted] == ["info"] and NVIDIA_LIST in adopted[0]["message"]
    out = run_ssh(deployed_node, f"grep -rl '{before['plan']['repo']['url']}' /etc/apt/sources.list "
                                 "/etc/apt/sources.list.d/; apt-get update >/dev/null 2>&1; echo update=$?").stdout
    assert out.split() == [NVIDIA_LIST, "update=0"], out


def test_operators_marks_survive(deployed_node):
    out = run_ssh(deployed_node, "grep -c -e '^HF_TOKEN=hf_sandbox_not_a_secret$' -e '^NCCL_DEBUG=INFO$' "
                                 "-e '^NCCL_IB_DISABLE=1$' /etc/sglang/sglang.env; "
                                 "sed -n 's/^PATH=//p' /etc/environment").stdout.splitlines()
    assert out[0] == "3", out
    path = out[1].strip('"').split(":")
    assert path[0] == "/usr/local/cuda-13.0/bin" and "/snap/bin" in path and "/usr/games" in path, out
    rollback = deployed_node["rollback"]
    assert rollback[0].startswith("adopted-") and "HANDBUILT" in rollback[1:], \
        f"the hand-built venv found at venv_path is not the rollback: {rollback}"


def test_debians_own_toolkit_stays(deployed_node):
    out = run_ssh(deployed_node, "dpkg-query -W -f '${Status}' nvidia-cuda-toolkit; echo; /usr/bin/nvcc --version").stdout
    assert out.startswith("install ok installed") and "release 11.8," in out


def test_a_second_deploy_of_a_found_node_changes_nothing(deployed_node):
    result = pyinfra_cli("--json", "inventory/gpu.py", "--limit", DEPLOYED, "deploy.py", json_output=True)
    assert result.returncode == 0, result.output[-3000:]
    changed = changed_operations(result)
    assert changed == []


# -- the incident's node: the trap with FlashInfer's own code, and the external venv

@pytest.fixture(scope="module")
def incident(sandbox_node):
    aptrepo.ensure_served()
    pypimirror.serve()
    entry = sandbox_node("found-incident", "127.0.0.63", toolkit="none", states=("incident",))
    return dict(entry, name="found-incident")


EXTERNAL = ("venv_managed=false", f"venv_path={HANDBUILT}", "prewarm_modules=activation:silu")


def venv_listing(entry):
    """Every entry of the hand-built venv with its mode, owner, size, inode and inode change time:
    any write, chmod, chown, rename or replacement moves the ctime, which no tool sets back
    (hashing the gigabytes of its files twice took a core for tens of seconds)."""
    return run_ssh(entry, f"find {HANDBUILT} -printf '%p %m %U %s %i %C@\\n' | sort | sha256sum").stdout


def test_incident_trap_with_flashinfers_own_code_then_gone(incident):
    found, out = trap_check(incident)
    assert found["archs"] == [], out
    assert found["spec"].startswith("RuntimeError: FlashInfer requires GPUs with sm75 or higher"), out
    assert "SM 12.x requires CUDA >= 12.9" in out
    listing = venv_listing(incident)
    _, report = validate("found-incident", data=EXTERNAL)
    assert report["facts"]["flashinfer"] == {"version": "0.7.0"}
    assert ("FLASHINFER_ARCH_TRAP", "fix") in codes(report)
    result = deploy("found-incident", *EXTERNAL)
    assert result.returncode == 0, result.output[-4000:]
    found, out = trap_check(incident, env_file="/etc/sglang/sglang.env")
    assert found == {"archs": ["12.0f"], "spec": "ok"}, out
    # The external venv: pre-warmed into as the service runs it, not a file of it changed.
    manifest = json.loads(run_ssh(incident, "cat /var/cache/sglang/prewarm/manifest.json").stdout)
    assert manifest["flashinfer"] == "0.7.0" and manifest["arch_list"] == "12.0f"
    for module in manifest["modules"]:
        out = run_ssh(incident, f"runuser -u sglang -- env PATH={HANDBUILT}/bin:/usr/bin:/bin "
                                f"ninja -n -C {module['dir']}").stdout
        assert "ninja: no work to do." in out, out
    assert venv_listing(incident) == listing
    _, after = validate("found-incident", data=EXTERNAL)
    assert not [f for f in after["plan"]["findings"] if f["severity"] in ("fix", "blocker")], after["plan"]["findings"]


def test_a_venv_the_service_user_cannot_read_is_found_first(incident):
    run_ssh(incident, f"chmod 0700 {HANDBUILT}")
    try:
        result, report = validate("found-incident", expect_rc=1, data=EXTERNAL)
    finally:
        run_ssh(incident, f"chmod 0755 {HANDBUILT}")
    blockers = [f for f in report["plan"]["findings"] if f["severity"] == "blocker"]
    assert [f["code"] for f in blockers] == ["VENV_UNREADABLE"]
    assert f"{HANDBUILT} (owner root, mode 700) keeps the service user sglang out" in blockers[0]["message"]


# -- Debian's own toolkit: the trap with it, gone after the toolkit and environment

def test_distro_cuda_trap_then_gone(sandbox_node):
    entry = dict(sandbox_node("found-distro", "127.0.0.64", toolkit="none", states=("distro-cuda", "handbuilt-venv")),
                 name="found-distro")
    found, out = trap_check(entry)
    assert found["archs"] == [] and "FlashInfer requires GPUs with sm75 or higher" in found["spec"], out
    result = deploy("found-distro", "deploy_steps=repo,toolkit,env")
    assert result.returncode == 0, result.output[-4000:]
    found, out = trap_check(entry, env_file="/etc/sglang/sglang.env")
    assert found == {"archs": ["12.0f"], "spec": "ok"}, out
    sandbox_nodes.down(["found-distro"])


# -- a deploy killed in the repository step: apt reads its sources at every point

def test_killed_in_the_repository_step_apt_still_works(sandbox_node):
    entry = dict(sandbox_node("found-killed", "127.0.0.65", toolkit="none", states=("nvidia-repo",)), name="found-killed")
    # NVIDIA's source with a keyring of another key: deploy must replace it (disable,
    # key, source), the path with the most steps to be killed in.
    run_ssh(entry, "cp /usr/share/keyrings/debian-archive-keyring.gpg /usr/share/keyrings/cuda-archive-keyring.gpg")
    for pattern in ("disabled-by-gpu-bringup", "keyrings/nvidia-cuda.gpg", "nvidia-cuda.sources"):
        watcher = subprocess.Popen(ssh_command(entry, f"for i in $(seq 3000); do "
                                                      f"if ls /etc/apt/sources.list.d/ /etc/apt/keyrings/ 2>/dev/null | "
                                                      f"grep -q '{pattern.split('/')[-1]}'; then echo seen; exit 0; fi; "
                                                      f"sleep 0.01; done"), stdout=subprocess.PIPE, text=True)
        process = subprocess.Popen(pyinfra_cli_argv("found-killed", "deploy_steps=repo"), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        watcher.wait(timeout=300)
        process.kill()
        process.wait()
        time.sleep(1)
        assert run_ssh(entry, "apt-get update >/dev/null 2>&1; echo $?").stdout.strip() == "0", pattern
        run_ssh(entry, "rm -f /etc/apt/keyrings/nvidia-cuda.gpg /etc/apt/sources.list.d/nvidia-cuda.sources; "
                       f"mv {NVIDIA_LIST}.disabled-by-gpu-bringup {NVIDIA_LIST} 2>/dev/null; true")
    assert deploy("found-killed", "deploy_steps=repo,toolkit").returncode == 0
    out = run_ssh(entry, "ls /etc/apt/sources.list.d/; apt-get update >/dev/null 2>&1; echo update=$?").stdout.split()
    assert out == ["cuda-debian12-x86_64.list.disabled-by-gpu-bringup", "nvidia-cuda.sources", "update=0"], out
    sandbox_nodes.down(["found-killed"])


def pyinfra_cli_argv(host, *data):
    settings = [arg for item in data for arg in ("--data", item)]
    return ["/bin/sh", "-c", f"cd {REPO_ROOT} && exec {PYINFRA} -y {' '.join(settings)} inventory/gpu.py "
                             f"--limit {host} deploy.py"]
