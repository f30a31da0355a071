"""Read the operator's host list (YAML), or the host lists other tools registered, into
pyinfra host tuples.

    inventory/hosts.yml     the operator's nodes ($GPU_BRINGUP_HOSTS names another file)
    inventory/hosts.d/*.yml hosts registered by a tool, one file per tool, in the same
                            format ($GPU_BRINGUP_HOSTS_DIR names another directory);
                            git-ignored, read only when hosts.yml lists no host

The two never mix in one run: an operator's list is the whole inventory, and a line on
stderr names the registered files it leaves unread.

Kept apart from inventory/gpu.py so it can be imported and tested; pyinfra treats
every list at module level of an inventory file as a group.
"""

import os
import re
import sys
from pathlib import Path

import yaml

from bringup import yamlload
from bringup.setting_checks import cut, shown

ROOT = Path(__file__).resolve().parent.parent
HOSTS_FILE = Path(os.environ.get("GPU_BRINGUP_HOSTS", ROOT / "inventory" / "hosts.yml"))
HOSTS_DIR = Path(os.environ.get("GPU_BRINGUP_HOSTS_DIR", ROOT / "inventory" / "hosts.d"))

# Host keys are always checked: an unknown or changed key fails the connection.
SSH_DEFAULTS = {"ssh_strict_host_key_checking": "yes"}
# What a host may set instead ("accept-new" records a first key, then checks it).
CHECKED_HOST_KEYS = ("yes", "accept-new")
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")


class InventoryError(SystemExit):
    """inventory/hosts.yml cannot be used: the message names the file, the host and the fix."""


def read_yaml(path):
    """A YAML mapping from ``path``, {} when the file is absent or empty; a document whose
    aliases expand beyond bringup.yamlload's budget (an alias bomb) is refused as it loads."""
    if not Path(path).exists():
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = yamlload.load(handle) or {}
    except yamlload.TooLarge as error:
        raise InventoryError(f"{path}: refused while loading: {error}") from None
    except yaml.YAMLError as error:
        raise InventoryError(cut(f"{path}: not valid YAML: {error}".replace("\n", " "), 400)) from None
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: expected a mapping at the top level (all:, hosts:), got {type(data).__name__}")
    return data


def operator_hosts(data, source="inventory/hosts.yml"):
    """(name, data) tuples from the operator's file: ``all`` under each host's own.

    >>> operator_hosts({"all": {"venv_path": "/v"}, "hosts": {"n1": {"ssh_user": "u"}}})
    [('n1', {'ssh_strict_host_key_checking': 'yes', 'venv_path': '/v', 'ssh_user': 'u'})]
    >>> operator_hosts({"hosts": ["n1"]})
    Traceback (most recent call last):
    ...
    inventory.sources.InventoryError: inventory/hosts.yml: hosts: expected a mapping of host name -> settings \
(e.g. "gpu-node-01: {ssh_hostname: 10.0.0.11}"), got list
    """
    common, hosts_data = data.get("all") or {}, data.get("hosts") or {}
    if not isinstance(common, dict):
        raise InventoryError(f"{source}: all: expected a mapping of settings, got {type(common).__name__}")
    if not isinstance(hosts_data, dict):
        raise InventoryError(f"{source}: hosts: expected a mapping of host name -> settings "
                             f'(e.g. "gpu-node-01: {{ssh_hostname: 10.0.0.11}}"), got {type(hosts_data).__name__}')
    hosts = []
    for name, host_data in hosts_data.items():
        if not HOST_NAME.match(str(name)):
            raise InventoryError(f"{source}: host {shown(name)}: use a name of letters, digits and . _ @ -")
        if host_data is not None and not isinstance(host_data, dict):
            raise InventoryError(f"{source}: host {name}: expected a mapping of settings (ssh_hostname: ...), "
                                 f"got {type(host_data).__name__} {shown(host_data)}")
        merged = {**SSH_DEFAULTS, **common, **(host_data or {})}
        checking = str(merged["ssh_strict_host_key_checking"]).lower()
        if checking not in CHECKED_HOST_KEYS:
            raise InventoryError(f"{source}: host {name}: ssh_strict_host_key_checking={shown(merged['ssh_strict_host_key_checking'])} "
                                 "turns host key checking off; host keys are always checked: remove it, or use "
                                 "accept-new to record a new host's key on first contact")
        hosts.append((str(name), merged))
    return hosts


def registered_files(folder=HOSTS_DIR):
    """The host lists registered in ``folder`` (``*.yml``, by name), [] when there is none."""
    return sorted(Path(folder).glob("*.yml"))


def registered_hosts(files):
    """(name, data) tuples of every registered file, each read as the operator's file is;
    a host named in two files is refused (which one's settings would hold is a guess)."""
    hosts, registered_in = [], {}
    for path in files:
        for name, data in operator_hosts(read_yaml(path), str(path)):
            if name in registered_in:
                raise InventoryError(f"{path}: host {name}: also registered in {registered_in[name]}; "
                                     "register each host in one file")
            registered_in[name] = path
            hosts.append((name, data))
    return hosts


def load_hosts(hosts_file=HOSTS_FILE, hosts_dir=HOSTS_DIR, log=None):
    """The operator's hosts (``hosts_file``), or the hosts registered in ``hosts_dir``
    when the operator lists none."""
    hosts = operator_hosts(read_yaml(hosts_file), str(hosts_file))
    files = registered_files(hosts_dir)
    if not hosts:
        return registered_hosts(files)
    if files:
        print(f"inventory: the {len(hosts)} host(s) of {hosts_file} only; not read: {', '.join(map(str, files))} "
              f"(registered hosts are used when {Path(hosts_file).name} lists none)", file=log or sys.stderr)
    return hosts
