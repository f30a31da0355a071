"""What the GPU communication checks (tests/node/test_comm.py, and bench/gpu_proof.py's
"p2p" and "all-reduce" steps) run on a node and how they judge the answers: pure
functions, tested without a node (tests/unit/test_node_comm.py).

One remote python run (COMM_SCRIPT) does both checks: torch starts CUDA once in the
parent; when it cannot (a sandbox node, a broken driver) it prints why and stops at
once, before any child process. Otherwise each part runs in child processes the parent
kills at its bound, so a peer copy or an all-reduce that hangs (P2P reported but
broken with ACS or the IOMMU on: NVIDIA/nccl#1999, #2079) is a finding, not a hung
suite.

Bus bandwidth is nccl-tests' (NVIDIA/nccl-tests, doc/PERFORMANCE.md, "AllReduce"): an
all-reduce of S bytes in t seconds on n ranks has algbw = S/t and
busbw = algbw * 2(n-1)/n, comparable with one rank's unidirectional link bandwidth
whatever n is. With one GPU 2(n-1)/n is 0: the all-reduce is proven to initialise and
reduce, and no bandwidth is claimed or judged.
"""

import re
import shlex

from tests.node.script_answer import marked_answer

# What COMM_SCRIPT's parts do, and their bounds (seconds, each part in its own child
# processes; the node suite's run of both stays under 3.5 minutes even when both hang).
ALL_REDUCE_BYTES = 256 * 2**20  # large enough that busbw is bandwidth, not latency (PERFORMANCE.md, "Time")
ALL_REDUCE_WARMUP, ALL_REDUCE_ITERS = 5, 20
P2P_BYTES = 64 * 2**20
P2P_SECONDS, ALL_REDUCE_SECONDS = 60, 150
PATTERN = 1024  # values 0..1023 repeat: every sum stays an exact float32 integer (< 2**24)

# Floors of the all-reduce's busbw (GB/s, 1e9 bytes) by the slowest link the ring must
# cross, as a FRACTION of that link's theoretical unidirectional bandwidth: busbw is
# measured against exactly that (PERFORMANCE.md: "The bus bandwidth should reflect the
# speed of the hardware bottleneck: NVLink, PCI, QPI, or network"). Conservative on
# purpose: no published expected busbw per node is cited here, only the link's
# theoretical figure; a quarter of it catches a ring that fell back to host memory, a
# link down, or P2P detoured through an ACS-redirected root complex, without a false
# alarm on a busy (serving) or older node. Raise it only with measurements to cite.
FLOOR_FRACTION = 0.25
# One NVLink link per direction, the slowest of the boards nvidia-smi shows `NV#` for: the
# GA102 bridge (RTX A6000, RTX 3090: 112.5 GB/s total bidirectional over 4 links, NVIDIA's
# RTX A6000 datasheet) is 14.0625; NVLink 1 (P100: 160 GB/s over 4) 20; NVLink 2, 3 and 4
# 25 (V100: 300 GB/s over 6, A100: 600 over 12, H100: 900 over 18: NVIDIA's datasheets,
# nvidia.com/en-us/data-center/nvlink/); NVLink 5 (B200: 1.8 TB/s over 18) 50. The topology
# names the links, not their generation, so the floor counts the slowest: on an HGX it is
# below a quarter of its own links, conservative as the fraction above.
NVLINK_LINK_GBPS = 14.0625
# PCIe 3.0 x16 per direction: 8 GT/s x 16 lanes, 128b/130b coding = 15.75 GB/s (PCI-SIG,
# PCI Express Base Specification 3.0). The lowest generation a current GPU trains at
# under load; Gen4/Gen5 boards (31.5 / 63 GB/s) pass it with room to spare.
PCIE_GBPS = 15.75
NVLINK = re.compile(r"^NV(?P<links>\d+)$")

