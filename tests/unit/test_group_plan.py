"""Serving groups wired into the plan (issue 38): a member's plan (its unit's multi-node arguments,
its NCCL/Gloo env, its own findings), the group's preflight over the members' summaries, and a
host serving alone planned exactly as before; table-driven."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bringup.config import Config, ConfigError
from bringup.group import GROUP_ENV_KEYS, Member
from bringup.group_preflight import preflight
from bringup.plan import managed_env_keys, plan
from control.host_plan import probe_inputs
from tests.unit.scenarios import converged

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "facts").glob("*.json"))
HEAD, MEMBER = (Member(host, "llama", rank, ("gpu-a", "gpu-b"), "10.0.0.1", 29500)
                for rank, host in enumerate(("gpu-a", "gpu-b")))
ROUTED = {"to": "10.0.0.1", "address": "10.0.0.1", "interface": "ens1f0np0", "source": "10.0.0.2", "gateway": None,
          "local": False, "error": None}
# The facts page's example of the infiniband key (facts/sections/infiniband.py).
IB = {"devices": [{"name": "mlx5_0", "ports": [{"port": "1", "state": "ACTIVE", "phys_state": "LinkUp",
                                                "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand"}],
                   "net_devices": ["ibp24s0"]}], "nvidia_peermem": True}
GROUP = {"service_group": "llama", "service_model": "Qwen/Qwen3-0.6B", "service_args": "--tp 16"}


def group_codes(node):
    return sorted(f"{f.code}:{f.severity}" for f in node.findings if f.code.startswith("GROUP_"))


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_a_host_serving_alone_is_planned_as_before(path):
    """No member, no group: the plan document has no ``group``, the unit no multi-node argument,
    the env file no NCCL/Gloo key, and the probe is asked for no route."""
    facts = json.loads(path.read_text())
    config = Config.from_data({"service_model": "Qwen/Qwen3-0.6B", "service_args": "--tp 8"})
    node = plan(facts, config)
    assert "group" not in node.as_dict() and node.group is None
    assert node.service.exec_start[-2:] == ("--tp", "8")
    assert not set(GROUP_ENV_KEYS) & set(node.env) and not [f for f in node.findings if f.code.startswith("GROUP_")]
    assert managed_env_keys(config) == managed_env_keys(Config()) and not set(GROUP_ENV_KEYS) & set(
        managed_env_keys(config))
    assert probe_inputs(config).route_to == "" and "PROBE_ROUTE_TO" not in probe_inputs(config).environment()


# (case, member, facts added, settings added, group findings, env of the group)
MEMBERS = [
    ("a member routed to the head, RDMA with GPUDirect", MEMBER, {"route": ROUTED, "infiniband": IB}, {},
     [],
     {"NCCL_SOCKET_IFNAME": "=ens1f0np0", "GLOO_SOCKET_IFNAME": "ens1f0np0", "NCCL_IB_HCA": "=mlx5_0:1"}),
    ("RDMA without nvidia_peermem", MEMBER, {"route": ROUTED, "infiniband": {**IB, "nvidia_peermem": False}}, {},
     ["GROUP_PEERMEM_MISSING:warning"],
     {"NCCL_SOCKET_IFNAME": "=ens1f0np0", "GLOO_SOCKET_IFNAME": "ens1f0np0", "NCCL_IB_HCA": "=mlx5_0:1"}),
    ("no route to the head", MEMBER, {"route": {**ROUTED, "interface": None, "error": "the node does not resolve x"}},
     {}, ["GROUP_NO_ROUTE:blocker"], {}),
    ("the head's route to rank 1 is its own address", HEAD, {"route": {**ROUTED, "interface": "lo", "local": True}},
     {}, ["GROUP_NO_ROUTE:blocker"], {}),
    ("the route names no interface: NCCL would pick one", MEMBER, {"route": {**ROUTED, "interface": None}}, {},
     ["GROUP_INTERFACE_UNDECIDED:warning"], {}),
    ("the operator's interface", MEMBER, {"route": {**ROUTED, "interface": None}},
     {"service_group_interface": "bond0"}, [],
     {"NCCL_SOCKET_IFNAME": "=bond0", "GLOO_SOCKET_IFNAME": "bond0"}),
]


@pytest.mark.parametrize("case, member, facts, settings, codes, env", MEMBERS, ids=[row[0] for row in MEMBERS])
def test_a_member_s_plan(case, member, facts, settings, codes, env):
    config = Config.from_data({**GROUP, **settings})
    node = plan({**converged(), **facts}, config, member=member)
    assert group_codes(node) == sorted(codes)
    assert node.group.env == env and {key: node.env[key] for key in env} == env
    assert node.service.exec_start[-8:] == ("--tp", "16", *member.args)
    assert node.as_dict()["group"]["dist_init_addr"] == "10.0.0.1:29500"
    assert set(GROUP_ENV_KEYS) <= set(managed_env_keys(config))


def test_a_member_s_env_file_key_of_another_value_is_reset():
    facts = {**converged(), "route": ROUTED, "service_env": {**converged().get("service_env", {}),
                                                             "NCCL_SOCKET_IFNAME": "eth9"}}
    node = plan(facts, Config.from_data(GROUP), member=MEMBER)
    [finding] = [f for f in node.findings if f.code == "SERVICE_ENV_OVERRIDDEN"]
    assert "NCCL_SOCKET_IFNAME=" in finding.message


# (case, member or None, facts over converged(), env_drop, env_owned)
TAKEN_BACK = [
    ("a host that left its group: deploy's group keys go, the operator's changed one stays", None,
     {"service_env_owned": {"NCCL_SOCKET_IFNAME": "=eth0"}}, {"NCCL_SOCKET_IFNAME": "=eth0"}, {}),
    ("its HF_HUB_OFFLINE while the model is not judged: carried into the rewritten record", None,
     {"service_env_owned": {"NCCL_SOCKET_IFNAME": "=eth0", "HF_HUB_OFFLINE": "1"}, "model": None},
     {"NCCL_SOCKET_IFNAME": "=eth0"}, {"HF_HUB_OFFLINE": "1"}),
    ("a member: its interface keys recorded, HF_HUB_OFFLINE carried", MEMBER,
     {"route": ROUTED, "service_env_owned": {"HF_HUB_OFFLINE": "1"}, "model": None}, {},
     {"HF_HUB_OFFLINE": "1", "NCCL_SOCKET_IFNAME": "=ens1f0np0", "GLOO_SOCKET_IFNAME": "ens1f0np0"}),
    ("a member whose RDMA ports are gone: deploy's NCCL_IB_HCA goes", MEMBER,
     {"route": ROUTED, "infiniband": {"devices": [], "nvidia_peermem": False},
      "service_env": {"NCCL_IB_HCA": "=mlx5_0:1"}, "service_env_owned": {"NCCL_IB_HCA": "=mlx5_0:1"}},
     {"NCCL_IB_HCA": "=mlx5_0:1"}, {"NCCL_SOCKET_IFNAME": "=ens1f0np0", "GLOO_SOCKET_IFNAME": "ens1f0np0"}),
    ("a member whose port is coming up keeps it", MEMBER,
     {"route": ROUTED, "infiniband": {"devices": [{**IB["devices"][0], "ports": [
         {**IB["devices"][0]["ports"][0], "state": "INIT"}]}], "nvidia_peermem": True},
      "service_env": {"NCCL_IB_HCA": "=mlx5_0:1"}, "service_env_owned": {"NCCL_IB_HCA": "=mlx5_0:1"}},
     {}, {"NCCL_SOCKET_IFNAME": "=ens1f0np0", "GLOO_SOCKET_IFNAME": "ens1f0np0"}),
    ("a member whose RDMA ports could not be read keeps it", MEMBER,
     {"route": ROUTED, "infiniband": None, "service_env": {"NCCL_IB_HCA": "=mlx5_0:1"}}, {},
     {"NCCL_SOCKET_IFNAME": "=ens1f0np0", "GLOO_SOCKET_IFNAME": "ens1f0np0"}),
    ("a member whose route is undecided keeps the file's interface keys", MEMBER,
     {"route": {**ROUTED, "interface": None}, "service_env": {"GLOO_SOCKET_IFNAME": "eth0"},
      "service_env_owned": {"GLOO_SOCKET_IFNAME": "eth0"}}, {}, {}),
]


@pytest.mark.parametrize("case, member, facts, drop, owned", TAKEN_BACK, ids=[row[0] for row in TAKEN_BACK])
def test_what_deploy_takes_back_and_keeps_in_its_record(case, member, facts, drop, owned):
    base = converged()
    merged = {**base, **facts, "service_env": {**(base.get("service_env") or {}), **facts.get("service_env", {})}}
    node = plan(merged, Config.from_data(GROUP if member else {"service_model": "Qwen/Qwen3-0.6B"}), member=member)
    assert node.env_drop == drop
    assert node.env_owned == owned


def test_a_member_may_not_set_the_group_s_env_keys():
    with pytest.raises(ConfigError) as error:
        Config.from_data({**GROUP, "service_env": "NCCL_IB_HCA=mlx5_0"}, host="gpu-b")
    assert "NCCL_IB_HCA is decided for a serving group's member" in str(error.value)
    assert "service_group_interface" in str(error.value)
    assert Config.from_data({"service_env": "NCCL_IB_HCA=mlx5_0"}).service_env == (("NCCL_IB_HCA", "mlx5_0"),)


SAME = {"stack": "sglang 0.5.23, CUDA 13.0, venv lock v@1, toolkit lock t@2", "driver": "580",
        "model": "m: the hub cache holds snapshot ab12", "gpus": 8, "rdma": ["mlx5_0:1"]}

# (case, service_args, gpu-a's summary changes, gpu-b's, missing, findings)
PREFLIGHT = [
    ("alike", "--tp 16", {}, {}, {}, []),
    ("another lock on one member", "--tp 16", {}, {"stack": "sglang 0.5.23, CUDA 13.0, venv lock w@3, toolkit lock t@2"},
     {}, ["GROUP_STACK_DIFFERS"]),
    ("another driver branch", "--tp 16", {}, {"driver": "570"}, {}, ["GROUP_STACK_DIFFERS"]),
    ("another snapshot", "--tp 16", {}, {"model": "m: SGLang downloads it from the hub at its start"}, {},
     ["GROUP_MODEL_SOURCE_DIFFERS"]),
    ("fewer GPUs on one", "--tp 16", {}, {"gpus": 4}, {}, ["GROUP_GPUS_MISMATCH"]),
    ("tp x pp over the members", "--tp 8 --pp-size 2", {}, {}, {}, []),
    ("tp too small for the GPUs", "--tp 8", {}, {}, {}, ["GROUP_GPUS_MISMATCH"]),
    ("RDMA on one member only", "--tp 16", {}, {"rdma": []}, {}, ["GROUP_RDMA_MIXED"]),
    ("RDMA on none", "--tp 16", {"rdma": []}, {"rdma": []}, {}, []),
    ("a member left out by --limit", "--tp 16", {}, None, {"gpu-b": "outside --limit/--exclude"},
     ["GROUP_MEMBERS_MISSING"]),
]


@pytest.mark.parametrize("case, args, a, b, missing, codes", PREFLIGHT, ids=[row[0] for row in PREFLIGHT])
def test_the_group_s_preflight(case, args, a, b, missing, codes):
    summaries = {"gpu-a": {**SAME, **a}, **({"gpu-b": {**SAME, **b}} if b is not None else {})}
    found = preflight((HEAD, MEMBER), args, summaries, missing)
    assert [f.code for f in found] == codes
    assert all(f.severity == "blocker" and "\n" not in f.message for f in found)
    if codes and codes != ["GROUP_MEMBERS_MISSING"]:
        assert "gpu-b" in found[0].message  # the member and its value are named
    if missing:
        assert "gpu-b (outside --limit/--exclude)" in found[0].message


def test_the_preflight_names_each_value_with_its_members():
    [found] = preflight((HEAD, MEMBER), "--tp 16", {"gpu-a": SAME, "gpu-b": {**SAME, "gpus": 4}}, {})
    assert "gpu-b: 4 GPU(s)" in found.message and "8 on each" in found.message
    three = tuple(replace(MEMBER, host=host, rank=rank, members=("gpu-a", "gpu-b", "gpu-c"))
                  for rank, host in enumerate(("gpu-a", "gpu-b", "gpu-c")))
    [found] = preflight(three, "--tp 24", {"gpu-a": SAME, "gpu-b": {**SAME, "driver": "570"},
                                           "gpu-c": SAME}, {})
    assert found.message.endswith("gpu-a, gpu-c: 580; gpu-b: 570")


def test_a_second_plan_writes_deploys_record_as_the_first_did():
    """The record is written whole from env_owned, in its order: the plan after a deploy (the
    probe then reports the record's keys, in the record's order) gives the same record, or every
    deploy would rewrite it. Here with deploy's HF_HUB_OFFLINE carried (the model not judged)."""
    facts = {**converged(), "route": ROUTED, "model": None}
    first = plan({**facts, "service_env_owned": {"HF_HUB_OFFLINE": "1"}}, Config.from_data(GROUP), member=MEMBER)
    assert list(first.env_owned) == ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "HF_HUB_OFFLINE"]
    again = plan({**facts, "service_env_owned": dict(first.env_owned)}, Config.from_data(GROUP), member=MEMBER)
    assert list(again.env_owned.items()) == list(first.env_owned.items())
