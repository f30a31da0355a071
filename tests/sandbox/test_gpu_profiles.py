"""Every GPU profile of the sandbox, end to end against expectations written out by
hand (not taken from the planner): one node with the toolkit, its driver stand-in
switched from profile to profile, deployed (repository, toolkit, environment) through
the real CLI, then a kernel compiled in the service's environment with the targets its
FLASHINFER_CUDA_ARCH_LIST names, and the SASS in the object read by cuobjdump.

Where the expectations come from:
- targets: FlashInfer 0.7.2, flashinfer/compilation_context.py
  ``CompilationContext._normalize_cuda_arch``: SM 9.x, 10.x, 11.x take the ``a``
  suffix; SM 12.0 takes the family suffix ``f`` from CUDA 12.9; SM 12.1 takes ``a``.
- the driver: CUDA 13.x runs on the R580 driver branch and newer (NVIDIA's CUDA 13.0
  release notes, "CUDA Toolkit and Corresponding Driver Versions"); the RTX 5090
  profile records driver 575.64.03 and cannot run torch's cu130 build.
"""

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.envfile import parse_env_file
from sandbox import aptrepo
from sandbox.gpu_standin import NODE_GPU_DATA
from tests.sandbox_fixtures import REPO_ROOT, pyinfra_cli, run_ssh, validate

pytestmark = pytest.mark.sandbox

NAME = "gpu-prof"
DATA = ("deploy_steps=repo,toolkit,env",)
GPUS = REPO_ROOT / "tests" / "fixtures" / "gpus"
CUOBJDUMP = Path(sys.executable).parent.parent / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / \
    "site-packages" / "nvidia" / "cu13" / "bin" / "cuobjdump"
KERNEL = "__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }\n"

# profile -> (FLASHINFER_CUDA_ARCH_LIST, the SASS targets of a kernel built for it)
READY = {
    "rtx-pro-6000-x8": ("12.0f", {"sm_120f"}),
    "b200-x8": ("10.0a", {"sm_100a"}),
    "gb10": ("12.1a", {"sm_121a"}),
    "h100-x8": ("9.0a", {"sm_90a"}),
    "mixed-b200-rtxpro": ("10.0a 12.0f", {"sm_100a", "sm_120f"}),
}
# profile -> the blocker validate names; deploy changes nothing there
REFUSED = {
    "rtx-5090": "DRIVER_TOO_OLD",
    "h100-x8-driver550": "DRIVER_TOO_OLD",
}
# A kernel built in the service's environment (systemd reads the env file), one
# -gencode per FLASHINFER_CUDA_ARCH_LIST entry: "12.0f" -> compute_120f/sm_120f.
COMPILE = r"""
mkdir -p /root/k && cd /root/k && cat > k.cu <<'EOF'
{kernel}EOF
systemd-run --quiet --wait --pipe --collect --property=EnvironmentFile=/etc/sglang/sglang.env -- sh -c '
    cd /root/k && flags= &&
    for target in $FLASHINFER_CUDA_ARCH_LIST; do
        t=$(printf %s "$target" | tr -d .); flags="$flags -gencode=arch=compute_$t,code=sm_$t"
    done &&
    "$CUDA_HOME/bin/nvcc" -c k.cu -o k.o $flags' </dev/null && base64 -w0 k.o
"""


@pytest.fixture(scope="module")
def node(sandbox_node):
    aptrepo.ensure_served()
    entry = dict(sandbox_node(NAME, "127.0.0.47", gpu="rtx-pro-6000-x8", toolkit="none"), name=NAME)
    deployed = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA)
    assert deployed.returncode == 0, deployed.output[-4000:]
    return entry


def use_profile(entry, profile):
    """Switch the node's driver stand-in to another recorded profile."""
    for name in ("query.csv", "smi.txt"):
        data = base64.b64encode((GPUS / profile / name).read_bytes()).decode()
        run_ssh(entry, f"echo {data} | base64 -d > /{NODE_GPU_DATA}/{name}")
    run_ssh(entry, f"echo {profile} > /{NODE_GPU_DATA}/PROFILE")


def sass_targets(entry, tmp_path):
    encoded = run_ssh(entry, COMPILE.format(kernel=KERNEL)).stdout.strip().splitlines()[-1]
    local = tmp_path / "k.o"
    local.write_bytes(base64.b64decode(encoded))
    dump = subprocess.run([str(CUOBJDUMP), str(local)], capture_output=True, text=True, check=True).stdout
    return {line.split("=")[1].strip() for line in dump.splitlines() if line.startswith("arch =")}


@pytest.mark.parametrize("profile", sorted(READY))
def test_profile_builds_its_own_targets(node, profile, tmp_path):
    arch_list, sass = READY[profile]
    use_profile(node, profile)
    _, report = validate(NAME, data=DATA)
    assert report["plan"]["arch_list"] == arch_list, report["plan"]["findings"]
    assert report["plan"]["toolkit"]["version"] == "13.0"
    deployed = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA)
    assert deployed.returncode == 0, deployed.output[-3000:]
    env = parse_env_file(run_ssh(node, "cat /etc/sglang/sglang.env").stdout)
    assert (env["CUDA_HOME"], env["FLASHINFER_CUDA_ARCH_LIST"]) == ("/usr/local/cuda-13.0", arch_list), env
    assert sass_targets(node, tmp_path) == sass


@pytest.mark.parametrize("profile", sorted(REFUSED))
def test_profile_the_driver_cannot_serve_is_refused(node, profile):
    use_profile(node, profile)
    before = run_ssh(node, "sha256sum /etc/sglang/sglang.env /etc/profile.d/zz-cuda-home.sh").stdout
    _, report = validate(NAME, expect_rc=1, data=DATA)
    blockers = {f["code"] for f in report["plan"]["findings"] if f["severity"] == "blocker"}
    assert blockers == {REFUSED[profile]}, report["plan"]["findings"]
    refused = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA)
    assert refused.returncode != 0 and REFUSED[profile] in refused.output
    assert run_ssh(node, "sha256sum /etc/sglang/sglang.env /etc/profile.d/zz-cuda-home.sh").stdout == before
