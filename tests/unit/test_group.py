"""Serving groups (bringup/group.py): members, ranks, SGLang's multi-node arguments and the NCCL/Gloo
environment, decided from the inventory and the probe's facts; table-driven."""

import pytest

from bringup.group import GroupError, Member, group_environment, route_target, serving_groups, tp_size


def host(group="llama", address=None, **settings):
    """One host's settings as the inventory gives them (the group's settings alike by default)."""
    return {"service_group": group, "service_group_port": 29500, "service_model": "meta-llama/Llama-3.1-405B",
            "service_args": "--tp 16", "stack_sglang": "0.5.23",
            **({"ssh_hostname": address} if address else {}), **settings}


# (case, inventory, expected {group: [(host, rank, args)]})
GROUPS = [
    ("two nodes: the first name is the head, whatever the inventory's order",
     {"gpu-b": host(address="10.0.0.2"), "gpu-a": host(address="10.0.0.1")},
     {"llama": [("gpu-a", 0, ("--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "10.0.0.1:29500")),
                ("gpu-b", 1, ("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:29500"))]}),
    ("no ssh_hostname: the inventory name is the head's address; a host without a group serves alone",
     {"head.lan": host(service_args="--tp-size=8"), "member.lan": host(service_args="--tp-size=8"),
      "alone": host(group="")},
     {"llama": [("head.lan", 0, ("--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "head.lan:29500")),
                ("member.lan", 1, ("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "head.lan:29500"))]}),
    ("an IPv6 head in brackets; two groups apart",
     {"a1": host(group="a", address="fd00::1"), "a2": host(group="a"),
      "b1": host(group="b", address="10.1.0.1"), "b2": host(group="b")},
     {"a": [("a1", 0, ("--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "[fd00::1]:29500")),
            ("a2", 1, ("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "[fd00::1]:29500"))],
      "b": [("b1", 0, ("--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "10.1.0.1:29500")),
            ("b2", 1, ("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.1.0.1:29500"))]}),
    ("no group at all", {"gpu-a": host(group=""), "gpu-b": host(group=None)}, {}),
]


@pytest.mark.parametrize("case, inventory, expected", GROUPS, ids=[row[0] for row in GROUPS])
def test_members_ranks_and_arguments(case, inventory, expected):
    groups = serving_groups(inventory)
    assert {name: [(member.host, member.rank, member.args) for member in members]
            for name, members in groups.items()} == expected
    # Decided again, in another order: the same ranks (nothing stored, nothing order-dependent).
    assert serving_groups(dict(reversed(list(inventory.items())))) == groups


def test_membership_changes_move_ranks_by_name():
    """Adding a host whose name sorts first makes it the head; removing the head makes the next name
    the head: every member's arguments change with --nnodes, so the group restarts as one."""
    two = {"gpu-b": host(address="10.0.0.2"), "gpu-a": host(address="10.0.0.1")}
    three = {**two, "gpu-0": host(address="10.0.0.9", service_args="--tp 12"),
             "gpu-a": host(address="10.0.0.1", service_args="--tp 12"),
             "gpu-b": host(address="10.0.0.2", service_args="--tp 12")}
    assert [(m.host, m.rank, m.dist_init_addr) for m in serving_groups(three)["llama"]] == [
        ("gpu-0", 0, "10.0.0.9:29500"), ("gpu-a", 1, "10.0.0.9:29500"), ("gpu-b", 2, "10.0.0.9:29500")]
    del two["gpu-a"]
    two["gpu-c"] = host(address="10.0.0.3")
    assert [(m.host, m.rank, m.head) for m in serving_groups(two)["llama"]] == [("gpu-b", 0, "gpu-b"),
                                                                              ("gpu-c", 1, "gpu-b")]


# (case, inventory, the error line's start, a word of its fix)
BAD = [
    ("a group of one", {"gpu-a": host(), "gpu-b": host(group="")},
     "gpu-a: service_group 'llama' has no other member", "leave it empty"),
    ("another model", {"gpu-a": host(), "gpu-b": host(service_model="Qwen/Qwen3-0.6B")},
     "gpu-b: service_model 'Qwen/Qwen3-0.6B' differs from the head gpu-a's", "set service_model once"),
    ("another stack", {"gpu-a": host(), "gpu-b": host(stack_sglang="0.5.22")},
     "gpu-b: stack_sglang '0.5.22' differs from the head gpu-a's '0.5.23'", "set stack_sglang once"),
    ("another port", {"gpu-a": host(), "gpu-b": host(service_group_port=29501)},
     "gpu-b: service_group_port 29501 differs", "set service_group_port once"),
    ("tp not divisible", {"gpu-a": host(service_args="--tp 3"), "gpu-b": host(service_args="--tp 3")},
     "gpu-a: service_args '--tp 3' gives a tensor-parallel size 3 that 2 nodes cannot share", "multiple of 2"),
    ("no tp: SGLang's 1", {"gpu-a": host(service_args=""), "gpu-b": host(service_args="")},
     "gpu-a: service_args '' gives a tensor-parallel size 1", "multiple of 2"),
    ("multi-node arguments of the operator's", {"gpu-a": host(service_args="--tp 16 --node-rank 0"), "gpu-b": host()},
     "gpu-a: service_args '--tp 16 --node-rank 0' sets --node-rank", "remove it from service_args"),
    ("the old alias too", {"gpu-a": host(), "gpu-b": host(service_args="--tp 16 --nccl-init-addr=x:1")},
     "gpu-b: service_args '--tp 16 --nccl-init-addr=x:1' sets --nccl-init-addr", "remove it"),
    ("a head address that is no address", {"gpu-a": host(address="10.0.0.1; reboot"), "gpu-b": host()},
     "gpu-a: the head's address '10.0.0.1; reboot' is neither an IP address nor a host name", "service_group_address"),
    ("an IPv6 head with a zone (ssh_hostname, checked by no setting): refused, not sent to the unit and the probe",
     {"gpu-a": host(address="fe80::1%eth0 x"), "gpu-b": host()},
     "gpu-a: the head's address 'fe80::1%eth0 x' is neither an IP address nor a host name", "service_group_address"),
    ("a port of the setting's text, out of range", {"gpu-a": host(service_group_port="70000"),
                                                    "gpu-b": host(service_group_port="70000")},
     "gpu-a: service_group_port '70000' is no TCP port", "1 to 65535"),
    ("no port", {"gpu-a": host(service_group_port=None), "gpu-b": host(service_group_port=None)},
     "gpu-a: service_group_port None is no TCP port", "1 to 65535"),
]


@pytest.mark.parametrize("case, inventory, start, fix", BAD, ids=[row[0] for row in BAD])
def test_bad_groups_are_one_line_naming_host_value_and_fix(case, inventory, start, fix):
    with pytest.raises(GroupError) as error:
        serving_groups(inventory)
    line = str(error.value)
    assert line.startswith(start) and fix in line and "\n" not in line, line


@pytest.mark.parametrize("args, size", [("--tp 16", 16), ("--tp=8", 8), ("--tensor-parallel-size 4", 4),
                                        ("--tp-size 2 --dp 2", 2), ("", 1), ("--tp", None), ("--tp eight", None)])
def test_tp_size(args, size):
    assert tp_size(args) == size


def test_route_target_is_the_head_for_a_member_and_rank_1_for_the_head():
    hosts = {name: host(address=address, service_args="--tp 12")
             for name, address in (("gpu-a", "10.0.0.1"), ("gpu-b", "10.0.0.2"), ("gpu-c", None))}
    members = serving_groups(hosts)["llama"]
    assert [route_target(member, hosts) for member in members] == ["10.0.0.2", "10.0.0.1", "10.0.0.1"]


def test_a_bad_rank_1_address_is_named_as_rank_1_s_not_as_the_head_s():
    """The head's probe asks for rank 1's route: its bad address is refused naming rank 1 and its own
    role (it was named 'the head's address', on a host that is not the head)."""
    hosts = {"gpu-a": host(address="10.0.0.1"), "gpu-b": host(address="fe80::1%eth0")}
    head = serving_groups(hosts)["llama"][0]
    with pytest.raises(GroupError) as error:
        route_target(head, hosts)
    assert str(error.value).startswith("gpu-b: its address (rank 1, whose route the head's probe asks for) "
                                       "'fe80::1%eth0' is neither"), error.value


IB = {"devices": [
    {"name": "mlx5_1", "ports": [{"port": "1", "state": "ACTIVE", "link_layer": "Ethernet"}]},
    {"name": "mlx5_0", "ports": [{"port": "1", "state": "ACTIVE", "link_layer": "InfiniBand"},
                                 {"port": "2", "state": "DOWN", "link_layer": "InfiniBand"}]},
    {"name": "mlx5_10", "ports": [{"port": "1", "state": "INIT", "link_layer": "InfiniBand"}]}]}
ROUTED = {"to": "10.0.0.1", "address": "10.0.0.1", "interface": "ens1f0np0", "source": "10.0.0.2", "gateway": None,
          "local": False, "error": None}

# (case, facts, interface setting, expected environment, expected problems)
ENVIRONMENTS = [
    ("the routed interface, exact; the active ports, exact (mlx5_1 would match mlx5_10)",
     {"route": ROUTED, "infiniband": IB}, "",
     {"NCCL_SOCKET_IFNAME": "=ens1f0np0", "GLOO_SOCKET_IFNAME": "ens1f0np0", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}, []),
    ("the operator's interface wins over the route", {"route": ROUTED, "infiniband": {"devices": []}}, "bond0",
     {"NCCL_SOCKET_IFNAME": "=bond0", "GLOO_SOCKET_IFNAME": "bond0"}, []),
    ("no HCA: no NCCL_IB_HCA (NCCL's sockets)", {"route": ROUTED, "infiniband": {"devices": []}}, "",
     {"NCCL_SOCKET_IFNAME": "=ens1f0np0", "GLOO_SOCKET_IFNAME": "ens1f0np0"}, []),
    ("no route to the peer", {"route": {**ROUTED, "interface": None, "error": "ip route get 10.0.0.1 exited 2"},
                              "infiniband": IB}, "",
     {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}, ["no route to 10.0.0.1: ip route get 10.0.0.1 exited 2"]),
    ("the peer's address is this node's", {"route": {**ROUTED, "interface": "lo", "local": True}, "infiniband": None},
     "", {}, ["10.0.0.1 is this node's own address: the route names no interface"]),
    ("an interface name that is no plain name (the node's text: a newline would break the env file's line)",
     {"route": {**ROUTED, "interface": "eth0\nLD_PRELOAD=/tmp/x.so"}, "infiniband": None}, "", {},
     ["the route names the interface 'eth0\\nLD_PRELOAD=/tmp/x.so', which is no plain interface name"]),
    ("not asked", {"route": None, "infiniband": None}, "", {},
     ["the probe was not asked for the route to the group's peer"]),
]


@pytest.mark.parametrize("case, facts, interface, expected, problems", ENVIRONMENTS,
                         ids=[row[0] for row in ENVIRONMENTS])
def test_nccl_and_gloo_environment(case, facts, interface, expected, problems):
    assert group_environment(facts, interface) == (expected, problems)


def test_member_properties():
    member = Member("gpu-b", "llama", 1, ("gpu-a", "gpu-b", "gpu-c"), "gpu-a.lan", 5000)
    assert (member.head, member.nnodes, member.dist_init_addr) == ("gpu-a", 3, "gpu-a.lan:5000")
