"""Read the operator's host list (YAML) or the sandbox's, into pyinfra host tuples.

Kept apart from inventory/gpu.py so it can be imported and tested; pyinfra treats
every list at module level of an inventory file as a group.
"""

import json
import os
import re
from pathlib import Path

import yaml

from bringup import yamlload
from bringup.checks import cut, shown

ROOT = Path(__file__).resolve().parent.parent
HOSTS_FILE = Path(os.environ.get("GPU_BRINGUP_HOSTS", ROOT / "inventory" / "hosts.yml"))
SANDBOX_NODES = ROOT / ".sandbox" / "nodes.yaml"
SANDBOX_REPO = ROOT / ".sandbox" / "aptrepo" / "server.json"
SANDBOX_PYPI = ROOT / ".sandbox" / "pypimirror.json"

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


def sandbox_hosts(nodes, repo, pypi=None):
    """(name, data) tuples for running sandbox nodes, pointed at the sandbox's mirrors.

    The apt repo is reached exactly like NVIDIA's: through the repo URL, key URL and
    pinned fingerprint settings; the wheels through the find-links setting (a site
    mirror uses the same ones).
    """
    repo_settings = {"venv_find_links": [pypi["url"]], "venv_no_index": True} if pypi else {}
    if repo:
        repo_settings |= {
            "cuda_repo_url": repo["url"],
            "cuda_repo_key_url": repo["key_url"],
            "cuda_repo_fingerprint": repo["fingerprint"],
        }
    hosts = []
    for name, node in (nodes.get("nodes") or {}).items():
        ssh = {key: value for key, value in node.items() if key.startswith("ssh_")}
        hosts.append((str(name), {**SSH_DEFAULTS, **repo_settings, **ssh}))
    return hosts


def load_hosts():
    """The operator's hosts, or the sandbox's when the operator lists none."""
    hosts = operator_hosts(read_yaml(HOSTS_FILE), str(HOSTS_FILE))
    if hosts:
        return hosts
    repo = json.loads(SANDBOX_REPO.read_text()) if SANDBOX_REPO.exists() else None
    pypi = json.loads(SANDBOX_PYPI.read_text()) if SANDBOX_PYPI.exists() else None
    return sandbox_hosts(read_yaml(SANDBOX_NODES), repo, pypi)
