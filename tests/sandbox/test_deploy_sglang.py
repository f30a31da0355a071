"""The SGLang venv, the FlashInfer JIT pre-warm and the service unit, deployed by the
real pyinfra CLI over SSH onto a sandbox node in the incident's state.

CI pre-warms a reduced module set (activation:silu, norm, sglang-activation) at the real pins; `make demo`
pre-warms the full default set.
"""

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.version import Version

from bringup.torch_builds import ARCH_LIST_FOR_TORCH_CUDA
from tests.sandbox_fixtures import (DEPLOY_DATA, FAKE_SGLANG_DROP_IN, FAKE_SGLANG_PATH, changed_operations, said_for,
                                    plant_fake_sglang, pyinfra_cli, remove_fake_model, ssh_command, validate)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CUOBJDUMP = BIN.parent / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / \
    "site-packages" / "nvidia" / "cu13" / "bin" / "cuobjdump"
MODULES = dict(item.split("=", 1) for item in DEPLOY_DATA)["prewarm_modules"]
CACHE = "/var/cache/sglang"
MANIFEST = f"{CACHE}/prewarm/manifest.json"
SERVICE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
AS_SERVICE = ("/usr/local/libexec/gpu-bringup/with-service-env --as sglang /var/lib/sglang "
              f"{SERVICE_PATH} /etc/sglang/sglang.env ")

pytestmark = pytest.mark.sandbox


def pyinfra(node, *args, json_output=False):
    return pyinfra_cli("inventory/gpu.py", "--limit", node["name"], *args, json_output=json_output)


def deploy(node, json_output=False):
    return pyinfra(node, "deploy.py", json_output=json_output)


@pytest.fixture(scope="module")
def node(deployed_node):
    return deployed_node


@pytest.fixture(scope="module")
def manifest(node, sandbox_ssh):
    return json.loads(sandbox_ssh(node, f"cat {MANIFEST}").stdout)


def test_manifest_names_the_requested_modules_for_12_0f(manifest):
    assert manifest["flashinfer"] == "0.7.2" and manifest["arch_list"] == "12.0f"
    assert [module["request"] for module in manifest["modules"]] == ["activation:silu", "norm",
                                                                      "sglang-activation:bf16:12.0"]
    assert manifest["workspace"] == f"{CACHE}/.cache/flashinfer/0.7.2/120f"


def test_modules_are_built_for_sm_120f(node, manifest, sandbox_ssh, tmp_path):
    """Every pre-warmed module, FlashInfer's and SGLang's own, holds sm_120f code only
    (cuobjdump reads the cubins), in the caches the service uses."""
    roots = {"flashinfer": f"{CACHE}/.cache/flashinfer/0.7.2/120f/cached_ops/", "sglang": f"{CACHE}/jit/sm120f/"}
    for module in manifest["modules"]:
        assert module["library"].startswith(roots[module["kind"]]), module
        local = tmp_path / Path(module["library"]).name
        local.write_bytes(subprocess.run(ssh_command(node, f"cat {module['library']}"),
                                         capture_output=True, check=True).stdout)
        dump = subprocess.run([str(CUOBJDUMP), str(local)], capture_output=True, text=True, check=True).stdout
        arches = {line.split("=")[1].strip() for line in dump.splitlines() if line.startswith("arch =")}
        assert arches == {"sm_120f"}, (module["name"], arches)


def test_rebuilding_with_the_service_environment_compiles_nothing(node, manifest, sandbox_ssh):
    """FlashInfer's own build steps, run again as the service would: ninja has no work."""
    libraries = " ".join(module["library"] for module in manifest["modules"])
    before = sandbox_ssh(node, f"stat -c '%n %Y' {libraries}").stdout
    # --no-device: as deploy runs it on this node, whose GPUs are declared stand-ins.
    rebuild = sandbox_ssh(node, AS_SERVICE + "python /usr/local/libexec/gpu-bringup/prewarm.py --no-device "
                          f"--modules {MODULES} --manifest /tmp/rebuild.json").stdout
    assert rebuild.count("prewarm: done") == len(manifest["modules"])
    assert sandbox_ssh(node, f"stat -c '%n %Y' {libraries}").stdout == before
    for module in manifest["modules"]:
        if module["kind"] == "flashinfer":
            out = sandbox_ssh(node, AS_SERVICE + f"ninja -n -C {module['dir']}").stdout
            assert "ninja: no work to do." in out, (module["name"], out)
    # SGLang's own: its loader raises on a cache miss with SGLANG_CRASH_ON_JIT_COMPILE.
    verify = sandbox_ssh(node, AS_SERVICE + "python /usr/local/libexec/gpu-bringup/prewarm.py --verify "
                         "--no-device --modules sglang-activation --dtypes bf16").stdout
    assert "no SGLang module would compile" in verify


