"""What the serving group's check (tests/node/test_group.py) runs on each member and how it
judges the answers: pure functions, tested without a node (tests/unit/test_node_group.py).

Every member runs GROUP_SCRIPT at once, as the service user with the service's environment
(its env file holds the plan's ``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME``), one rank per
member in the group's rank order, meeting at the head's address (``--dist-init-addr``'s) on a
port free there. As SGLang's ranks do (``torch.distributed``, ``init_method="tcp://..."``):

- Gloo: an all-reduce of CPU tensors over TCP, through the interface ``GLOO_SOCKET_IFNAME``
  names (torch's ProcessGroupGloo binds every pair to that interface's address): the path
  SGLang's CPU groups take between nodes;
- NCCL, once every member's CUDA started (a Gloo all-reduce of that first, so a member
  without CUDA never leaves the others waiting in a collective): an all-reduce of a tensor
  on each member's first GPU, through NCCL's network (``NCCL_SOCKET_IFNAME``, InfiniBand
  where ``NCCL_IB_HCA`` names ports). The GPUs within one node are test_comm.py's.

Both check every element's sum: values 0..PATTERN-1 repeat, rank r adds r, so each sum is an
exact float32 integer. Seconds and bytes are recorded, no bandwidth judged: the link between
nodes (a 1 GbE management network, 400 Gb/s InfiniBand) is not a fact the probe has.
"""

import shlex

from tests.node.script_answer import marked_answer

MARKER = "@@group "
PATTERN = 1024
REDUCE_BYTES = 16 * 2**20
ITERATIONS = 5
# Seconds a member waits for the others (torch's rendezvous and collectives), and the whole
# script's bound (coreutils' timeout kills it after): a member that never arrives is a
# finding within a minute, not a hung suite.
WAIT_SECONDS = 60
RUN_SECONDS = 150

GROUP_SCRIPT = r"""
import datetime, json, os, sys, time
host, port, rank, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out = {"rank": rank, "world": world, "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
       "nccl_socket_ifname": os.environ.get("NCCL_SOCKET_IFNAME")}
def why(error):
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"
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
try:
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=%(wait)d))
    out["gloo"] = reduce("cpu")
except Exception as error:
    out["gloo"] = {"error": why(error)}
else:
    try:
        torch.cuda.init()
        torch.cuda.set_device(0)
        cuda = None
    except Exception as error:
        cuda = why(error)
    started = torch.tensor([0 if cuda else 1], dtype=torch.int32)
    try:
        dist.all_reduce(started, op=dist.ReduceOp.MIN)
        if cuda:
            out["nccl"] = {"error": cuda}
        elif not started.item():
            out["nccl"] = {"error": "CUDA did not start on every member: no NCCL all-reduce"}
        else:
            out["nccl"] = reduce("cuda", dist.new_group(backend="nccl"))
            version = torch.cuda.nccl.version()
            out["nccl"]["version"] = ".".join(map(str, version)) if isinstance(version, tuple) else version
    except Exception as error:
        out["nccl"] = {"error": why(error)}
    dist.destroy_process_group()
print("%(marker)s" + json.dumps(out), flush=True)
""" % {"pattern": PATTERN, "size": REDUCE_BYTES, "iterations": ITERATIONS, "wait": WAIT_SECONDS,
       "marker": MARKER}

# A free port on the head's address, asked of the head's own python3 (the system's): the
# dist-init port itself is the serving SGLang's.
FREE_PORT_SCRIPT = ("import socket, sys; family = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET; "
                    "s = socket.socket(family); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])")


def head_host(dist_init_addr):
    """The host part of ``--dist-init-addr`` as torch's ``tcp://`` URL takes it.

    >>> head_host("10.0.0.1:29500"), head_host("[fd00::1]:29500")
    ('10.0.0.1', '[fd00::1]')
    """
    return dist_init_addr.rpartition(":")[0]


def free_port_command(python, dist_init_addr):
    """The command that prints a port free on the head's address.

    >>> free_port_command("/usr/bin/python3", "[fd00::1]:29500").endswith(" fd00::1")
    True
    """
    address = head_host(dist_init_addr).strip("[]")
    return f"{shlex.quote(python)} -I -c {shlex.quote(FREE_PORT_SCRIPT)} {shlex.quote(address)}"


def group_command(python, dist_init_addr, port, rank, world, seconds=RUN_SECONDS):
    """The shell command one member runs: GROUP_SCRIPT in the venv's ``python``, killed at
    ``seconds``.

    >>> group_command("/v/bin/python", "10.0.0.1:29500", 41000, 1, 2).startswith("timeout -k 10 150 /v/bin/python -c ")
    True
    """
    arguments = " ".join(shlex.quote(str(value)) for value in (head_host(dist_init_addr), port, rank, world))
    return f"timeout -k 10 {int(seconds)} {shlex.quote(python)} -c {shlex.quote(GROUP_SCRIPT)} {arguments}"


def parse_group_output(stdout):
    """The one ``@@group`` answer of GROUP_SCRIPT, or None."""
    return marked_answer(stdout, MARKER)


def _others(answers, member, backend):
    """``name: why`` of the other members whose ``backend`` part failed, in rank order."""
    return [f"{name}: {answer.get('run_error') or (answer.get(backend) or {}).get('error') or 'no answer'}"
            for name, answer in answers.items()
            if name != member and (answer.get("run_error") or "error" in (answer.get(backend) or {"error": ""}))]


def gloo_verdict(member, answers, planned_ifname):
    """(wrong, measured) of member ``member``'s Gloo all-reduce: ``wrong`` is "" when it reduced
    right through the interface the plan chose (``planned_ifname``, None when the plan names none).
    ``answers``: member -> its GROUP_SCRIPT answer, or ``{"run_error": why}``, in rank order.

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


def nccl_verdict(member, answers):
    """(wrong, measured) of member ``member``'s NCCL all-reduce across the group's first GPUs.

    >>> right = {"wrong": 0, "bytes": 16, "iterations": 5, "seconds": 0.01, "version": "2.30.7"}
    >>> nccl_verdict("a", {"a": {"nccl": right}, "b": {"nccl": right}})
    ('', '2 members (GPU 0 each), 16 bytes: 5 all-reduces in 0.01 s, NCCL 2.30.7')
    >>> nccl_verdict("a", {"a": {"nccl": {"error": "RuntimeError: no driver"}}, "b": {"nccl": right}})[0]
    'RuntimeError: no driver'
    """
    own = answers.get(member) or {"run_error": "no answer"}
    if own.get("run_error"):
        return f"no answer: {own['run_error']}", ""
    nccl = own.get("nccl") or {"error": "no NCCL answer (the Gloo group did not form)"}
    if "error" in nccl:
        return nccl["error"], ""
    others = _others(answers, member, "nccl")
    if others:
        return f"the group did not reduce: {'; '.join(others)}", ""
    if nccl["wrong"]:
        return f"{nccl['wrong']} of {nccl['bytes'] // 4} sums wrong", ""
    return "", (f"{len(answers)} members (GPU 0 each), {nccl['bytes']} bytes: {nccl['iterations']} all-reduces in "
                f"{nccl['seconds']} s, NCCL {nccl.get('version')}")
