"""A second real distribution on the operator's main path: a bare Debian 13 node
(CPython 3.13) with a model and the service enabled goes to serving and a green node
suite with deploy.py: the cp313 lock, NVIDIA's debian13 repository directory (the
sandbox's), the reduced pre-warm; then DeepGEMM's pre-compile on the same venv."""

import re
import shlex
import subprocess
import sys

import pytest

from sandbox import aptrepo, pypimirror
from sandbox import node as sandbox_nodes
from tests.sandbox_fixtures import (
    FAKE_SGLANG_DROP_IN,
    REPO_ROOT,
    changed_operations,
    node_suite,
    plant_fake_sglang,
    pyinfra_cli,
    run_ssh,
    validate,
)

pytestmark = pytest.mark.sandbox

NAME = "deb13"
DATA = ("prewarm_modules=activation:silu,sglang-activation", "service_model=Qwen/Qwen3-0.6B", "service_enable=false")
DROP_IN = "/etc/systemd/system/sglang.service.d/sleep.conf"
# A model's configuration without weights (SGLang resolves its arguments from it).
TINY_QWEN2 = ('{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64, '
              '"intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, '
              '"vocab_size": 1000, "max_position_embeddings": 512, "torch_dtype": "bfloat16"}')


@pytest.fixture(scope="module")
def node(sandbox_node):
    aptrepo.ensure_served()
    pypimirror.serve()
    entry = dict(sandbox_node(NAME, "127.0.0.66", gpu="rtx-pro-6000-x8", toolkit="none", os_name="debian13"),
                 name=NAME)
    yield entry
    # Its venv takes gigabytes: free them before the next suite.
    sandbox_nodes.down([NAME])


# The main path (issue 32): what every operator sets, a model and the service enabled.
MODEL_DIR = "/srv/models/tiny-qwen2"
BARE = ("systemctl stop sglang.service 2>/dev/null; rm -rf /opt/sglang /var/cache/sglang /etc/sglang "
        "/etc/systemd/system/sglang.service /etc/systemd/system/sglang.service.d; systemctl daemon-reload")


def test_bare_node_with_a_model_and_the_service_enabled_reaches_the_gate_then_serves(node, tmp_path):
    """The main path on Debian 13 (CPython 3.13: the cp313 lock, NVIDIA's debian13
    directory): a bare node (no toolkit, no venv, no /opt/sglang), a local model
    directory the service user can read, ``service_enable=true``,
    ``service_rollback=on-failure``, the reduced pre-warm, the full stack. Before issue
    32's fix the pre-warm failed with ``env: '/opt/sglang/venv/bin/python': Permission
    denied`` (release.sh's umask 077 made the venv root 0700). The real SGLang's start
    then fails on the stand-in GPUs (no CUDA behind them: CUDA_UNAVAILABLE) and the host
    says there was nothing to go back to; the test double of SGLang started by the unit
    serves; the node suite is green; a venv root closed by hand is found by the node
    suite and validate, and repaired by deploy; a second deploy changes nothing."""
    assert run_ssh(node, "python3 --version").stdout.startswith("Python 3.13.")
    run_ssh(node, f"{BARE}; mkdir -p {MODEL_DIR} && printf '%s' {shlex.quote(TINY_QWEN2)} > {MODEL_DIR}/config.json "
                  "&& chmod -R a+rX /srv/models && test ! -e /opt/sglang")
    data = (*(item for item in DATA if not item.startswith(("service_model=", "service_enable="))),
            f"service_model={MODEL_DIR}", "service_enable=true", "service_rollback=on-failure",
            "service_ready_timeout=180", f"service_host={node['ssh_hostname']}")
    _, before = validate(NAME, data=data)
    plan = before["plan"]
    assert plan["venv"]["lock"] == "files/locks/sglang-0.5.23-cp313-x86_64.txt"
    assert plan["venv"]["uv_lock"] == "files/locks/uv-cp313-x86_64.txt"
    assert plan["repo"]["distro"] == "debian13" and plan["arch_list"] == "12.0f"
    assert plan["toolkit"]["lock"] == "files/locks/cuda-13.0-debian13-x86_64.txt"
    assert not [f for f in plan["findings"] if f["severity"] == "blocker"], plan["findings"]

    real = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=data)
    assert "Permission denied" not in real.output, real.output[-4000:]
    assert real.returncode == 1, real.output[-4000:]
    # Progress at default verbosity: the venv build's lines, each module's time. The
    # pre-warm ran as the service user from its venv; the gate then saw the real SGLang
    # fail to start: no accelerator behind the stand-in GPUs.
    assert re.search(r"build-venv: venv [0-9a-f]+ built with uv in \d+s", real.output), real.output[-4000:]
    timed = re.findall(r"prewarm: done  (\S+) in \d+\.\d s", real.output)
    assert "activation:silu" in timed and any(name.startswith("sglang-activation:") for name in timed), timed
    assert "CUDA_UNAVAILABLE" in real.output, real.output[-4000:]
    assert "rollback refused, nothing changed: no previous release recorded" in real.output, real.output[-4000:]
    assert run_ssh(node, "stat -c '%a %U' /opt/sglang /opt/sglang/venvs /opt/sglang/releases").stdout.split("\n")[:3] \
        == ["755 root", "755 root", "700 root"]

    # The same path to serving: the double started by the unit (an operator's drop-in).
    # Nothing of deploy's changes, so it restarts nothing: the operator reloads systemd
    # for the drop-in and restarts the unit (it is failing, waiting to be restarted).
    plant_fake_sglang(node, "FAKE_SGLANG_READY_AFTER=2", MODEL_DIR, hub_cache=False)
    run_ssh(node, "systemctl daemon-reload && systemctl reset-failed sglang.service; systemctl restart sglang.service")
    served = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=data)
    assert served.returncode == 0, served.output[-4000:]
    # The unit serves already when the gate looks (restarted by hand above): the summary's verdict.
    assert re.search(rf"^{NAME}\s.*\sserving\s", served.output, re.M) and "-- 1 serving" in served.output, \
        served.output[-4000:]
    suite = node_suite(tmp_path / "green", "--node-limit", NAME, data=data)
    assert "service_user_reaches_its_paths" in " ".join(suite.checks(NAME)), suite
    assert "toolkit_packages_at_lock" in suite.checks(NAME)
    assert suite.rc == 0 and suite.failing(NAME) == set(), suite
    _, report = validate(NAME, data=data)
    assert "SERVICE_PATH_UNREACHABLE" not in [f["code"] for f in report["plan"]["findings"]]

    # A venv root closed by hand: the node suite names it, validate plans its repair,
    # deploy repairs it, and a second deploy changes nothing.
    run_ssh(node, "chmod 0700 /opt/sglang")
    closed = node_suite(tmp_path / "closed", "--node-limit", NAME, data=data, checks="tests/node/test_permissions.py")
    assert any("reaches_its_paths" in check for check in closed.failing(NAME)), closed
    assert "/opt/sglang" in closed.output, closed
    _, report = validate(NAME, data=data)
    [finding] = [f for f in report["plan"]["findings"] if f["code"] == "SERVICE_PATH_UNREACHABLE"]
    assert finding["severity"] == "fix" and "/opt/sglang" in finding["message"], finding
    repaired = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=data)
    assert repaired.returncode == 0, repaired.output[-4000:]
    assert run_ssh(node, "stat -c %a /opt/sglang").stdout.strip() == "755"
    again = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=data, json_output=True)
    assert changed_operations(again) == [], again.stdout[-4000:]


