"""A serving group's member (issue 38): its place in the group, SGLang's multi-node arguments for
its unit, the NCCL and Gloo environment of its env file, and what this node alone shows of the
group (the route to the head, RDMA without GPUDirect). The checks that compare members live in
bringup/group_preflight.py; ranks and arguments are bringup/group.py's.

Deploy changes, restarts and gates a group's members as one (control/group_gate.py).

    >>> from bringup.config import Config
    >>> from bringup.group import Member
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> member = Member("gpu-b", "llama", 1, ("gpu-a", "gpu-b"), "10.0.0.1", 29500)
    >>> facts = {"route": {"to": "10.0.0.1", "interface": "ens1f0np0", "local": False, "error": None}}
    >>> context = PlanContext.of(facts, Config(service_group="llama"), None, found.append, member=member)
    >>> plan = group_plan(context)
    >>> plan.rank, plan.args[-1], plan.env["NCCL_SOCKET_IFNAME"], [f.code for f in found]
    (1, '10.0.0.1:29500', '=ens1f0np0', [])
"""

from bringup import redact
from bringup.findings import BLOCKER, FIX, WARNING, Finding
from bringup.group import GROUP_ENV_KEYS, active_hcas, group_environment
from bringup.plan.model import GroupPlan


def group_plan(context):
    """This member's GroupPlan (None for a node serving alone), its findings reported."""
    member = context.member
    if member is None:
        return None
    env, problems = group_environment(context.facts, context.config.service_group_interface)
    check_route(context, problems)
    check_peermem(context)
    return GroupPlan(name=member.group, rank=member.rank, members=member.members,
                     dist_init_addr=member.dist_init_addr, args=member.args, env=env)


def check_route(context, problems):
    """The route the probe found to the group's peer (the head; the head's: rank 1's). No route,
    or one to this node's own address, is a blocker: the rendezvous cannot happen. An interface
    that could not be named otherwise is a warning: NCCL and Gloo then pick one themselves."""
    route, member = context.facts.get("route") or {}, context.member
    peer = f"the head {member.head}" if member.rank else f"rank 1 ({member.members[1]})"
    fix_address = ("set the head's service_group_address to the address its members reach it by"
                   if member.rank else f"set {member.members[1]}'s service_group_address (or ssh_hostname) to its "
                   "address on the serving network")
    if route.get("error"):
        context.add(Finding("GROUP_NO_ROUTE", BLOCKER, f"{peer} at {route.get('to')}: {route['error']}",
                            f"{fix_address}; check that this node resolves and routes to it (ip route get)"))
    elif route.get("local"):
        context.add(Finding("GROUP_NO_ROUTE", BLOCKER, f"{peer} at {route.get('to')} is this node's own address",
                            f"{fix_address}: each member needs an address of its own"))
    elif problems:
        context.add(Finding("GROUP_INTERFACE_UNDECIDED", WARNING,
                            f"NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are left out: {'; '.join(problems)}",
                            "set service_group_interface to the interface of the serving network (ip -br addr)"))


def check_peermem(context):
    """RDMA ports active and ``nvidia_peermem`` not loaded: NCCL runs over InfiniBand/RoCE without
    GPUDirect RDMA, every transfer staged through host memory, and says so only at NCCL_DEBUG=INFO.

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> ib = {"devices": [{"name": "mlx5_0", "ports": [{"port": "1", "state": "ACTIVE"}]}], "nvidia_peermem": False}
    >>> found = []
    >>> check_peermem(PlanContext.of({"infiniband": ib}, Config(), None, found.append))
    >>> [f.code for f in found]
    ['GROUP_PEERMEM_MISSING']
    """
    infiniband = context.facts.get("infiniband") or {}
    hcas = active_hcas(infiniband)
    if hcas and not infiniband.get("nvidia_peermem"):
        context.add(Finding("GROUP_PEERMEM_MISSING", WARNING,
                            f"RDMA ports {', '.join(hcas)} are active and nvidia_peermem is not loaded: NCCL's "
                            "transfers between nodes go through host memory (GPUDirect RDMA off)",
                            "load it (modprobe nvidia_peermem) and keep it loaded at boot "
                            "(echo nvidia_peermem > /etc/modules-load.d/nvidia-peermem.conf)"))


# A port in these states is coming up (drivers/infiniband/core/sysfs.c state_show): its HCA may
# be ACTIVE a moment later, so a key naming it is not taken back on this look.
PORT_COMING_UP = ("INIT", "ARMED", "ACTIVE_DEFER")


def taken_back(context, env):
    """The group's env file keys deploy takes out (key -> the value the file holds), ``env`` the
    plan's. On a host serving alone, the group keys deploy wrote (its record, the probe's
    ``service_env_owned``): the host left its group. On a member, ``NCCL_IB_HCA`` once the probe
    read the RDMA ports, found none active and none coming up: deploy's, or one set by hand (a
    port long gone would send NCCL there; said first, as a fix). A member's interface keys are
    never taken back: the plan names them whenever the route is decided, and an undecided route
    (a warning) keeps the file's. The operator's own keys elsewhere stay.

    >>> from bringup.config import Config
    >>> from bringup.group import Member
    >>> from bringup.plan.context import PlanContext
    >>> left = {"service_env_owned": {"GLOO_SOCKET_IFNAME": "eth0", "HF_HUB_OFFLINE": "1"}}
    >>> taken_back(PlanContext.of(left, Config(), None, print), {})
    {'GLOO_SOCKET_IFNAME': 'eth0'}
    >>> member = Member("gpu-b", "llama", 1, ("gpu-a", "gpu-b"), "10.0.0.1", 29500)
    >>> found = []
    >>> facts = {"service_env": {"NCCL_IB_HCA": "=mlx5_9:1", "GLOO_SOCKET_IFNAME": "eth0"},
    ...          "infiniband": {"devices": []}}
    >>> context = PlanContext.of(facts, Config(service_group="llama"), None, found.append, member=member)
    >>> taken_back(context, {}), [f.code for f in found]
    ({'NCCL_IB_HCA': '=mlx5_9:1'}, ['SERVICE_ENV_OVERRIDDEN'])
    >>> taken_back(PlanContext.of({**facts, "infiniband": None}, Config(service_group="llama"), None, print,
    ...                           member=member), {})
    {}
    """
    if context.member is None:
        owned = context.facts.get("service_env_owned") or {}
        return {key: value for key, value in owned.items() if key in GROUP_ENV_KEYS and key not in env}
    found = context.facts.get("service_env") or {}
    infiniband = context.facts.get("infiniband")
    if "NCCL_IB_HCA" in env or "NCCL_IB_HCA" not in found or not isinstance(infiniband, dict):
        return {}
    if any(port.get("state") in PORT_COMING_UP for device in infiniband.get("devices") or []
           for port in device.get("ports") or []):
        return {}
    owned = context.facts.get("service_env_owned") or {}
    if owned.get("NCCL_IB_HCA") != found["NCCL_IB_HCA"] and "env" in context.config.deploy_steps:
        shown = redact.env({"NCCL_IB_HCA": found["NCCL_IB_HCA"]})
        context.add(Finding("SERVICE_ENV_OVERRIDDEN", FIX,
                            f"{context.config.service_env_file} sets NCCL_IB_HCA={shown['NCCL_IB_HCA']}, which the "
                            "serving group leaves unset: no RDMA port is active (deploy removes it)",
                            "the group decides NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and NCCL_IB_HCA (set "
                            "service_group_interface for the interface); keep your own keys through service_env"))
    return {"NCCL_IB_HCA": found["NCCL_IB_HCA"]}