def test_without_no_device_the_prewarm_refuses_as_cuda_does_not_start(node, manifest, sandbox_ssh):
    """Run as on a GPU node (no --no-device): the stand-in GPUs cannot start CUDA, so the
    pre-warm refuses in one line with torch's reason before it builds anything: no
    manifest written, the cache's own stays the deploy's."""
    before = sandbox_ssh(node, f"stat -c %Y {MANIFEST}").stdout
    result = sandbox_ssh(node, AS_SERVICE + "python /usr/local/libexec/gpu-bringup/prewarm.py "
                         f"--modules {MODULES} --manifest /tmp/refused/manifest.json", check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    refusal = [line for line in result.stderr.splitlines() if line.startswith("prewarm:")]
    assert len(refusal) == 1 and refusal[0].startswith("prewarm: CUDA does not start ("), result.stderr
    assert "nothing was built" in refusal[0] and "Traceback" not in result.stderr
    assert "prewarm: start" not in result.stdout
    assert sandbox_ssh(node, f"stat -c %Y {MANIFEST}").stdout == before
    assert sandbox_ssh(node, "test ! -e /tmp/refused", check=False).returncode == 0


def test_torchs_arch_table_is_the_wheels(node, sandbox_ssh):
    """bringup/torch_builds.py's table for CUDA 13.0 against the real torch wheel in the venv."""
    out = sandbox_ssh(node, "/opt/sglang/venv/bin/python -c 'import torch; print(torch.version.cuda, "
                            "*torch._C._cuda_getArchFlags().split())'").stdout.split()
    assert out[0] == "13.0" and tuple(out[1:]) == ARCH_LIST_FOR_TORCH_CUDA[Version("13.0")]


def test_flashinfer_resolves_the_13_0_toolkit_and_12_0f(node, sandbox_ssh):
    out = sandbox_ssh(node, AS_SERVICE + "python -c 'from flashinfer.jit.cpp_ext import get_cuda_path, "
                      "get_cuda_version; from flashinfer.compilation_context import CompilationContext; "
                      "print(get_cuda_path(), get_cuda_version(), sorted(CompilationContext().TARGET_CUDA_ARCHS))'"
                      ).stdout.strip()
    assert out == "/usr/local/cuda-13.0 13.0 [(12, '0f')]"


def test_venv_is_a_link_to_a_complete_build_that_only_root_can_change(node, sandbox_ssh):
    out = sandbox_ssh(node, "readlink /opt/sglang/venv; cat /opt/sglang/venv/.complete; "
                            "stat -c %U /opt/sglang/venv/bin/python /opt/sglang/venv/lib; "
                            "/opt/sglang/venv/bin/python -c 'import importlib.metadata as m; "
                            "print(m.version(\"sglang\"), m.version(\"torch\"), m.version(\"flashinfer-python\"))'"
                      ).stdout.split()
    assert out[0] == f"venvs/{out[1]}" and out[2:4] == ["root", "root"]
    assert out[4:] == ["0.5.23", "2.14.1", "0.7.2"]
    # Nothing in the venv is writable by anyone but root: the service cannot plant a .pth.
    writable = sandbox_ssh(node, "find /opt/sglang/venvs /opt/sglang/tools /opt/sglang/locks "
                                 "! -type l \\( -perm -o+w -o -perm -g+w -o ! -user root \\) -print | head -5").stdout
    assert writable == ""
    planted = sandbox_ssh(node, "runuser -u sglang -- touch /opt/sglang/venv/lib/python3.11/site-packages/x.pth",
                          check=False)
    assert planted.returncode != 0 and "Permission denied" in planted.stderr


def test_service_unit_reads_the_environment_file(node, sandbox_ssh):
    unit = sandbox_ssh(node, "stat -c '%U:%G %a' /etc/systemd/system/sglang.service; "
                             "cat /etc/systemd/system/sglang.service").stdout
    assert unit.startswith("root:root 644")
    for line in ("EnvironmentFile=/etc/sglang/sglang.env", "User=sglang", "LimitMEMLOCK=infinity",
                 "ExecStart=/opt/sglang/venv/bin/sglang serve --model-type llm --model-path Qwen/Qwen3-0.6B"):
        assert line in unit


def test_validate_after_deploy_is_clean(node):
    _, report = validate(node["name"])
    assert [f["code"] for f in report["plan"]["findings"] if f["severity"] in ("fix", "blocker")] == []


def test_second_deploy_changes_nothing_and_takes_seconds(node):
    started = time.monotonic()
    result = deploy(node, json_output=True)
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.output
    changed = changed_operations(result)
    assert changed == []
    assert seconds < node["deploy_seconds"] / 5, (seconds, node["deploy_seconds"])


def test_the_service_is_started_and_restarted_only_on_change(node, sandbox_ssh):
    """service_enable on a systemd node: deploy enables and starts the unit and waits for
    it to serve, a run with no change leaves the running process alone, a changed
    environment restarts it, and the operator's drop-in stays. The drop-in runs the test
    double of SGLang's HTTP server in place of the server (no GPU here to serve on), on
    the node's own address: the unit's own ExecStart is checked by the node suite."""
    enabled = tuple(item for item in DEPLOY_DATA if item != "service_enable=false") + (
        "service_enable=true", f"service_host={node['ssh_hostname']}", "service_ready_timeout=60")
    main_pid = "systemctl show -p MainPID --value sglang"
    plant_fake_sglang(node, "FAKE_SGLANG_READY_AFTER=1", "Qwen/Qwen3-0.6B")
    sandbox_ssh(node, "systemctl daemon-reload")
    try:
        first = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py", data=enabled)
        assert first.returncode == 0, first.output[-3000:]
        assert said_for(node["name"], "sglang.service serves: /health answered 200", first.output), \
            first.output[-3000:]
        state = sandbox_ssh(node, f"systemctl is-enabled sglang; systemctl is-active sglang; {main_pid}").stdout.split()
        assert state[:2] == ["enabled", "active"] and state[2] != "0", state
        again = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py", data=enabled, json_output=True)
        assert changed_operations(again) == []
        assert sandbox_ssh(node, main_pid).stdout.strip() == state[2], "a run with no change restarted the service"
        changed = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py",
                              data=enabled + ("service_env=RESTART_TEST=1",))
        assert changed.returncode == 0, changed.output[-3000:]
        restarted = sandbox_ssh(node, f"systemctl is-active sglang; {main_pid}; "
                                      f"cat {FAKE_SGLANG_DROP_IN}").stdout.split()
        assert restarted[0] == "active" and restarted[1] not in ("0", state[2]), (state, restarted)
        assert f"{FAKE_SGLANG_PATH}" in restarted, "the operator's drop-in was changed"
    finally:
        sandbox_ssh(node, "systemctl disable --now sglang; rm -rf /etc/systemd/system/sglang.service.d "
                          "/usr/local/lib/fake-sglang; systemctl daemon-reload", check=False)
        remove_fake_model(node)
    # Back to the shared deployed state (the env file without RESTART_TEST, the unit on loopback).
    assert deploy(node).returncode == 0