WORKER = r"""
import datetime, json, sys, time
role = sys.argv[1]
def why(error):
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
def say(**fields):
    print("@@comm-worker " + json.dumps(fields), flush=True)
import torch
if role == "p2p":
    size, pairs = int(sys.argv[2]), json.loads(sys.argv[3])
    for a, b in pairs:
        say(pair=[a, b], started=True)
        try:
            source = torch.arange(%(pattern)d, dtype=torch.float32, device=f"cuda:{a}").repeat(size // 4 // %(pattern)d)
            # A first copy enables peer access (torch does, where CUDA allows it); the
            # second is timed, and its values checked on the receiving GPU.
            source.to(f"cuda:{b}")
            torch.cuda.synchronize(a)
            torch.cuda.synchronize(b)
            start = time.perf_counter()
            copied = source.to(f"cuda:{b}")
            torch.cuda.synchronize(b)
            seconds = time.perf_counter() - start
            want = torch.arange(%(pattern)d, dtype=torch.float32, device=f"cuda:{b}").repeat(size // 4 // %(pattern)d)
            wrong = int((copied != want).sum().item())
            say(pair=[a, b], wrong=wrong, seconds=seconds)
            del source, copied, want
        except Exception as error:
            say(pair=[a, b], error=why(error))
else:
    import torch.distributed as dist
    rank, world, store, size, warmup, iters = (int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]),
                                               int(sys.argv[6]), int(sys.argv[7]))
    try:
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method="file://" + store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=%(bound)d))
        pattern = torch.arange(%(pattern)d, dtype=torch.float32, device="cuda").repeat(size // 4 // %(pattern)d)
        want = pattern * world + world * (world - 1) / 2
        def checked():
            data = pattern + rank
            dist.all_reduce(data)
            torch.cuda.synchronize()
            return int((data != want).sum().item())
        wrong = checked()
        data = torch.empty_like(pattern)
        for _ in range(warmup):
            dist.all_reduce(data)
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(data)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        # Checked again after the timed iterations: a path that corrupts under load.
        wrong += checked()
        # torch.cuda.nccl.version() is a tuple in current torch, an int (2708) in older ones.
        version = torch.cuda.nccl.version() if rank == 0 else None
        say(rank=rank, wrong=wrong, seconds=seconds, iters=iters,
            nccl=".".join(map(str, version)) if isinstance(version, tuple) else version)
        dist.destroy_process_group()
    except Exception as error:
        say(rank=rank, error=why(error))
"""

PARENT = r"""
import json, os, subprocess, sys, tempfile, time
# CUDA's indices in nvidia-smi's order (PCI bus order), so a pair means the same two GPUs
# as the probe's topology; only this check's processes, never the service's.
os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
mode = sys.argv[1] if len(sys.argv) > 1 else "all"
out = {}
def why(error):
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
def worker_lines(stdout):
    # A child's answers, wherever NCCL's own output (NCCL_DEBUG) landed around them.
    found = []
    for line in stdout.splitlines():
        at = line.find("@@comm-worker ")
        if at < 0:
            continue
        try:
            found.append(json.JSONDecoder().raw_decode(line, at + len("@@comm-worker "))[0])
        except ValueError:
            continue
    return found
def children(commands, bound):
    # Each child's worker lines, and the ones still running at the bound (killed). Their
    # output goes to unnamed files, not pipes read one child after another: a rank that
    # writes more than a pipe holds (NCCL_DEBUG=INFO in the service env) must not block
    # while the ring waits for it.
    outputs = [(tempfile.TemporaryFile("w+", errors="replace"), tempfile.TemporaryFile("w+", errors="replace"))
               for _ in commands]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, *command], stdin=subprocess.DEVNULL, stdout=out,
                              stderr=err, text=True) for command, (out, err) in zip(commands, outputs)]
    deadline, overran, lines, errors = time.monotonic() + bound, [], [], []
    for index, proc in enumerate(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            # Every child still running at the bound is killed, and named as overrun.
            overran += [other_index for other_index, other in enumerate(procs) if other.poll() is None]
            for other in procs:
                if other.poll() is None:
                    other.kill()
            proc.wait()
        for stream in outputs[index]:
            stream.seek(0)
        stdout, stderr = (stream.read() for stream in outputs[index])
        lines += [found for found in worker_lines(stdout) if isinstance(found, dict)]
        if proc.returncode != 0 and index not in overran:
            errors.append(f"child {index} exit {proc.returncode}: {(stderr.strip().splitlines() or [''])[-1][:300]}")
    return lines, sorted(set(overran)), errors
try:
    import torch
    torch.cuda.init()
    count = out["count"] = torch.cuda.device_count()
except Exception as error:
    out["error"] = why(error)
    count = 0
if count and mode in ("all", "p2p"):
    access = {f"{a},{b}": bool(torch.cuda.can_device_access_peer(a, b))
              for a in range(count) for b in range(count) if a != b}
    pairs = [[int(x) for x in key.split(",")] for key, can in access.items() if can]
    started = time.monotonic()
    lines, overran, errors = children([["p2p", str(%(p2p_bytes)d), json.dumps(pairs)]], %(p2p_seconds)d) if pairs \
        else ([], [], [])
    done = {tuple(line["pair"]): line for line in lines if "started" not in line}
    begun = [tuple(line["pair"]) for line in lines if "started" in line]
    copies = {f"{a},{b}": done.get((a, b)) or ({"error": f"no answer within {%(p2p_seconds)d} s (hung)"}
                                                  if (a, b) in begun[-1:] and overran
                                                  else {"error": "not run (after a copy that hung)"})
              for a, b in map(tuple, pairs)}
    out["p2p"] = {"access": access, "copies": copies, "bytes": %(p2p_bytes)d, "errors": errors,
                  "seconds": round(time.monotonic() - started, 2)}
if count and mode in ("all", "all-reduce"):
    with tempfile.TemporaryDirectory(prefix="comm-check-") as scratch:
        store = os.path.join(scratch, "store")
        started = time.monotonic()
        lines, overran, errors = children(
            [["all-reduce", str(rank), str(count), store, str(%(ar_bytes)d), str(%(warmup)d), str(%(iters)d)]
             for rank in range(count)], %(ar_seconds)d)
    out["all_reduce"] = {"world": count, "bytes": %(ar_bytes)d, "ranks": {str(line["rank"]): line for line in lines},
                         "overran": [str(rank) for rank in overran], "errors": errors, "bound": %(ar_seconds)d,
                         "seconds": round(time.monotonic() - started, 2)}
print("@@comm " + json.dumps(out))
"""


