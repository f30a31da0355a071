"""What an arm64 sandbox node costs beside an amd64 one: two GB10 nodes on Debian 12, one
of each CPU (the arm64 one through QEMU), each step timed on both in the same run, the
ratios printed (these machines are noisy: compare the ratios, not the seconds).

    .venv/bin/python bench/arm64_node.py [--runs 3]

Steps: ``sandbox up`` (a cached image), validate.py, deploy.py with
``deploy_steps=repo,toolkit,env`` from a fresh node (the arm64 packages of
``debian12/sbsa`` against the amd64 ones of ``debian12/x86_64``), a converged
deploy.py. ``--runs`` repeats the converged deploy and takes the median. Both nodes are
taken down at the end (bench-a64, bench-x64 on 127.0.0.75/76).
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox import aptrepo, image, node  # noqa: E402

PYINFRA = str(Path(sys.executable).parent / "pyinfra")
DATA = ("--data", "deploy_steps=repo,toolkit,env")
NODES = {"x86_64": ("bench-x64", "127.0.0.76"), "aarch64": ("bench-a64", "127.0.0.75")}


def timed(step, *args):
    start = time.perf_counter()
    result = subprocess.run([PYINFRA, "-y", *DATA, "inventory/gpu.py", *args], cwd=ROOT, capture_output=True,
                            text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise SystemExit(f"{step} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    aptrepo.ensure_served()
    seconds = {}
    try:
        for machine, (name, addr) in NODES.items():
            image.base_root(machine=machine)  # built once per machine, not timed here
            start = time.perf_counter()
            node.up(name, addr, "gb10", "none", machine=machine)
            seconds[(machine, "sandbox up")] = time.perf_counter() - start
        for machine, (name, _) in NODES.items():
            seconds[(machine, "validate.py")] = timed("validate", "--limit", name, "validate.py")
            seconds[(machine, "deploy.py (repo, toolkit, env)")] = timed("deploy", "--limit", name, "deploy.py")
            seconds[(machine, "deploy.py converged")] = statistics.median(
                timed("converged deploy", "--limit", name, "deploy.py") for _ in range(args.runs))
    finally:
        node.down([name for name, _ in NODES.values()])
    print(f"{'step':<32} {'amd64 s':>9} {'arm64 s':>9} {'arm64/amd64':>12}")
    for step in dict.fromkeys(step for _, step in seconds):
        x64, a64 = seconds[("x86_64", step)], seconds[("aarch64", step)]
        print(f"{step:<32} {x64:>9.1f} {a64:>9.1f} {a64 / x64:>12.2f}")


if __name__ == "__main__":
    main()