def session_killer(node, pattern, trigger):
    """On the node: once a process matching ``pattern`` runs and ``trigger`` (a shell test)
    holds, kill -9 the sshd process above it: the deploy's SSH connection dies, as when the
    control machine goes away. Runs under session-bound itself, so it never outlives this
    test's own connection."""
    script = (f"for i in $(seq 6000); do p=$(pgrep -f {shlex.quote(pattern)} | head -n 1); "
              f"if [ -n \"$p\" ] && {trigger}; then "
              "while [ \"$p\" -gt 1 ]; do if [ \"$(cat /proc/$p/comm)\" = sshd ]; then kill -9 \"$p\"; "
              "echo killed; exit 0; fi; p=$(awk '{print $4}' /proc/$p/stat); done; fi; sleep 0.1; done; exit 1")
    return subprocess.Popen(ssh_command(node, "timeout 600 python3 /usr/local/libexec/gpu-bringup/session-bound "
                                              f"sh -c {shlex.quote(script)}"),
                            stdout=subprocess.PIPE, text=True)


def gone(node, sandbox_ssh, pattern, seconds=30):
    """Whether no process matches ``pattern`` on the node within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if sandbox_ssh(node, f"pgrep -af {shlex.quote(pattern)}", check=False).returncode == 1:
            return True
        time.sleep(1)
    return False


def test_ssh_killed_during_the_venv_build_leaves_the_live_venv_and_converges(node, sandbox_ssh, tmp_path):
    """A new lock is built beside the live venv; the deploy's SSH connection dies midway.
    The build stops with it (nothing runs on, unseen), the live venv stays; the re-run
    converges; the previous venv is the rollback, by name. The new lock is the hand-built
    venv's (torch and FlashInfer, 56 pins; the live one has 207): the re-run builds it whole,
    and compiling the full stack's bytecode once more took a core for a minute."""
    lock = ROOT / "sandbox" / "locks" / "handbuilt-venv-cp311-x86_64.txt"
    other = tmp_path / "other-cp311-x86_64.txt"
    other.write_text(lock.read_text())
    data = (*DEPLOY_DATA, f"venv_lock={other}", "deploy_steps=venv")
    live = sandbox_ssh(node, "readlink /opt/sglang/venv").stdout.strip()
    killer = session_killer(node, "[s]ession-bound /usr/local/libexec/gpu-bringup/build-venv.sh",
                            f"ls -d /opt/sglang/venvs/*/lib/python3.11/site-packages/torch 2>/dev/null "
                            f"| grep -qv '/opt/sglang/{live}/'")
    first = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py", data=data)
    assert killer.wait(timeout=300) == 0 and killer.stdout.read().strip() == "killed"
    assert first.returncode == 1
    assert "the SSH connection was lost while it ran" in first.stderr
    assert gone(node, sandbox_ssh, "[b]uild-venv.sh|[u]v pip sync"), "the build outlived its SSH session"
    assert sandbox_ssh(node, "readlink /opt/sglang/venv").stdout.strip() == live
    second = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py", data=data)
    assert second.returncode == 0, second.output[-3000:]
    rebuilt = sandbox_ssh(node, "readlink /opt/sglang/venv; cat /opt/sglang/venv/.complete; "
                                "readlink /opt/sglang/venvs/previous").stdout.split()
    assert rebuilt[0] != live and rebuilt[0] == f"venvs/{rebuilt[1]}" and f"venvs/{rebuilt[2]}" == live
    # Back to the configured lock: its venv is the rollback, still complete, so only the link moves.
    assert deploy(node).returncode == 0
    assert sandbox_ssh(node, "readlink /opt/sglang/venv").stdout.strip() == live


