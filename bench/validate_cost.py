"""Cost of the validation run: remote commands per host and time against a trivial run.

    .venv/bin/python bench/validate_cost.py [INVENTORY] [--runs N]

INVENTORY defaults to inventory/gpu.py (the sandbox nodes when no hosts are listed);
``@local`` works too. Both runs go to the same hosts in the same process tree, one
after the other, and the ratio of their medians is printed (these machines are noisy:
compare ratios, not seconds). Targets: at most 2 remote commands per host, ratio at
most 1.5.
"""

import argparse
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
# pyinfra's connectors log each remote command at debug level with the host's name.
COMMAND_LINE = re.compile(r"Running command on (?P<host>[^:\s]+)")


def timed(args):
    start = time.perf_counter()
    result = subprocess.run([PYINFRA, "-y", *args], cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - start, result.stdout + result.stderr


def commands_per_host(output):
    return Counter(match["host"] for match in COMMAND_LINE.finditer(output))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("inventory", nargs="?", default="inventory/gpu.py")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    _, debug_output = timed(["--debug", args.inventory, "validate.py"])
    counts = commands_per_host(debug_output)
    validate_times, trivial_times = [], []
    for _ in range(args.runs):
        validate_times.append(timed([args.inventory, "validate.py"])[0])
        trivial_times.append(timed([args.inventory, "fact", "server.Hostname"])[0])
    validate_median = statistics.median(validate_times)
    trivial_median = statistics.median(trivial_times)
    for host, count in sorted(counts.items()):
        print(f"remote commands, validate.py, {host}: {count} (target <= 2)")
    if not counts:
        print("no remote command seen: is the inventory empty?")
        return 1
    print(f"validate.py median: {validate_median:.2f}s over {args.runs} runs")
    print(f"one-fact run (server.Hostname) median: {trivial_median:.2f}s over {args.runs} runs")
    print(f"ratio validate / one-fact: {validate_median / trivial_median:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
