"""Serving groups: hosts that serve one model together (issue 38), decided from the inventory.

SGLang serves a model across nodes with the same command on every node plus three arguments
(sgl-project/sglang ``python/sglang/srt/server_args.py``, ``ServerArgs``: ``dist_init_addr``
(``--dist-init-addr``, alias ``--nccl-init-addr``, "The host address for initializing
distributed backend (e.g., `192.168.0.2:25000`)"), ``nnodes`` (``--nnodes``, default 1) and
``node_rank`` (``--node-rank``, default 0); the names are the same in every stored version of the
file read, among them commit 001067fffe33427bee0ed2f007fb7551a1d76b44; the release this project
pins, 0.5.23, could not be read at its tag, and the node suite's parser check of
``service_args`` is what proves them on a node). ``check_server_args`` there requires
"tp_size must be divisible by number of nodes": ``tp_size`` below.

The hosts of a group are those whose ``service_group`` names it. Ranks are decided here, from
the inventory alone, the same way on every run: the members sorted by inventory name, the first
the head (rank 0, whose address is ``--dist-init-addr``). Nothing is stored: the same members
give the same ranks whatever order pyinfra lists the hosts in (its active hosts are a set).
A member added or removed changes ``--nnodes`` for every member, so every member's unit
changes and the group restarts as one; ranks after the changed name move up or down by one,
and removing the head makes the next name the head. Renaming a host is removing it and adding
another.

NCCL and Gloo pick their interface themselves unless told; on a node with several (a management
NIC, IPoIB, RoCE) they may pick one the head is not reachable through. ``group_environment``
names the one that routes to the head (the probe's ``route`` fact), or the operator's
interface, and the RDMA ports the probe found active (``infiniband``) for ``NCCL_IB_HCA``. NCCL's
values match by prefix unless they start with ``=`` (NCCL user guide, "Environment Variables",
NCCL_SOCKET_IFNAME: "To match (or not) an exact interface name, begin the prefix string with
the = character"; NCCL_IB_HCA likewise, ``=mlx5_0:1``): ``mlx5_1`` alone would also take
``mlx5_10``. Gloo takes one interface's exact name (torch ``GLOO_SOCKET_IFNAME``).

Pure: no I/O; bad input is a ``GroupError``, one line naming the host, the value and the fix.
"""

import ipaddress
import re
import shlex
from dataclasses import dataclass, replace

from bringup.layout import probe_address

# The arguments the group decides; the operator's service_args may not carry them.
MULTI_NODE_OPTIONS = ("--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr")
# SGLang's spellings of the tensor-parallel size (ServerArgs.tp_size: --tp-size, alias
# --tensor-parallel-size; --tp is argparse's unambiguous prefix of --tp-size).
TP_OPTIONS = ("--tp-size", "--tensor-parallel-size", "--tp")
# SGLang's spellings of the pipeline-parallel size (ServerArgs.pp_size: --pp-size, alias
# --pipeline-parallel-size): a group's GPUs are tp_size x pp_size.
PP_OPTIONS = ("--pp-size", "--pipeline-parallel-size")
# The environment keys a member's unit gets from the group (group_environment): the plan's own on a
# member, so service_env may not set them there.
GROUP_ENV_KEYS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA")
# The interface name the route may give before it enters a member's env file (the setting
# service_group_interface's shape): ip's answer is a program's output on the node (one the service
# user may own, run as that user), and a newline or a quote in it would break the env file's line;
# anything else is left out, said as a problem.
INTERFACE_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")
# The settings every member must hold alike: one model, one command, one rendezvous, one stack.
# service_rollback too: the group goes back whole, so every member must mean to.
GROUP_SETTINGS = ("service_model", "service_args", "service_group_port", "stack_sglang", "service_rollback")


class GroupError(ValueError):
    """An inventory's serving groups cannot be made; the message is one line with the fix."""