def comm_script(p2p_seconds=P2P_SECONDS, all_reduce_seconds=ALL_REDUCE_SECONDS):
    """The python program run in the venv (``python -c SCRIPT MODE``, MODE ``all``,
    ``p2p`` or ``all-reduce``): prints one ``@@comm {json}`` line. Each part's child
    processes are killed at its bound in seconds (bench/gpu_proof.py gives less when
    its five minutes run short).

    >>> compile(comm_script(), "comm", "exec") and "@@comm " in comm_script()
    True
    """
    worker = WORKER % {"pattern": PATTERN, "bound": int(all_reduce_seconds)}
    return f"WORKER = {worker!r}\n" + PARENT % {
        "p2p_bytes": P2P_BYTES, "p2p_seconds": int(p2p_seconds), "ar_bytes": ALL_REDUCE_BYTES,
        "warmup": ALL_REDUCE_WARMUP, "iters": ALL_REDUCE_ITERS, "ar_seconds": int(all_reduce_seconds)}


COMM_SCRIPT = comm_script()
# The whole run's bound in the node suite (the parts' bounds, plus python, torch's import
# and CUDA's start in the parent, which nothing else bounds: a wedged GPU can hang
# cuInit), under the 300 s every snippet gets where systemd does not run the node.
RUN_SECONDS = P2P_SECONDS + ALL_REDUCE_SECONDS + 60


def comm_command(python, seconds=RUN_SECONDS, script=COMM_SCRIPT):
    """The shell command the node suite runs: COMM_SCRIPT in ``python``, its process group
    (the parent and every rank) killed at ``seconds`` by coreutils' ``timeout``.

    >>> comm_command("/v/bin/python").startswith("timeout -k 10 270 /v/bin/python -c ")
    True
    """
    return f"timeout -k 10 {int(seconds)} {shlex.quote(python)} -c {shlex.quote(script)} all"


def parse_comm_output(stdout):
    """The JSON line COMM_SCRIPT prints, or None: also when there is more than one (what
    else printed one, a ``sitecustomize`` or a ``.pth`` in the venv at start or at exit,
    must not stand in for the script's own answer).

    >>> parse_comm_output('noise\\n@@comm {"error": "RuntimeError: no driver"}\\n')
    {'error': 'RuntimeError: no driver'}
    >>> parse_comm_output('@@comm {"count": 8}\\n@@comm {"error": "RuntimeError: no driver"}\\n')
    """
    return marked_answer(stdout, "@@comm ")


def bus_bandwidth(size, seconds, world):
    """nccl-tests' all-reduce busbw in GB/s (1e9 bytes) for one all-reduce of ``size``
    bytes taking ``seconds`` on ``world`` ranks: algbw * 2(n-1)/n.

    >>> round(bus_bandwidth(256 * 2**20, 0.001, 8), 1)
    469.8
    >>> bus_bandwidth(256 * 2**20, 0.001, 1)
    0.0
    """
    return size / seconds / 1e9 * 2 * (world - 1) / world


