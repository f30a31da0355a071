"""What the serving group's check (tests/node/test_group.py) runs on each member and how it
judges the answers: pure functions, tested without a node (tests/unit/test_node_group.py).

Every member runs GROUP_SCRIPT at once, as the service user with the service's environment
(its env file holds the plan's ``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME``), one rank per
member in the group's rank order, meeting at the head's address (``--dist-init-addr``'s) on a
port free there. As SGLang's ranks do (``torch.distributed``, ``init_method="tcp://..."``):

- Gloo: an all-reduce of CPU tensors over TCP, through the interface ``GLOO_SOCKET_IFNAME``
  names (torch's ProcessGroupGloo binds every pair to that interface's address): the path
  SGLang's CPU groups take between nodes;
- NCCL, once every member's CUDA started (each member starts it within CUDA_START_SECONDS, then a
  Gloo all-reduce tells every member which did, so a member without CUDA never leaves the
  others waiting in a collective): an all-reduce of a tensor on each member's first GPU,
  through NCCL's network (``NCCL_SOCKET_IFNAME``, InfiniBand where ``NCCL_IB_HCA`` names
  ports: NCCL's own log says which network it took, and a plan that names HCAs fails on any
  other). The GPUs within one node are test_comm.py's.

Both check every element's sum: values 0..PATTERN-1 repeat, rank r adds r, so each sum is an
exact float32 integer. Seconds and bytes are recorded, no bandwidth judged: the link between
nodes (a 1 GbE management network, 400 Gb/s InfiniBand) is not a fact the probe has.
"""

import shlex

from tests.node.script_answer import marked_answer

GLOO_MARKER, NCCL_MARKER = "@@group-gloo ", "@@group-nccl "
PATTERN = 1024
REDUCE_BYTES = 16 * 2**20
ITERATIONS = 5
# Seconds a member waits for the others (torch's rendezvous, each collective, NCCL's group),
# and the whole script's bound (coreutils' timeout kills it after): a member
# that never arrives is a finding within a minute, not a hung suite.
WAIT_SECONDS = 60
# CUDA's start on a member (a bad GPU can hang cuInit), well inside WAIT_SECONDS: the members
# whose CUDA started wait for it in a Gloo collective.
CUDA_START_SECONDS = 30
RUN_SECONDS = 150