@dataclass(frozen=True)
class Member:
    """One host's place in its serving group.

    >>> member = Member("gpu-b", "llama", 1, ("gpu-a", "gpu-b"), "10.0.0.1", 29500)
    >>> member.head, member.nnodes, member.dist_init_addr
    ('gpu-a', 2, '10.0.0.1:29500')
    """

    host: str
    group: str
    rank: int
    members: tuple
    head_address: str
    port: int

    @property
    def head(self):
        return self.members[0]

    @property
    def nnodes(self):
        return len(self.members)

    @property
    def dist_init_addr(self):
        """``host:port``, an IPv6 address in brackets (``[fd00::1]:29500``), as SGLang splits it.

        >>> Member("b", "g", 1, ("a", "b"), "fd00::1", 29500).dist_init_addr
        '[fd00::1]:29500'
        """
        try:
            bracketed = ipaddress.ip_address(self.head_address).version == 6
        except ValueError:
            bracketed = False
        return f"[{self.head_address}]:{self.port}" if bracketed else f"{self.head_address}:{self.port}"

    @property
    def group_members(self):
        """Every member of this member's group, in rank order.

        >>> [(m.host, m.rank) for m in Member("gpu-b", "llama", 1, ("gpu-a", "gpu-b"), "10.0.0.1", 1).group_members]
        [('gpu-a', 0), ('gpu-b', 1)]
        """
        return tuple(replace(self, host=host, rank=rank) for rank, host in enumerate(self.members))

    @property
    def args(self):
        """SGLang's multi-node arguments for this member's unit.

        >>> Member("gpu-b", "llama", 1, ("gpu-a", "gpu-b"), "10.0.0.1", 29500).args
        ('--nnodes', '2', '--node-rank', '1', '--dist-init-addr', '10.0.0.1:29500')
        """
        return ("--nnodes", str(self.nnodes), "--node-rank", str(self.rank), "--dist-init-addr", self.dist_init_addr)


def tp_size(service_args, options=TP_OPTIONS):
    """The tensor-parallel size ``service_args`` gives SGLang (its default, 1, when none); with
    ``options=PP_OPTIONS`` the pipeline-parallel size.

    >>> tp_size("--tp 16"), tp_size("--tensor-parallel-size=8 --dp 2"), tp_size(""), tp_size("--tp x")
    (16, 8, 1, None)
    >>> tp_size("--tp 8 --pp-size 2", PP_OPTIONS)
    2
    """
    words = shlex.split(service_args or "")
    size = "1"
    for index, word in enumerate(words):
        option, equals, value = word.partition("=")
        if option in options:
            size = value if equals else (words[index + 1] if index + 1 < len(words) else "")
    return int(size) if size.isdigit() else None


def _member_settings(host, settings):
    """The group's settings one member holds, and the checks that need no other member."""
    args = settings.get("service_args", "") or ""
    for word in shlex.split(args):
        if word.partition("=")[0] in MULTI_NODE_OPTIONS:
            raise GroupError(f"{host}: service_args {args!r} sets {word.partition('=')[0]}: a serving group decides "
                             "--nnodes, --node-rank and --dist-init-addr itself; remove it from service_args")
    if settings.get("venv_managed") is False:
        raise GroupError(f"{host}: venv_managed is false: a serving group's members need the venv deploy manages, "
                         "whose releases let a held or failed group restart and go back as one; set venv_managed: "
                         "true, or leave service_group empty to serve alone")
    return {key: settings.get(key) for key in GROUP_SETTINGS}


def head_address(host, settings, head=True):
    """The address members reach the head by: its ``service_group_address`` (the serving network's,
    where SSH comes in by another), else its ``ssh_hostname`` (pyinfra's), else its inventory name;
    checked as probe_address checks it (it reaches the probe and the unit). ``head=False``: the
    address of rank 1, whose route the head's probe asks about (route_target), named so.

    >>> head_address("gpu-a", {"ssh_hostname": "10.20.0.11"}), head_address("gpu-a.lan", {})
    ('10.20.0.11', 'gpu-a.lan')
    >>> head_address("gpu-a", {"ssh_hostname": "10.20.0.11", "service_group_address": "192.168.100.11"})
    '192.168.100.11'
    """
    value = settings.get("service_group_address") or settings.get("ssh_hostname") or host
    try:
        return probe_address(value)
    except ValueError:
        whose = "the head's address" if head else "its address (rank 1, whose route the head's probe asks for)"
        raise GroupError(f"{host}: {whose} {value!r} is neither an IP address nor a host name: set its "
                         "service_group_address to the address the group's members reach it by") from None