def test_ssh_killed_during_the_pre_warm_keeps_the_cache_and_converges(node, manifest, sandbox_ssh):
    """One module more is asked for; the pre-warm's SSH connection dies while it compiles:
    the compile stops with it, the manifest stays the old one, a re-run converges."""
    more = tuple(f"prewarm_modules={MODULES},activation:gelu" if item.startswith("prewarm_modules=") else item
                 for item in DEPLOY_DATA)
    before = sandbox_ssh(node, f"stat -c %Y {MANIFEST}; cat {MANIFEST}").stdout
    killer = session_killer(node, "[s]ession-bound /usr/local/libexec/gpu-bringup/with-service-env --as",
                            "pgrep -x cicc >/dev/null")
    first = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py", data=more)
    assert killer.wait(timeout=300) == 0 and killer.stdout.read().strip() == "killed"
    assert first.returncode == 1
    assert "the SSH connection was lost while it ran" in first.stderr
    assert gone(node, sandbox_ssh, "[p]rewarm.py|[n]inja|[c]icc|[n]vcc"), "the pre-warm outlived its SSH session"
    assert sandbox_ssh(node, f"stat -c %Y {MANIFEST}; cat {MANIFEST}").stdout == before
    again = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py", data=more)
    assert again.returncode == 0, again.output[-3000:]
    assert json.loads(sandbox_ssh(node, f"cat {MANIFEST}").stdout)["request"]["modules"][-1] == "activation:gelu"
    # The configured request again: every module is built, only the manifest changes.
    assert deploy(node).returncode == 0
    assert json.loads(sandbox_ssh(node, f"cat {MANIFEST}").stdout)["request"] == manifest["request"]