# Each part answers on a line of its own as soon as it is done: a member killed at the bound
# while NCCL hangs keeps the Gloo answer it gave. NCCL says which network it took ("Using
# network IB") at NCCL_DEBUG=INFO, written to a file of this check's own, not the output.
GROUP_SCRIPT = r"""
import datetime, glob, json, os, re, subprocess, sys, time
host, port, rank, world, scratch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
wait = datetime.timedelta(seconds=%(wait)d)
base = {"rank": rank, "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
        "nccl_socket_ifname": os.environ.get("NCCL_SOCKET_IFNAME")}
os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=os.path.join(scratch, "nccl.%%p"))
def why(error):
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"
def done(marker, answer):
    print(marker + json.dumps(answer), flush=True)
def finish():
    sys.stdout.flush()
    os._exit(0)  # the answers are out: no teardown of torch's or NCCL's at exit may hold it
def reduce(device, group=None):
    pattern = torch.arange(%(pattern)d, dtype=torch.float32, device=device).repeat(%(size)d // 4 // %(pattern)d)
    want = pattern * world + world * (world - 1) / 2
    data = pattern + rank
    dist.all_reduce(data, group=group)
    wrong = int((data != want).sum().item())
    timed = torch.empty_like(pattern)
    if device != "cpu":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(%(iterations)d):
        dist.all_reduce(timed, group=group)
    if device != "cpu":
        torch.cuda.synchronize()
    return {"wrong": wrong, "bytes": data.numel() * 4, "iterations": %(iterations)d,
            "seconds": round(time.perf_counter() - start, 4)}
def network():
    for path in glob.glob(os.path.join(scratch, "nccl.*")):
        with open(path, errors="replace") as log:
            found = re.search(r"Using network (\S+)", log.read())
        if found:
            return found.group(1)
    return None
try:
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank, world_size=world, timeout=wait)
    gloo = reduce("cpu")
except Exception as error:
    gloo = {"error": why(error)}
done("%(gloo_marker)s", {**base, "gloo": gloo})
if "error" in gloo:
    finish()
# CUDA is first started in a child, killed at its bound: a start hung in the driver holds the
# interpreter of the process it runs in, which could then not answer.
try:
    trial = subprocess.run([sys.executable, "-c", "import torch; torch.cuda.init()"], capture_output=True,
                           text=True, timeout=%(cuda_start)d, stdin=subprocess.DEVNULL)
    cuda_error = None if trial.returncode == 0 else (
        ([line for line in trial.stderr.strip().splitlines() if line.strip()] or [f"exit {trial.returncode}"])[-1][:300])
except subprocess.TimeoutExpired:
    cuda_error = "CUDA did not start within %(cuda_start)d s (hung)"
if not cuda_error:
    try:
        torch.cuda.init()
        torch.cuda.set_device(0)
    except Exception as error:
        cuda_error = why(error)
nccl = {}
try:
    every = torch.zeros(world, dtype=torch.int32)
    every[rank] = 0 if cuda_error else 1
    dist.all_reduce(every)
    not_started = [other for other in range(world) if not every[other].item()]
    if cuda_error:
        nccl = {"cuda_error": cuda_error}
    elif not_started:
        nccl = {"not_started": not_started}
    else:
        nccl = reduce("cuda", dist.new_group(backend="nccl", timeout=wait))
        version = torch.cuda.nccl.version()
        nccl["version"] = ".".join(map(str, version)) if isinstance(version, tuple) else version
        nccl["network"] = network()
except Exception as error:
    nccl = {**nccl, "error": why(error)}
done("%(nccl_marker)s", nccl)
try:
    dist.destroy_process_group()
except Exception:
    pass
finish()
""" % {"pattern": PATTERN, "size": REDUCE_BYTES, "iterations": ITERATIONS, "wait": WAIT_SECONDS,
       "cuda_start": CUDA_START_SECONDS, "gloo_marker": GLOO_MARKER, "nccl_marker": NCCL_MARKER}

# A port free on the head for torch's store, which listens on every address of the head's
# family: asked of the head's system python3 as nobody (nothing of root's is needed), bounded.
FREE_PORT_SCRIPT = ("import socket, sys; family = socket.getaddrinfo(sys.argv[1], None, 0, socket.SOCK_STREAM)[0][0]; "
                    "s = socket.socket(family); s.bind(('::' if family == socket.AF_INET6 else '0.0.0.0', 0)); "
                    "print(s.getsockname()[1])")


def head_host(dist_init_addr):
    """The host part of ``--dist-init-addr`` as torch's ``tcp://`` URL takes it.

    >>> head_host("10.0.0.1:29500"), head_host("[fd00::1]:29500")
    ('10.0.0.1', '[fd00::1]')
    """
    return dist_init_addr.rpartition(":")[0]


def free_port_command(python, dist_init_addr):
    """The command that prints a port free on the head (as ``nobody``, within 10 s).

    >>> free_port_command("/usr/bin/python3", "[fd00::1]:29500").startswith("timeout -k 5 10 runuser -u nobody -- ")
    True
    """
    address = head_host(dist_init_addr).strip("[]")
    return (f"timeout -k 5 10 runuser -u nobody -- {shlex.quote(python)} -I -c {shlex.quote(FREE_PORT_SCRIPT)} "
            f"{shlex.quote(address)}")