def test_deep_gemm_compile_runs_as_planned_and_its_failure_changes_nothing(node):
    """prewarm_deep_gemm through deploy.py, on this node with a venv (make test's other
    worker has time to spare; the deployed node's tests are its longest unit). The
    stand-in GPUs (SM 12.0) and a model make the plan run SGLang's own compile_deep_gemm
    as the service user, with the service's environment, in the unit's WorkingDirectory:
    the model is given relative to it, so only there does SGLang find it (elsewhere it
    asks the hub for "models/tiny-qwen2"). With no GPU behind the stand-in SGLang's device
    check then refuses: the host fails, bringup.explain names the cause, no DeepGEMM
    manifest is written, FlashInfer's pre-warm stays as it was, the service it stopped runs
    again, a re-run tries again. After the main path (above): its double's drop-in goes first."""
    run_ssh(node, f"systemctl stop sglang.service; rm -f {FAKE_SGLANG_DROP_IN}; systemctl daemon-reload")
    model = "/var/lib/sglang/models/tiny-qwen2"
    run_ssh(node, f"mkdir -p {model} && printf '%s' {shlex.quote(TINY_QWEN2)} > {model}/config.json "
                  "&& chmod -R a+rX /var/lib/sglang/models")
    data = tuple(item for item in DATA if not item.startswith("service_model=")) + (
        "service_model=models/tiny-qwen2", "prewarm_deep_gemm=true", "prewarm_deep_gemm_timeout=60",
        "deploy_steps=prewarm")
    _, report = validate(NAME, data=data)
    assert [f["code"] for f in report["plan"]["findings"] if f["code"].startswith("DEEP_GEMM")] == \
        ["DEEP_GEMM_PRECOMPILE"], report["plan"]["findings"]
    fi_manifest = run_ssh(node, "sha256sum /var/cache/sglang/prewarm/manifest.json").stdout
    # A running service (a drop-in makes it one that can run here) is stopped for the
    # compile and must be running again after the failed one.
    run_ssh(node, f"mkdir -p {DROP_IN.rsplit('/', 1)[0]} && printf '[Service]\\nExecStart=\\nExecStart=/bin/sleep infinity\\n' "
                  f"> {DROP_IN} && systemctl daemon-reload && systemctl start sglang.service")
    started = "systemctl show -p ActiveEnterTimestampMonotonic --value sglang.service"
    for attempt in ("first", "re-run"):
        before = run_ssh(node, started).stdout
        result = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=data)
        assert result.returncode == 1, result.output[-4000:]
        assert "deep_gemm: no DeepGEMM manifest" in result.output, (attempt, result.output[-4000:])
        assert "unrecognized arguments" not in result.output, result.output[-4000:]
        assert "RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS)" in result.output, \
            (attempt, result.output[-4000:])
        explained = subprocess.run([sys.executable, "-m", "bringup.explain", "-"], input=result.output,
                                   capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
        assert "CUDA_UNAVAILABLE" in explained.stdout, explained.stdout
        assert run_ssh(node, "test ! -e /var/cache/sglang/prewarm/deep_gemm.json && echo absent").stdout.strip() \
            == "absent"
        # Stopped for the compile, then started again: running, since a later time.
        assert run_ssh(node, "systemctl is-active sglang.service", check=False).stdout.strip() == "active", attempt
        assert int(run_ssh(node, started).stdout) > int(before), attempt
    run_ssh(node, f"systemctl stop sglang.service && rm {DROP_IN} && systemctl daemon-reload")
    assert run_ssh(node, "sha256sum /var/cache/sglang/prewarm/manifest.json").stdout == fi_manifest
