"""What the sandbox offers the product, registered in the product's own inputs: the
running nodes and the mirrors' settings, as a host list in inventory/hosts.yml's format
in the directory inventory/gpu.py reads registered hosts from (inventory/sources.py)::

    inventory/hosts.d/sandbox.yml
        all:    cuda_repo_url, cuda_repo_key_url, cuda_repo_fingerprint (the apt
                repository, while served), venv_find_links, venv_no_index (the wheel
                mirror, while served)
        hosts:  each running node by name, with its ssh_* data (a cloud-login node's user
                and _sudo: sandbox.field_states, sandbox.image.cloud_login_user), and gpu_standin: true
                where its GPU driver is the sandbox's stand-in (sandbox/gpu_standin.py:
                a recorded nvidia-smi, no device), so deploy's pre-warm and the node
                suite know it from the node's settings, never from CUDA failing; a bridged
                node (sandbox.network: its own network namespace, 198.18.0.0/24) also
                gets the mirrors' settings with their URLs on the bridge, 198.18.0.1,
                since this machine's loopback is not its own (node_settings)

The product reads it as it reads an operator's file and knows nothing of the sandbox.
The file is rewritten whole (write, then rename) after every change of what it is made
from: a node up or down (sandbox.node), a mirror served or stopped (sandbox.aptrepo,
sandbox.pypimirror); it is removed when no node runs. A private state directory
($SANDBOX_STATE_DIR: the sandbox's own tests) registers in its own ``<state>/hosts.d/``,
so its nodes never join the checkout's inventory (read them with
``GPU_BRINGUP_HOSTS_DIR=<state>/hosts.d``).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from control.atomic import atomic_write
from inventory.sources import HOSTS_DIR
from sandbox import network, statedir
from sandbox.fsutil import file_lock
from sandbox.gpu_standin import NO_GPU
from sandbox.httpserve import read_state
from sandbox.image import cloud_login_user

FILE_NAME = "sandbox.yml"
HEADER = "# Written by the sandbox (sandbox/registration.py) while its nodes run: do not edit.\n"


def mirror_settings(repo: dict | None, pypi: dict | None) -> dict:
    """The settings that point a node at the sandbox's mirrors: the apt repository reached
    exactly like NVIDIA's (repo URL, key URL, pinned fingerprint), the wheels through the
    find-links setting (a site mirror uses the same ones).

    >>> mirror_settings({"url": "http://r/repos/", "key_url": "http://r/k.pub", "fingerprint": "F" * 40},
    ...                 {"url": "http://p/"})["venv_find_links"]
    ['http://p/']
    >>> mirror_settings({"url": "http://r/repos/"}, None)  # a server still starting: no key yet
    {}
    """
    settings = {"venv_find_links": [pypi["url"]], "venv_no_index": True} if pypi and pypi.get("url") else {}
    if repo and all(repo.get(key) for key in ("url", "key_url", "fingerprint")):
        settings |= {"cuda_repo_url": repo["url"], "cuda_repo_key_url": repo["key_url"],
                     "cuda_repo_fingerprint": repo["fingerprint"]}
    return settings


def host_data(entry: dict) -> dict:
    """What a node's registry entry tells pyinfra: its ssh_* data (the rest describes
    the node to the sandbox), and the declaration that its GPUs are stand-ins, unless it
    has no driver at all (profile ``none``: no GPU to stand in for).

    >>> host_data({"ssh_hostname": "127.0.0.11", "gpu_profile": "b200-x8"})
    {'ssh_hostname': '127.0.0.11', 'gpu_standin': True}
    >>> host_data({"ssh_hostname": "127.0.0.12", "gpu_profile": "none"})
    {'ssh_hostname': '127.0.0.12'}
    >>> host_data({"ssh_user": "root", "os": "ubuntu2404", "states": ["cloud-login"], "gpu_profile": "none"})
    {'ssh_user': 'ubuntu', '_sudo': True}
    """
    data = {key: value for key, value in entry.items() if key.startswith("ssh_")}
    if "cloud-login" in (entry.get("states") or ()):
        # Reached as a cloud image is: its login user, through sudo.
        data |= {"ssh_user": cloud_login_user(entry.get("os") or ""), "_sudo": True}
    return data | ({"gpu_standin": True} if entry.get("gpu_profile", NO_GPU) != NO_GPU else {})


def node_settings(entry: dict, repo: dict | None, pypi: dict | None) -> dict:
    """The mirrors' settings a node needs over those under ``all:``: none for a loopback
    node (it shares this machine's loopback, where the mirrors listen); for a bridged one
    (``network: bridge`` in its entry) their URLs on the bridge, where the servers also
    listen (sandbox.network.via_bridge; a server that names no bridge gives none).

    >>> pypi = {"url": "http://127.0.0.1:8914/", "bridge": "198.18.0.1"}
    >>> node_settings({"ssh_hostname": "198.18.0.5", "network": "bridge"}, None, pypi)["venv_find_links"]
    ['http://198.18.0.1:8914/']
    >>> node_settings({"ssh_hostname": "127.0.0.11"}, None, pypi)
    {}
    """
    if entry.get("network") != network.BRIDGE:
        return {}
    return mirror_settings(network.via_bridge(repo), network.via_bridge(pypi))


def inventory_document(nodes: dict[str, dict], repo: dict | None = None, pypi: dict | None = None) -> dict:
    """The host list of ``nodes`` (the node registry's entries, by name): each one's
    host_data (and node_settings) under the mirrors' settings.

    >>> inventory_document({"gpu1": {"ssh_hostname": "127.0.0.11", "ssh_port": 22, "gpu_profile": "b200-x8"}})
    {'all': {}, 'hosts': {'gpu1': {'ssh_hostname': '127.0.0.11', 'ssh_port': 22, 'gpu_standin': True}}}
    >>> inventory_document({"n1": {"ssh_hostname": "198.18.0.5", "network": "bridge", "gpu_profile": "none"}},
    ...                    pypi={"url": "http://127.0.0.1:8914/", "bridge": "198.18.0.1"})["hosts"]["n1"]
    {'ssh_hostname': '198.18.0.5', 'venv_find_links': ['http://198.18.0.1:8914/'], 'venv_no_index': True}
    """
    hosts = {str(name): host_data(entry) | node_settings(entry, repo, pypi) for name, entry in nodes.items()}
    return {"all": mirror_settings(repo, pypi), "hosts": hosts}


def write_inventory(path: Path, document: dict) -> None:
    """Put ``document`` at ``path`` whole, or remove the file when it lists no host."""
    if not document["hosts"]:
        Path(path).unlink(missing_ok=True)
        return
    atomic_write(path, HEADER + yaml.safe_dump(document, sort_keys=False, default_flow_style=False), 0o644)


def inventory_file(state: Path, default_state: Path, hosts_dir: Path = HOSTS_DIR) -> Path:
    """Where the nodes of the state directory ``state`` are registered.

    >>> str(inventory_file(Path("/co/.sandbox"), Path("/co/.sandbox"), Path("/co/inventory/hosts.d")))
    '/co/inventory/hosts.d/sandbox.yml'
    >>> str(inventory_file(Path("/tmp/t"), Path("/co/.sandbox"), Path("/co/inventory/hosts.d")))
    '/tmp/t/hosts.d/sandbox.yml'
    """
    return (Path(hosts_dir) if Path(state) == Path(default_state) else Path(state) / "hosts.d") / FILE_NAME


def registered_file() -> Path:
    """Where this state directory's nodes are registered (inventory_file)."""
    return inventory_file(statedir.state_dir(), statedir.DEFAULT_STATE_DIR)


def publish() -> Path:
    """Rewrite the registered host list from the node registry and the mirrors' state;
    returns its path.

    Under a lock of its own, reading everything inside it: of two publishers, the later
    one reads the newest registry and mirrors (the node lock is not taken: ``up`` and
    ``down`` call this while holding it). The mirrors' state files are read as they are,
    as a server writes them: their ``running()`` would remove the file of a server still
    starting in another process (its lease), and the server with it; each server's own
    ``serve`` publishes again once it is up.
    """
    path = registered_file()
    with file_lock(statedir.state_dir() / ".registration.lock"):
        repo, pypi = read_state(statedir.APTREPO_SERVER_JSON), read_state(statedir.PYPIMIRROR_JSON)
        write_inventory(path, inventory_document(statedir.read_registry(), repo, pypi))
    return path