def group_command(python, dist_init_addr, port, rank, world, seconds=RUN_SECONDS):
    """The shell command one member runs: GROUP_SCRIPT in the venv's ``python``, killed at
    ``seconds``.

    >>> " timeout -k 10 150 /v/bin/python -c " in group_command("/v/bin/python", "10.0.0.1:29500", 41000, 1, 2)
    True
    """
    arguments = " ".join(shlex.quote(str(value)) for value in (head_host(dist_init_addr), port, rank, world))
    # The script's scratch (NCCL's log) is made and removed by the shell around it: gone even
    # when timeout killed the script.
    return (f'scratch=$(mktemp -d) || exit 1; trap \'rm -rf "$scratch"\' EXIT; '
            f'timeout -k 10 {int(seconds)} {shlex.quote(python)} -c {shlex.quote(GROUP_SCRIPT)} {arguments} "$scratch"')


def parse_group_output(stdout, returncode):
    """One member's answer from its output: the Gloo part (with the service env's interfaces)
    and the NCCL part as each was printed, or ``{"run_error": why}`` when the Gloo part is not
    there exactly once. A missing NCCL part says how the script ended.

    >>> parse_group_output('@@group-gloo {"gloo": {"error": "x"}}\\n', 1)
    {'gloo': {'error': 'x'}}
    >>> parse_group_output('@@group-gloo {"gloo": {"wrong": 0}}\\n', 124)["nccl"]
    {'error': 'no NCCL answer: killed at the bound (150 s)'}
    >>> parse_group_output("", 1)
    {'run_error': 'exit 1, no @@group-gloo answer'}
    """
    answer = marked_answer(stdout, GLOO_MARKER)
    if answer is None:
        return {"run_error": f"exit {returncode}, no {GLOO_MARKER.strip()} answer"}
    if "error" in (answer.get("gloo") or {}):
        return answer
    nccl = marked_answer(stdout, NCCL_MARKER)
    ended = f"killed at the bound ({RUN_SECONDS} s)" if returncode in (124, 137) else f"exit {returncode}"
    return {**answer, "nccl": nccl if nccl is not None else {"error": f"no NCCL answer: {ended}"}}


def _failed(answer, part):
    """Why ``part`` of one member's answer failed, or "" when it did not."""
    if answer.get("run_error"):
        return answer["run_error"]
    found = answer.get(part)
    if found is None:
        return "no answer"
    return found.get("error") or found.get("cuda_error") or ""


def _others(answers, member, part):
    """``name: why`` of the other members whose ``part`` failed, in rank order."""
    return [f"{name}: {_failed(answer, part)}" for name, answer in answers.items()
            if name != member and _failed(answer, part)]


def gloo_verdict(member, answers, planned_ifname):
    """(wrong, measured) of member ``member``'s Gloo all-reduce: ``wrong`` is "" when it reduced
    right through the interface the plan chose (``planned_ifname``, None when the plan names none).
    ``answers``: member -> its parsed answer (parse_group_output), in rank order.

    >>> right = {"wrong": 0, "bytes": 16, "iterations": 5, "seconds": 0.01}
    >>> ok = {"a": {"gloo": right, "gloo_socket_ifname": "eth0"}, "b": {"gloo": right, "gloo_socket_ifname": "eth0"}}
    >>> gloo_verdict("b", ok, "eth0")
    ('', '2 members, 16 bytes: 5 all-reduces in 0.01 s over eth0')
    >>> gloo_verdict("b", {**ok, "a": {"run_error": "exit 124"}}, "eth0")[0]
    'the group did not reduce: a: exit 124'
    >>> gloo_verdict("b", ok, "ens1")[0]
    "the service env's GLOO_SOCKET_IFNAME is 'eth0', the plan chose 'ens1'"
    """
    own = answers.get(member) or {"run_error": "no answer"}
    if own.get("run_error"):
        return f"no answer: {own['run_error']}", ""
    if own.get("gloo_socket_ifname") != planned_ifname:
        return (f"the service env's GLOO_SOCKET_IFNAME is {own.get('gloo_socket_ifname')!r}, the plan chose "
                f"{planned_ifname!r}"), ""
    gloo = own.get("gloo") or {"error": "no Gloo answer"}
    others = _others(answers, member, "gloo")
    if "error" in gloo:
        return f"{gloo['error']}" + (f" (and {'; '.join(others)})" if others else ""), ""
    if others:
        return f"the group did not reduce: {'; '.join(others)}", ""
    if gloo["wrong"]:
        return f"{gloo['wrong']} of {gloo['bytes'] // 4} sums wrong", ""
    return "", (f"{len(answers)} members, {gloo['bytes']} bytes: {gloo['iterations']} all-reduces in "
                f"{gloo['seconds']} s over {planned_ifname or 'the interface Gloo chose'}")