def bandwidth_floor(topology, count):
    """The busbw floor (GB/s) for a node of ``count`` GPUs with the probe's ``topology``
    (driver_layer's pairs), and where it comes from; (None, why) with one GPU, where
    busbw is 0 by definition and nothing is judged.

    >>> bandwidth_floor([{"a": 0, "b": 1, "link": "NV18"}], 2)
    (63.28, 'NVLink: NV18 on every pair, 25% of 18 x 14.0625 GB/s')
    >>> bandwidth_floor([{"a": 0, "b": 1, "link": "NV4"}, {"a": 0, "b": 2, "link": "SYS"},
    ...                  {"a": 1, "b": 2, "link": "PIX"}], 3)[1]
    'PCIe: a pair without NVLink (0-2 SYS), 25% of PCIe 3.0 x16 (15.75 GB/s)'
    >>> bandwidth_floor(None, 2)[1]
    'PCIe: the topology was not read (nvidia-smi topo -m), 25% of PCIe 3.0 x16 (15.75 GB/s)'
    >>> bandwidth_floor([], 1)
    (None, 'one GPU: busbw is 0 by definition (2(n-1)/n), no floor applies')
    """
    if count < 2:
        return None, "one GPU: busbw is 0 by definition (2(n-1)/n), no floor applies"
    pcie = f"{FLOOR_FRACTION:.0%} of PCIe 3.0 x16 ({PCIE_GBPS} GB/s)"
    pairs = topology or []
    if topology is None or len(pairs) < count * (count - 1) // 2:
        return round(FLOOR_FRACTION * PCIE_GBPS, 2), f"PCIe: the topology was not read (nvidia-smi topo -m), {pcie}"
    slow = [pair for pair in pairs if not NVLINK.match(pair["link"])]
    if slow:
        first = slow[0]
        return (round(FLOOR_FRACTION * PCIE_GBPS, 2),
                f"PCIe: a pair without NVLink ({first['a']}-{first['b']} {first['link']}), {pcie}")
    links = min(int(NVLINK.match(pair["link"])["links"]) for pair in pairs)
    same = len({pair["link"] for pair in pairs}) == 1
    return (round(FLOOR_FRACTION * links * NVLINK_LINK_GBPS, 2),
            f"NVLink: NV{links} on {'every' if same else 'the narrowest'} pair, {FLOOR_FRACTION:.0%} of {links} x "
            f"{NVLINK_LINK_GBPS:g} GB/s")


def all_reduce_verdict(listed, answer, topology):
    """(what is wrong, what was measured) for COMM_SCRIPT's ``answer`` on a node whose
    nvidia-smi lists ``listed`` GPUs: "" wrong when every rank reduced right within the
    bound and the busbw (the slowest rank's time) is at or above the topology's floor,
    or, with one GPU, when the one rank reduced right.

    >>> def run(seconds):
    ...     ranks = {str(r): {"rank": r, "wrong": 0, "seconds": seconds * 20, "iters": 20} for r in range(8)}
    ...     return {"count": 8, "all_reduce": {"world": 8, "bytes": 256 * 2**20, "ranks": ranks, "overran": [],
    ...             "errors": []}}
    >>> all_reduce_verdict(8, run(0.002), [{"a": 0, "b": 1, "link": "NV18"}] * 28)[1]
    'busbw 234.9 GB/s (algbw 134.2 GB/s, 8 ranks, 256 MiB, 20 iterations); floor 63.28 GB/s (NVLink: NV18 on every pair, 25% of 18 x 14.0625 GB/s)'
    >>> all_reduce_verdict(8, run(0.02), [{"a": 0, "b": 1, "link": "NV18"}] * 28)[0]
    'busbw 23.5 GB/s (algbw 13.4 GB/s, 8 ranks, 256 MiB, 20 iterations) below the floor 63.28 GB/s (NVLink: NV18 on every pair, 25% of 18 x 14.0625 GB/s)'
    """
    if "error" in answer:
        return f"CUDA does not start: {answer['error']}", ""
    if answer.get("count") != listed:
        return (f"torch.cuda.device_count() is {answer.get('count')}, nvidia-smi lists {listed} (is "
                "CUDA_VISIBLE_DEVICES set in the service env?)"), ""
    run = answer.get("all_reduce")
    if not run:
        return "no all-reduce ran", ""
    world, size = run["world"], run["bytes"]
    wrong = [f"rank {rank} did not answer within {run.get('bound')} s (killed: hung)" for rank in run["overran"]]
    for rank in range(world):
        line = run["ranks"].get(str(rank))
        if line is None:
            if str(rank) not in run["overran"]:
                wrong.append(f"rank {rank} gave no answer")
        elif "error" in line:
            wrong.append(f"rank {rank}: {line['error']}")
        elif line["wrong"]:
            wrong.append(f"rank {rank}: {line['wrong']} wrong value(s) after all_reduce (sum of ranks' tensors)")
    wrong += run.get("errors") or []
    if wrong:
        return "; ".join(wrong), ""
    seconds = max(line["seconds"] / line["iters"] for line in run["ranks"].values())
    algbw = size / seconds / 1e9
    busbw = bus_bandwidth(size, seconds, world)
    measured = (f"busbw {busbw:.1f} GB/s (algbw {algbw:.1f} GB/s, {world} rank{'s' if world > 1 else ''}, "
                f"{size // 2**20} MiB, {run['ranks']['0']['iters']} iterations"
                + (f", NCCL {run['ranks']['0']['nccl']})" if run["ranks"]["0"].get("nccl") else ")"))
    floor, source = bandwidth_floor(topology, world)
    if floor is None:
        return "", f"all_reduce with world size 1 initialised NCCL and reduced right; {source}"
    if busbw < floor:
        return f"{measured} below the floor {floor} GB/s ({source})", measured
    return "", f"{measured}; floor {floor} GB/s ({source})"


