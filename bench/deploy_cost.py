"""Cost of a converged deploy.py on deployed nodes, against pyinfra's floor for the same
number of operations (bench/floor_deploy.py: no-change ``files.directory`` operations).

    .venv/bin/python bench/deploy_cost.py [--limit NAME] [--runs 5] [--data KEY=VALUE...]

Run it on nodes deploy.py brought up with the same --data (e.g. after
``pyinfra inventory/gpu.py --data prewarm_modules=activation:silu deploy.py``). First one
debug run of each counts operations and remote commands per host, and checks deploy.py
changes nothing; then the two are timed in turns, ``--runs`` each, as whole processes,
and the ratio of their medians is printed (target: at most 2).
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
COMMAND_LINE = re.compile(r"Running command on (?P<host>[^:\s]+)")


def run(args):
    start = time.perf_counter()
    result = subprocess.run([PYINFRA, "-y", *args], cwd=ROOT, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL)
    return time.perf_counter() - start, result


def operations_and_changes(args):
    """(operations per host, changed operations, remote commands per host) of one --json run."""
    _, result = run(["--json", "--debug", *args])
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{result.stderr[-3000:]}")
    payload = json.loads(result.stdout)["results"]
    hosts = max(1, len({host for op in payload["operations"] for host in op["success"] + op["no_change"]}))
    changed = [op["name"] for op in payload["operations"] if op["success"]]
    commands = Counter(match["host"] for match in COMMAND_LINE.finditer(result.stderr))
    return payload["totals"]["hosts"] // hosts, changed, commands


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--inventory", default="inventory/gpu.py")
    parser.add_argument("--limit", action="append", default=[])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data", action="append", default=[])
    args = parser.parse_args()
    common = [args.inventory, *(arg for name in args.limit for arg in ("--limit", name))]
    data = [arg for item in args.data for arg in ("--data", item)]
    deploy = [*common, *data, "deploy.py"]
    operations, changed, deploy_commands = operations_and_changes(deploy)
    if changed:
        raise SystemExit(f"deploy.py is not converged on these nodes (it changed {changed}): run it once first")
    floor = [*common, "--data", f"floor_operations={operations}", "bench/floor_deploy.py"]
    _, _, floor_commands = operations_and_changes(floor)
    deploy_times, floor_times = [], []
    for _ in range(args.runs):
        deploy_times.append(run(deploy)[0])
        floor_times.append(run(floor)[0])
    hosts = sorted(deploy_commands)
    print(f"hosts: {len(hosts)}; operations per host: {operations} (deploy.py, all no-change)")
    for host in hosts:
        print(f"remote commands, {host}: deploy.py {deploy_commands[host]}, floor {floor_commands.get(host, 0)}")
    deploy_median, floor_median = statistics.median(deploy_times), statistics.median(floor_times)
    print(f"converged deploy.py median: {deploy_median:.2f}s over {args.runs} runs")
    print(f"floor ({operations} no-change files.directory) median: {floor_median:.2f}s over {args.runs} runs")
    print(f"ratio deploy / floor: {deploy_median / floor_median:.2f} (target <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