def nccl_verdict(member, answers, planned_env):
    """(wrong, measured) of member ``member``'s NCCL all-reduce across the group's first GPUs, by
    the plan's group env (``planned_env``: its NCCL_SOCKET_IFNAME, and NCCL_IB_HCA where RDMA
    ports are active, when NCCL must take InfiniBand).

    >>> right = {"wrong": 0, "bytes": 16, "iterations": 5, "seconds": 0.01, "version": "2.30.7", "network": "Socket"}
    >>> ok = {"a": {"nccl": right, "nccl_socket_ifname": "=eth0"}, "b": {"nccl": right, "nccl_socket_ifname": "=eth0"}}
    >>> nccl_verdict("a", ok, {"NCCL_SOCKET_IFNAME": "=eth0"})
    ('', '2 members (GPU 0 each), 16 bytes: 5 all-reduces in 0.01 s, NCCL 2.30.7 over its Socket network')
    >>> nccl_verdict("a", ok, {"NCCL_SOCKET_IFNAME": "=eth0", "NCCL_IB_HCA": "=mlx5_0:1"})[0]
    'NCCL took its Socket network, not InfiniBand (the plan names NCCL_IB_HCA==mlx5_0:1)'
    """
    own = answers.get(member) or {"run_error": "no answer"}
    if own.get("run_error"):
        return f"no answer: {own['run_error']}", ""
    nccl = own.get("nccl")
    if nccl is None:
        return f"no NCCL all-reduce: the Gloo group did not form ({_failed(own, 'gloo')})", ""
    if own.get("nccl_socket_ifname") != planned_env.get("NCCL_SOCKET_IFNAME"):
        return (f"the service env's NCCL_SOCKET_IFNAME is {own.get('nccl_socket_ifname')!r}, the plan chose "
                f"{planned_env.get('NCCL_SOCKET_IFNAME')!r}"), ""
    if "cuda_error" in nccl:
        return nccl["cuda_error"], ""
    if "not_started" in nccl:
        names = list(answers)
        late = [f"{names[rank]}: {_failed(answers[names[rank]], 'nccl') or 'did not start'}"
                for rank in nccl["not_started"] if rank < len(names)]
        return f"CUDA did not start on every member, no NCCL all-reduce: {'; '.join(late)}", ""
    others = _others(answers, member, "nccl")
    if "error" in nccl:
        return nccl["error"] + (f" (and {'; '.join(others)})" if others else ""), ""
    if others:
        return f"the group did not reduce: {'; '.join(others)}", ""
    if nccl["wrong"]:
        return f"{nccl['wrong']} of {nccl['bytes'] // 4} sums wrong", ""
    # NCCL's own IB transport says "IB"; a net plugin on it (SHARP's) names its own "IB..." one.
    if planned_env.get("NCCL_IB_HCA") and not str(nccl.get("network") or "").startswith("IB"):
        return (f"NCCL took its {nccl.get('network') or 'unnamed'} network, not InfiniBand (the plan names "
                f"NCCL_IB_HCA={planned_env['NCCL_IB_HCA']})"), ""
    return "", (f"{len(answers)} members (GPU 0 each), {nccl['bytes']} bytes: {nccl['iterations']} all-reduces in "
                f"{nccl['seconds']} s, NCCL {nccl.get('version')} over its {nccl.get('network') or 'unnamed'} network")