def serving_groups(hosts):
    """The inventory's hosts (name -> settings: ``service_group``, ``service_group_port`` and the
    group's settings, ``ssh_hostname``) -> each group's members, by group name, each a tuple of
    ``Member`` in rank order. A host whose ``service_group`` is empty serves alone and is in none.

    >>> group = {"service_group": "llama", "service_group_port": 29500, "service_args": "--tp 16"}
    >>> groups = serving_groups({"gpu-b": group, "gpu-a": {**group, "ssh_hostname": "10.0.0.1"},
    ...                          "gpu-c": {"service_group": ""}})
    >>> [(member.host, member.rank, member.dist_init_addr) for member in groups["llama"]]
    [('gpu-a', 0, '10.0.0.1:29500'), ('gpu-b', 1, '10.0.0.1:29500')]
    """
    named = {}
    for host in sorted(hosts):
        group = hosts[host].get("service_group") or ""
        if group:
            named.setdefault(group, []).append(host)
    result = {}
    for group, members in sorted(named.items()):
        if len(members) < 2:
            raise GroupError(f"{members[0]}: service_group {group!r} has no other member: a serving group is two or "
                             "more hosts; give another host the same service_group, or leave it empty to serve alone")
        settings = {host: _member_settings(host, hosts[host]) for host in members}
        head = members[0]
        for host in members[1:]:
            for key in GROUP_SETTINGS:
                if settings[host][key] != settings[head][key]:
                    raise GroupError(f"{host}: {key} {settings[host][key]!r} differs from the head {head}'s "
                                     f"{settings[head][key]!r}: every member of service_group {group!r} serves the "
                                     f"same; set {key} once for the group")
        size = tp_size(settings[head]["service_args"])
        if size is None or size % len(members):
            raise GroupError(f"{head}: service_args {settings[head]['service_args']!r} gives a tensor-parallel size "
                             f"{size} that {len(members)} nodes cannot share (SGLang: tp_size must be divisible by the"
                             f" number of nodes); set --tp to a multiple of {len(members)} (the GPUs of all members)")
        address = head_address(head, hosts[head])
        # The setting's check gives the text of a port ("29500"); an inventory read alone, a number.
        given = settings[head]["service_group_port"]
        port = int(given) if str(given).isdigit() and 0 < int(given) < 65536 else None
        if port is None:
            raise GroupError(f"{head}: service_group_port {given!r} is no TCP port: set it (1 to 65535) to a port free "
                             "on the head and open to the group's members")
        result[group] = tuple(Member(host, group, rank, tuple(members), address, port)
                              for rank, host in enumerate(members))
    return result


def route_target(member, hosts):
    """The address whose route a member's probe asks about: the head's for a member; for the head
    itself (its own address routes through ``lo``), rank 1's.

    >>> hosts = {"gpu-a": {"ssh_hostname": "10.0.0.1"}, "gpu-b": {"ssh_hostname": "10.0.0.2"}}
    >>> route_target(Member("gpu-b", "g", 1, ("gpu-a", "gpu-b"), "10.0.0.1", 1), hosts)
    '10.0.0.1'
    >>> route_target(Member("gpu-a", "g", 0, ("gpu-a", "gpu-b"), "10.0.0.1", 1), hosts)
    '10.0.0.2'
    """
    if member.rank:
        return member.head_address
    peer = member.members[1]
    return head_address(peer, hosts.get(peer, {}), head=False)


