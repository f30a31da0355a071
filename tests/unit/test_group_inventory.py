"""control/groups.py's membership from the whole inventory (issue 38): hosts are grouped as their
validated settings group them (the text of service_group), not by the raw values pyinfra holds."""

from types import SimpleNamespace

import pytest

from bringup.config import Config
from bringup.group import GroupError
from control.groups import inventory_settings

GROUP = {"service_model": "/models/m", "service_args": "--tp 2", "target_sms": "12.0"}


def inventory(**hosts):
    return [SimpleNamespace(name=name, data=SimpleNamespace(dict=lambda data=data: dict(data)))
            for name, data in hosts.items()]


@pytest.mark.parametrize("a, b", [(405, "405"), ("405", 405), ("llama", "llama")])
def test_a_group_named_by_a_number_or_its_text_is_one_group(a, b):
    """YAML's service_group: 405 and "405" are one setting's value ("405"): one group of two (it was
    two groups of one, each refused as having no other member)."""
    hosts = inventory(**{"gpu-a": {**GROUP, "service_group": a}, "gpu-b": {**GROUP, "service_group": b},
                         "alone": {**GROUP}})
    assert Config.from_data(dict(hosts[0].data.dict())).service_group == str(a)
    assert sorted(inventory_settings(hosts, "gpu-a")) == sorted(inventory_settings(hosts, "gpu-b")) == ["gpu-a", "gpu-b"]


def test_a_member_whose_settings_are_invalid_refuses_the_group_in_one_line():
    hosts = inventory(**{"gpu-a": {**GROUP, "service_group": "g"},
                         "gpu-b": {**GROUP, "service_group": "g", "service_port": "x"}})
    with pytest.raises(GroupError) as error:
        inventory_settings(hosts, "gpu-a")
    assert str(error.value).startswith("gpu-a: serving group 'g' cannot be planned: the settings of its member gpu-b")
