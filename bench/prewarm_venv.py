"""Pre-warm and venv build costs, measured on a deployed sandbox node over SSH.

    .venv/bin/python bench/prewarm_venv.py NODE [--modules LIST] [--skip-pip]

- cold pre-warm: files/prewarm.py with the service's environment into an empty
  workspace (FLASHINFER_WORKSPACE_BASE pointed at a scratch directory), per module;
- warm re-run: the same again (target: under 5 s in total);
- venv build for the deployed lock with uv and with pip, each on a warm cache (the
  cache is warmed by one untimed run first); ratio pip / uv (target: at least 3).

NODE must have been deployed (`make demo` leaves gpu1 deployed). Prints ratios
measured in this one run; these machines are noisy.
"""

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bringup.layout import DEFAULT_LAYOUT, SERVICE_BASE_PATH  # noqa: E402

AS_SERVICE = (f"{DEFAULT_LAYOUT.helper('with-service-env')} --as sglang {DEFAULT_LAYOUT.service_home} "
              f"{SERVICE_BASE_PATH} {DEFAULT_LAYOUT.env_file} ")
DEFAULT_MODULES = "sampling,rope,norm,activation:silu,activation:gelu,page,cascade,prefill,decode"


def ssh(node, command):
    entry = yaml.safe_load((ROOT / ".sandbox" / "nodes.yaml").read_text())["nodes"][node]
    argv = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={entry['ssh_known_hosts_file']}", "-i", entry["ssh_key"],
            "-p", str(entry["ssh_port"]), f"root@{entry['ssh_hostname']}", command]
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, result.stdout


def prewarm(node, modules, workspace):
    command = (AS_SERVICE + f"env FLASHINFER_WORKSPACE_BASE={workspace} MAX_JOBS=$(nproc) python "
               f"{DEFAULT_LAYOUT.helper('prewarm.py')} --modules {modules} --manifest {workspace}/manifest.json")
    return ssh(node, command)


def venv_build(node, installer, target, sources):
    lock = "$(ls -t /opt/sglang/locks/*.txt | grep -v /uv- | head -1)"
    if installer == "uv":
        command = (f"cd / && rm -rf {target} && runuser -u sglang -- env HOME=/var/lib/sglang UV_CACHE_DIR=/opt/sglang/cache/uv "
                   # uv lives in tools/<uv lock digest>/ (files/build-venv.sh): the one there.
                   f"sh -c 'uv=$(ls -d /opt/sglang/tools/*/bin/uv | head -n 1) && \"$uv\" venv -q --python /usr/bin/python3 {target} && "
                   f"\"$uv\" pip sync -q --python {target}/bin/python --require-hashes {sources} {lock}'")
    else:
        command = (f"cd / && rm -rf {target} && runuser -u sglang -- env HOME=/var/lib/sglang PIP_CACHE_DIR=/opt/sglang/cache/pip "
                   f"sh -c 'python3 -m venv {target} && {target}/bin/pip install -q --disable-pip-version-check "
                   f"--require-hashes --no-deps {sources} -r {lock}'")
    return ssh(node, command)[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("node")
    parser.add_argument("--modules", default=DEFAULT_MODULES)
    parser.add_argument("--skip-pip", action="store_true")
    parser.add_argument("--skip-prewarm", action="store_true")
    parser.add_argument("--find-links", default="http://127.0.0.1:8914/")
    args = parser.parse_args()
    if not args.skip_prewarm:
        measure_prewarm(args)
    measure_venv(args)
    return 0


def measure_prewarm(args):
    workspace = "/var/lib/sglang/bench-prewarm"
    ssh(args.node, f"rm -rf {workspace} && install -d -o sglang -g sglang {workspace}")
    cold_seconds, cold = prewarm(args.node, args.modules, workspace)
    for line in cold.splitlines():
        if line.startswith("prewarm: "):
            print(f"cold  {line}")
    warm_seconds, warm = prewarm(args.node, args.modules, workspace)
    warm_total = re.search(r"ready in ([\d.]+)s", warm).group(1)
    print(f"cold pre-warm: {cold_seconds:.1f}s wall; warm re-run: {warm_seconds:.1f}s wall "
          f"({warm_total}s inside prewarm.py; target < 5 s)")
    ssh(args.node, f"rm -rf {workspace}")


def measure_venv(args):
    sources = f"--find-links {args.find_links} --no-index"
    venv_build(args.node, "uv", "/opt/sglang/venvs/bench-uv", sources)  # warms uv's cache
    uv_seconds = venv_build(args.node, "uv", "/opt/sglang/venvs/bench-uv", sources)
    print(f"venv build, uv, warm cache: {uv_seconds:.1f}s")
    if not args.skip_pip:
        venv_build(args.node, "pip", "/opt/sglang/venvs/bench-pip", sources)  # warms pip's cache
        pip_seconds = venv_build(args.node, "pip", "/opt/sglang/venvs/bench-pip", sources)
        print(f"venv build, pip, warm cache: {pip_seconds:.1f}s")
        print(f"ratio pip / uv: {pip_seconds / uv_seconds:.1f} (target >= 3)")
    ssh(args.node, "rm -rf /opt/sglang/venvs/bench-uv /opt/sglang/venvs/bench-pip")


if __name__ == "__main__":
    sys.exit(main())
