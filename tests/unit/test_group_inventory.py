"""A serving group's members from the whole inventory (bringup/group_inventory.py, read by a pyinfra
run and the node suite alike): hosts are grouped as their
validated settings group them (the text of service_group), not by the raw values pyinfra holds."""

import pytest

from bringup.config import Config
from bringup.group import GroupError
from bringup.group_inventory import group_hosts, membership

GROUP = {"service_model": "/models/m", "service_args": "--tp 2", "target_sms": "12.0"}


def inventory(**hosts):
    return hosts


@pytest.mark.parametrize("a, b", [(405, "405"), ("405", 405), ("llama", "llama")])
def test_a_group_named_by_a_number_or_its_text_is_one_group(a, b):
    """YAML's service_group: 405 and "405" are one setting's value ("405"): one group of two (it was
    two groups of one, each refused as having no other member)."""
    hosts = inventory(**{"gpu-a": {**GROUP, "service_group": a}, "gpu-b": {**GROUP, "service_group": b},
                         "alone": {**GROUP}})
    assert Config.from_data(dict(hosts["gpu-a"])).service_group == str(a)
    assert sorted(group_hosts(hosts, "gpu-a")) == sorted(group_hosts(hosts, "gpu-b")) == ["gpu-a", "gpu-b"]


def test_a_member_whose_settings_are_invalid_refuses_the_group_in_one_line():
    hosts = inventory(**{"gpu-a": {**GROUP, "service_group": "g"},
                         "gpu-b": {**GROUP, "service_group": "g", "service_port": "x"}})
    with pytest.raises(GroupError) as error:
        group_hosts(hosts, "gpu-a")
    assert str(error.value).startswith("gpu-a: serving group 'g' cannot be planned: the settings of its member gpu-b")


def test_membership_is_the_members_place_and_its_route_target_and_none_alone():
    hosts = inventory(**{"gpu-b": {**GROUP, "service_group": "g", "ssh_hostname": "10.0.0.2"},
                         "gpu-a": {**GROUP, "service_group": "g", "ssh_hostname": "10.0.0.1"}, "alone": {**GROUP}})
    head, route_to = membership(hosts, "gpu-a")
    assert (head.rank, head.members, head.dist_init_addr, route_to) == (0, ("gpu-a", "gpu-b"), "10.0.0.1:29500",
                                                                         "10.0.0.2")
    member, route_to = membership(hosts, "gpu-b")
    assert (member.rank, route_to) == (1, "10.0.0.1")
    assert member.group_members == (head, member)
    assert membership(hosts, "alone") == (None, "")