def p2p_verdict(listed, answer, topology):
    """(what is wrong, what CUDA says) for COMM_SCRIPT's ``answer`` on a node whose
    nvidia-smi lists ``listed`` GPUs, against the probe's ``topology``: a pair linked by NVLink (NV#) must be peer-accessible both ways; every
    pair CUDA calls peer-accessible must copy right within the bound; PCIe pairs are
    reported as CUDA sees them, neither way a failure.

    >>> answer = {"count": 2, "p2p": {"access": {"0,1": True, "1,0": True}, "errors": [],
    ...           "copies": {"0,1": {"wrong": 0, "seconds": 0.002}, "1,0": {"wrong": 0, "seconds": 0.002}}}}
    >>> p2p_verdict(2, answer, [{"a": 0, "b": 1, "link": "NV18"}])
    ('', '0-1 NV18: P2P both ways, copies right (33.6, 33.6 GB/s)')
    >>> p2p_verdict(2, {"count": 2, "p2p": {"access": {"0,1": False, "1,0": False}, "copies": {}, "errors": []}},
    ...             [{"a": 0, "b": 1, "link": "NV4"}])[0]
    '0-1 NV4: NVLink but CUDA reports no P2P (0->1 no, 1->0 no)'
    """
    if "error" in answer:
        return f"CUDA does not start: {answer['error']}", ""
    run = answer.get("p2p")
    count = answer.get("count") or 0
    if count != listed:
        # Then CUDA's indices are not nvidia-smi's: no pair could be told from another.
        return (f"torch.cuda.device_count() is {count}, nvidia-smi lists {listed} (is CUDA_VISIBLE_DEVICES set in the "
                "service env?)"), ""
    if run is None:
        return "no P2P check ran", ""
    links = {(pair["a"], pair["b"]): pair["link"] for pair in topology or []}
    wrong, seen = [], []
    for a in range(count):
        for b in range(a + 1, count):
            link = links.get((a, b), "link unknown" if topology is None else "not in topo -m")
            ways = {(x, y): run["access"].get(f"{x},{y}", False) for x, y in ((a, b), (b, a))}
            if NVLINK.match(link) and not all(ways.values()):
                said = ", ".join(f"{x}->{y} {'yes' if can else 'no'}" for (x, y), can in ways.items())
                wrong.append(f"{a}-{b} {link}: NVLink but CUDA reports no P2P ({said})")
                continue
            rates = []
            for (x, y), can in ways.items():
                if not can:
                    continue
                copy = run["copies"].get(f"{x},{y}") or {"error": "no answer"}
                if "error" in copy:
                    wrong.append(f"{x}->{y} {link}: peer copy {copy['error']}")
                elif copy["wrong"]:
                    wrong.append(f"{x}->{y} {link}: peer copy has {copy['wrong']} wrong value(s)")
                else:
                    rates.append(f"{run.get('bytes', P2P_BYTES) / copy['seconds'] / 1e9:.1f}")
            said = {2: "P2P both ways", 1: "P2P one way only", 0: "no P2P (CUDA)"}[sum(ways.values())]
            seen.append(f"{a}-{b} {link}: {said}" + (f", copies right ({', '.join(rates)} GB/s)" if rates else ""))
    wrong += run.get("errors") or []
    if count < 2:
        seen.append("one GPU: no pair to check")
    return "; ".join(wrong), "; ".join(seen)
