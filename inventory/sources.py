"""Read the operator's host list (YAML) or the sandbox's, into pyinfra host tuples.

Kept apart from inventory/gpu.py so it can be imported and tested; pyinfra treats
every list at module level of an inventory file as a group.
"""

import json
import os
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
HOSTS_FILE = Path(os.environ.get("GPU_BRINGUP_HOSTS", ROOT / "inventory" / "hosts.yml"))
SANDBOX_NODES = ROOT / ".sandbox" / "nodes.yaml"
SANDBOX_REPO = ROOT / ".sandbox" / "aptrepo" / "server.json"
SANDBOX_PYPI = ROOT / ".sandbox" / "pypimirror.json"

# Host keys are always checked: an unknown or changed key fails the connection.
SSH_DEFAULTS = {"ssh_strict_host_key_checking": "yes"}


def read_yaml(path):
    """A YAML mapping from ``path``, {} when the file is absent or empty."""
    if not Path(path).exists():
        return {}
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def operator_hosts(data):
    """(name, data) tuples from the operator's file: ``all`` under each host's own.

    >>> operator_hosts({"all": {"venv_path": "/v"}, "hosts": {"n1": {"ssh_user": "u"}}})
    [('n1', {'ssh_strict_host_key_checking': 'yes', 'venv_path': '/v', 'ssh_user': 'u'})]
    """
    common = data.get("all") or {}
    hosts = []
    for name, host_data in (data.get("hosts") or {}).items():
        hosts.append((str(name), {**SSH_DEFAULTS, **common, **(host_data or {})}))
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
    hosts = operator_hosts(read_yaml(HOSTS_FILE))
    if hosts:
        return hosts
    repo = json.loads(SANDBOX_REPO.read_text()) if SANDBOX_REPO.exists() else None
    pypi = json.loads(SANDBOX_PYPI.read_text()) if SANDBOX_PYPI.exists() else None
    return sandbox_hosts(read_yaml(SANDBOX_NODES), repo, pypi)