def active_hcas(infiniband):
    """The probe's ``infiniband`` fact -> ``device:port`` of every ACTIVE port, in device order.

    >>> active_hcas({"devices": [{"name": "mlx5_1", "ports": [{"port": "1", "state": "DOWN"}]},
    ...                          {"name": "mlx5_0", "ports": [{"port": "1", "state": "ACTIVE"}]}]})
    ['mlx5_0:1']
    >>> active_hcas(None)
    []
    """
    return [f"{device['name']}:{port['port']}"
            for device in sorted((infiniband or {}).get("devices") or [], key=lambda device: device["name"])
            for port in device.get("ports") or [] if port.get("state") == "ACTIVE"]


def group_environment(facts, interface=""):
    """The NCCL and Gloo environment of one member's unit, from its facts (``route``,
    ``infiniband``) and the operator's interface (``interface``: the setting; empty: the
    interface that routes to the peer the probe asked about). Returns (environment, problems):
    a problem is a line saying what could not be decided and why; its key is then left out (NCCL
    and Gloo choose themselves, which is what fails on a node with several interfaces).

    >>> env, problems = group_environment({"route": {"interface": "ens1f0np0", "local": False, "error": None},
    ...     "infiniband": {"devices": [{"name": "mlx5_0", "ports": [{"port": "1", "state": "ACTIVE"}]}]}})
    >>> env, problems
    ({'NCCL_SOCKET_IFNAME': '=ens1f0np0', 'GLOO_SOCKET_IFNAME': 'ens1f0np0', 'NCCL_IB_HCA': '=mlx5_0:1'}, [])
    >>> group_environment({"route": None, "infiniband": {"devices": []}}, interface="bond0")[0]
    {'NCCL_SOCKET_IFNAME': '=bond0', 'GLOO_SOCKET_IFNAME': 'bond0'}
    """
    env, problems = {}, []
    route = facts.get("route")
    if not interface:
        if not route:
            problems.append("the probe was not asked for the route to the group's peer")
        elif route.get("error"):
            problems.append(f"no route to {route.get('to')}: {route['error']}")
        elif route.get("local") or route.get("interface") in (None, "lo"):
            problems.append(f"{route.get('to')} is this node's own address: the route names no interface")
        elif not INTERFACE_NAME.fullmatch(route["interface"]):
            problems.append(f"the route names the interface {route['interface']!r}, which is no plain interface name")
        else:
            interface = route["interface"]
    if interface:
        env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"] = f"={interface}", interface
    hcas = active_hcas(facts.get("infiniband"))
    if hcas:
        env["NCCL_IB_HCA"] = "=" + ",".join(hcas)
    return env, problems


def group_verdict(members, gates, failed):
    """Whether a serving group serves as one, and why not ("" when it does): every member's own
    readiness gate found it serving. ``members``: the group's hosts in rank order; ``gates``: host ->
    (serving, why) of its gate (bringup.serving.serving_of); ``failed``: host -> why a member failed
    in this run before its gate. A member with neither is left out: its service step is not in this
run, and it serves on as it did.

    >>> ok = (True, "")
    >>> group_verdict(("gpu-a", "gpu-b"), {"gpu-a": ok, "gpu-b": ok}, {})
    (True, '')
    >>> group_verdict(("gpu-a", "gpu-b"), {"gpu-a": (False, "timed out: not serving after 60 s"),
    ...                                     "gpu-b": (False, "timed out: not serving after 60 s")}, {})[1]
    'gpu-a (the head): timed out: not serving after 60 s; gpu-b: timed out: not serving after 60 s'
    >>> group_verdict(("gpu-a", "gpu-b"), {"gpu-a": ok}, {"gpu-b": "Install the venv: pip failed"})
    (False, 'gpu-b: failed before its gate (Install the venv: pip failed)')
    """
    reasons = []
    for rank, name in enumerate(members):
        if name in failed:
            why = f"failed before its gate ({failed[name]})"
        elif name in gates and not gates[name][0]:
            why = gates[name][1]
        else:
            continue
        reasons.append(f"{name}{' (the head)' if rank == 0 else ''}: {why}")
    return not reasons, "; ".join(reasons)
