"""How validate.py and deploy.py scale with the fleet, on sandbox nodes of this machine.

    .venv/bin/python bench/fleet_scale.py [--nodes 50] [--deploy-nodes 8] [--runs 3] [--net 127.0.8]

Starts ``--nodes`` sandbox nodes (sc-01...; the incident's state) unless they run, then
measures in this one run, as whole pyinfra processes over SSH:

1. validate.py on 1, 10 and ``--nodes`` nodes (median of ``--runs`` each): ratio to 1
   node (target: 50 nodes within 3x of 1);
2. deploy.py of repository, toolkit and environment (``deploy_steps=repo,toolkit,env``,
   no venv) on 1 node, then on ``--deploy-nodes`` other nodes: ratio;
3. a converged deploy.py re-run on those nodes against pyinfra's floor for the same
   number of no-change operations (bench/floor_deploy.py) on the same nodes (median of
   ``--runs`` each): ratio (target: within 2x).

Each deployed node keeps about 1 GB (the toolkit). Needs sysctl fs.inotify.max_user_instances
above 7 per node (each node's systemd, dbus and logind hold instances; Debian's default 128
runs out near 18 nodes on the whole machine). The nodes are taken down at the end (``--keep``
keeps them). These machines are noisy: compare the ratios, measured in one run.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox import aptrepo, node as sandbox_nodes  # noqa: E402
from sandbox.registration import inventory_document  # noqa: E402

PYINFRA = str(Path(sys.executable).parent / "pyinfra")
STEPS = "deploy_steps=repo,toolkit,env"


def names(count, first=1):
    return [f"sc-{number:02d}" for number in range(first, first + count)]


def start(count, net):
    running = {row["name"] for row in sandbox_nodes.status() if row["state"] == "running"}
    started = time.perf_counter()
    for number, name in enumerate(names(count), 1):
        if name not in running:
            sandbox_nodes.up(name, f"{net}.{number}", "rtx-pro-6000-x8", "incident")
    print(f"{count} nodes up in {time.perf_counter() - started:.1f}s")


def hosts_file(directory, hosts):
    """inventory/hosts.yml for these sandbox nodes, as inventory/gpu.py would give them."""
    registry = {name: entry for name, entry in sandbox_nodes.read_registry().items() if name in hosts}
    document = inventory_document(registry, aptrepo.running())
    path = Path(directory) / f"hosts-{len(hosts)}-{hosts[0]}.yml"
    path.write_text(yaml.safe_dump(document))
    return path


def pyinfra(hosts_path, *args):
    """(wall seconds, CPU seconds of the pyinfra process, result) of one run."""
    env = dict(os.environ, GPU_BRINGUP_HOSTS=str(hosts_path))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([PYINFRA, "-y", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return time.perf_counter() - started, cpu, result


def median_run(hosts_path, args, runs, expect=(0,), cpu=False):
    """Median wall seconds of ``runs`` runs (and median control CPU seconds with ``cpu``)."""
    times, cpus = [], []
    for _ in range(runs):
        seconds, used, result = pyinfra(hosts_path, *args)
        if result.returncode not in expect:
            raise SystemExit(f"pyinfra {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
        times.append(seconds)
        cpus.append(used)
    return (statistics.median(times), statistics.median(cpus)) if cpu else statistics.median(times)


def operations_per_host(hosts_path, hosts):
    """(no-change operations per host, changed operations) of a --json converged deploy."""
    _, _, result = pyinfra(hosts_path, "--json", "--data", STEPS, "inventory/gpu.py", "deploy.py")
    payload = json.loads(result.stdout)["results"]
    changed = [op["name"] for op in payload["operations"] if op["success"]]
    return payload["totals"]["hosts"] // len(hosts), changed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--deploy-nodes", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--net", default="127.0.8", help="the nodes' addresses: NET.1 ... NET.N")
    parser.add_argument("--keep", action="store_true", help="leave the nodes running")
    args = parser.parse_args()
    aptrepo.ensure_served()
    start(args.nodes, args.net)
    out = tempfile.mkdtemp(prefix="fleet-scale-")
    try:
        measure(args, out)
    finally:
        if not args.keep:
            sandbox_nodes.down(names(args.nodes))
    return 0


def measure(args, out):
    validate = ["inventory/gpu.py", "validate.py"]
    floor_fact = ["inventory/gpu.py", "fact", "server.Hostname"]
    times = {}
    for count in sorted({1, min(10, args.nodes), args.nodes}):
        path = hosts_file(out, names(count))
        times[count], cpu = median_run(path, validate, args.runs, cpu=True)
        fact_seconds, fact_cpu = median_run(path, floor_fact, args.runs, cpu=True)
        print(f"validate.py, {count:2d} node(s): {times[count]:.2f}s, control CPU {cpu:.2f}s; one-fact run "
              f"(server.Hostname) {fact_seconds:.2f}s, control CPU {fact_cpu:.2f}s (medians of {args.runs})")
    for count in sorted(times)[1:]:
        print(f"ratio validate {count} nodes / 1 node: {times[count] / times[1]:.2f}"
              f"{' (target <= 3)' if count == args.nodes else ''}")

    one, many = names(1), names(args.deploy_nodes, first=2)
    deploy = ["--data", STEPS, "inventory/gpu.py", "deploy.py"]
    one_seconds, one_cpu = median_run(hosts_file(out, one), deploy, 1, cpu=True)
    print(f"deploy.py (repo, toolkit, env), 1 node: {one_seconds:.1f}s, control CPU {one_cpu:.2f}s")
    many_path = hosts_file(out, many)
    many_seconds, many_cpu = median_run(many_path, deploy, 1, cpu=True)
    print(f"deploy.py (repo, toolkit, env), {len(many)} nodes: {many_seconds:.1f}s, control CPU {many_cpu:.2f}s")
    print(f"ratio deploy {len(many)} nodes / 1 node: {many_seconds / one_seconds:.2f}")

    operations, changed = operations_per_host(many_path, many)
    if changed:
        raise SystemExit(f"the re-run changed {changed}: not converged")
    converged = median_run(many_path, deploy, args.runs)
    floor = median_run(many_path, ["--data", f"floor_operations={operations}", "inventory/gpu.py",
                                   "bench/floor_deploy.py"], args.runs)
    print(f"converged deploy.py, {len(many)} nodes, {operations} operations each: {converged:.2f}s "
          f"(median of {args.runs})")
    print(f"floor, {len(many)} nodes, {operations} no-change files.directory each: {floor:.2f}s")
    print(f"ratio converged deploy / floor: {converged / floor:.2f} (target <= 2)")


if __name__ == "__main__":
    sys.exit(main())
