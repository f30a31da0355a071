"""A host's serving group as the whole inventory gives it: which hosts share its ``service_group``
(grouped as their validated settings group them) and its place among them. One answer for every
reader of an inventory: a pyinfra run (control/groups.py, members outside ``--limit`` too) and
the node suite (tests/node/conftest.py), so both plan a member alike.

Pure: ``data`` is host name -> that host's raw settings (pyinfra's host data).

    >>> data = {"gpu-a": {"service_group": "llama", "service_args": "--tp 2", "ssh_hostname": "10.0.0.1"},
    ...         "gpu-b": {"service_group": "llama", "service_args": "--tp 2", "ssh_hostname": "10.0.0.2"},
    ...         "cpu-c": {}}
    >>> member, route_to = membership(data, "gpu-b")
    >>> member.rank, member.dist_init_addr, route_to
    (1, '10.0.0.1:29500', '10.0.0.1')
    >>> membership(data, "cpu-c")
    (None, '')
"""

from bringup.config import Config, ConfigError
from bringup.group import GroupError, route_target, serving_groups

# The settings serving_groups reads (bringup/group.py).
MEMBER_KEYS = ("service_group", "service_group_port", "service_group_address", "service_model", "service_args",
               "stack_sglang", "service_rollback", "venv_managed")


def group_name(value):
    """A raw ``service_group`` as its setting reads it (the text of the value: YAML's ``405`` is
    ``"405"``), so that hosts are grouped as their validated settings group them.

    >>> group_name(405), group_name("405"), group_name(None), group_name(0)
    ('405', '405', '', '0')
    """
    return "" if value is None else str(value)


def group_hosts(data, name):
    """Every host sharing ``name``'s ``service_group``: host -> its group settings (validated)
    and ``ssh_hostname``. A member whose settings are invalid is a GroupError."""
    group = group_name(data[name].get("service_group"))
    hosts = {}
    for other, values in data.items():
        if group and group_name(values.get("service_group")) == group:
            try:
                config = Config.from_data(values, host=other)
            except ConfigError:
                raise GroupError(f"{name}: serving group {group!r} cannot be planned: the settings of its member "
                                 f"{other} are invalid; fix them (validate names them on {other})") from None
            hosts[other] = {**{key: getattr(config, key) for key in MEMBER_KEYS},
                            "ssh_hostname": values.get("ssh_hostname")}
    return hosts


def membership(data, name):
    """(Member, the address whose route its probe reports) of host ``name``, or (None, "") when it
    serves alone. Raises GroupError (one line) for a group that cannot be made."""
    hosts = group_hosts(data, name)
    if not hosts:
        return None, ""
    group = group_name(data[name].get("service_group"))
    member = next(member for member in serving_groups(hosts)[group] if member.host == name)
    return member, route_target(member, hosts)
