"""A second real distribution: a bare Debian 13 node (CPython 3.13) goes to a green
node suite with deploy.py: the cp313 lock, NVIDIA's debian13 repository directory
(the sandbox's), the reduced pre-warm."""

import re
import shlex
import subprocess
import sys

import pytest

from sandbox import aptrepo, pypimirror
from sandbox import node as sandbox_nodes
from tests.sandbox_fixtures import REPO_ROOT, changed_operations, node_suite, pyinfra_cli, run_ssh, validate

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


def test_debian13_bare_to_green(node, tmp_path):
    assert run_ssh(node, "python3 --version").stdout.startswith("Python 3.13.")
    _, before = validate(NAME, data=DATA)
    plan = before["plan"]
    assert plan["venv"]["lock"] == "files/locks/sglang-0.5.23-cp313-x86_64.txt"
    assert plan["venv"]["uv_lock"] == "files/locks/uv-cp313-x86_64.txt"
    assert plan["repo"]["distro"] == "debian13" and plan["arch_list"] == "12.0f"
    assert plan["toolkit"]["lock"] == "files/locks/cuda-13.0-debian13-x86_64.txt"
    assert not [f for f in plan["findings"] if f["severity"] == "blocker"], plan["findings"]
    deployed = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA)
    assert deployed.returncode == 0, deployed.output[-4000:]
    # Progress at default verbosity: the venv build's lines, each module's time.
    assert re.search(r"build-venv: venv [0-9a-f]+ built with uv in \d+s", deployed.output), deployed.output[-4000:]
    timed = re.findall(r"prewarm: done  (\S+) in \d+\.\d s", deployed.output)
    assert "activation:silu" in timed and any(name.startswith("sglang-activation:") for name in timed), timed
    run = node_suite(tmp_path, "--node-limit", NAME, data=DATA)
    assert run.rc == 0 and run.failing(NAME) == set(), run
    assert "toolkit_packages_at_lock" in run.checks(NAME)
    again = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA, json_output=True)
    changed = changed_operations(again)
    assert changed == []


def test_deep_gemm_compile_runs_as_planned_and_its_failure_changes_nothing(node):
    """prewarm_deep_gemm through deploy.py, on this node with a venv (make test's other
    worker has time to spare; the deployed node's tests are its longest unit). The
    stand-in GPUs (SM 12.0) and a model make the plan run SGLang's own compile_deep_gemm
    as the service user, with the service's environment, in the unit's WorkingDirectory:
    the model is given relative to it, so only there does SGLang find it (elsewhere it
    asks the hub for "models/tiny-qwen2"). With no GPU behind the stand-in SGLang's device
    check then refuses: the host fails, bringup.explain names the cause, no DeepGEMM
    manifest is written, FlashInfer's pre-warm stays as it was, the service it stopped runs
    again, a re-run tries again."""
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
