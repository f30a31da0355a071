"""The sandbox registers its nodes in the product's own input, and the product reads
only that: a node registry of fake nodes (no node is booted) and fake mirror states,
published by sandbox.registration into a private state directory's hosts.d/, read back
through the real CLI (``pyinfra inventory/gpu.py debug-inventory``) with
GPU_BRINGUP_HOSTS_DIR naming that directory, as an operator's hosts would be.
Then the rule that keeps the two apart: an operator's hosts.yml that lists hosts is the
whole inventory, and the registered files it leaves unread are named."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inventory.sources import InventoryError, load_hosts, operator_hosts
from sandbox import node, pypimirror, registration, statedir

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")

REPO = {"url": "http://127.0.0.1:8913/compute/cuda/repos/", "fingerprint": "A" * 40,
        "key_url": "http://127.0.0.1:8913/compute/cuda/repos/debian12/x86_64/aaaaaaaa.pub"}
PYPI = {"url": "http://127.0.0.1:8914/"}


def entry(addr, state):
    """A node registry entry as sandbox.node writes it (its documented keys)."""
    return {"ssh_hostname": addr, "ssh_port": 22, "ssh_user": "root", "ssh_key": str(state / "ssh" / "id_ed25519"),
            "ssh_known_hosts_file": str(state / "ssh" / "known_hosts"), "gpu_profile": "rtx-pro-6000-x8",
            "toolkit": "incident", "os": "debian12", "arch": "amd64", "states": ["incident"]}


@pytest.fixture
def sandbox_state(tmp_path, monkeypatch):
    """A private state directory with two registered fake nodes, and the mirrors' state
    files as their servers write them (in scratch places; no server runs: pid 0 is none)."""
    state = tmp_path / "state"
    monkeypatch.setenv("SANDBOX_STATE_DIR", str(state))
    monkeypatch.setattr(statedir, "APTREPO_SERVER_JSON", tmp_path / "server.json")
    monkeypatch.setattr(statedir, "PYPIMIRROR_JSON", tmp_path / "pypimirror.json")
    monkeypatch.setattr(pypimirror.SERVER, "state", tmp_path / "pypimirror.json")
    (tmp_path / "server.json").write_text(json.dumps({"pid": 0, "host": "127.0.0.1", "port": 8913, **REPO}))
    (tmp_path / "pypimirror.json").write_text(json.dumps({"pid": 0, **PYPI}))
    registry = {"gpu-a": entry("127.0.0.201", state), "gpu-b": entry("127.0.0.202", state)}
    state.mkdir()
    (state / "nodes.yaml").write_text(yaml.safe_dump({"nodes": registry}))
    return state


def debug_inventory(tmp_path, hosts_dir, hosts=None):
    """``pyinfra inventory/gpu.py debug-inventory --json`` with an operator's hosts.yml of
    ``hosts`` (none: an empty one) and ``hosts_dir`` as the registered hosts' directory."""
    hosts_file = tmp_path / "hosts.yml"
    hosts_file.write_text(yaml.safe_dump({"all": {}, "hosts": hosts or {}}))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPU_BRINGUP_HOSTS": str(hosts_file),
           "GPU_BRINGUP_HOSTS_DIR": str(hosts_dir)}
    result = subprocess.run([PYINFRA, "-y", "inventory/gpu.py", "debug-inventory", "--json"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    listed = [line for line in result.stdout.splitlines() if line.startswith("[")]
    result.hosts = {host["name"]: host["data"] for host in json.loads(listed[-1])} if listed else {}
    return result


def test_registered_nodes_reach_the_inventory_with_the_mirrors_settings(sandbox_state, tmp_path):
    path = registration.publish()
    assert path == sandbox_state / "hosts.d" / "sandbox.yml"
    assert path.stat().st_mode & 0o777 == 0o644 and path.read_text().startswith("# Written by the sandbox")
    result = debug_inventory(tmp_path, path.parent)
    assert result.returncode == 0, result.output[-3000:]
    assert sorted(result.hosts) == ["gpu-a", "gpu-b"]
    data = result.hosts["gpu-b"]
    assert {key: data[key] for key in ("ssh_hostname", "ssh_port", "ssh_user", "ssh_strict_host_key_checking")} == \
        {"ssh_hostname": "127.0.0.202", "ssh_port": 22, "ssh_user": "root", "ssh_strict_host_key_checking": "yes"}
    assert data["ssh_key"] == str(sandbox_state / "ssh" / "id_ed25519")
    assert (data["cuda_repo_url"], data["cuda_repo_key_url"], data["cuda_repo_fingerprint"]) == \
        (REPO["url"], REPO["key_url"], REPO["fingerprint"])
    assert data["venv_find_links"] == [PYPI["url"]] and data["venv_no_index"] is True
    # What describes the node to the sandbox is not pyinfra's data; that its GPUs are
    # the sandbox's stand-ins is (deploy's pre-warm and the node suite read it).
    assert not {"gpu_profile", "toolkit", "states", "os", "arch"} & set(data)
    assert data["gpu_standin"] is True


def test_a_node_without_a_driver_declares_no_stand_in(sandbox_state, tmp_path):
    registry = yaml.safe_load((sandbox_state / "nodes.yaml").read_text())
    registry["nodes"]["gpu-a"]["gpu_profile"] = "none"
    (sandbox_state / "nodes.yaml").write_text(yaml.safe_dump(registry))
    hosts = debug_inventory(tmp_path, registration.publish().parent).hosts
    assert "gpu_standin" not in hosts["gpu-a"] and hosts["gpu-b"]["gpu_standin"] is True


def test_a_node_taken_down_leaves_the_inventory(sandbox_state, tmp_path):
    path = registration.publish()
    assert node.down(["gpu-a"]) == ["gpu-a"]
    assert sorted(debug_inventory(tmp_path, path.parent).hosts) == ["gpu-b"]
    node.down(None)
    assert not path.exists()
    result = debug_inventory(tmp_path, path.parent)
    assert result.hosts == {} and "no hosts in" in result.output and "none registered in" in result.output


def test_a_mirror_that_stops_leaves_the_settings(sandbox_state, tmp_path):
    path = registration.publish()
    assert yaml.safe_load(path.read_text())["all"]["venv_find_links"] == [PYPI["url"]]
    pypimirror.stop()
    assert not (tmp_path / "pypimirror.json").exists()
    settings = yaml.safe_load(path.read_text())["all"]
    assert "venv_find_links" not in settings and settings["cuda_repo_url"] == REPO["url"]


def test_an_operators_hosts_are_the_whole_inventory(sandbox_state, tmp_path):
    path = registration.publish()
    result = debug_inventory(tmp_path, path.parent, hosts={"gpu-node-01": {"ssh_hostname": "10.0.0.11"}})
    assert result.returncode == 0, result.output[-3000:]
    assert list(result.hosts) == ["gpu-node-01"] and "cuda_repo_url" not in result.hosts["gpu-node-01"]
    notice = [line for line in result.stderr.splitlines() if "not read:" in line]
    assert notice and str(path) in notice[0] and "hosts.yml lists none" in notice[0], result.stderr


def test_a_host_registered_twice_is_refused(tmp_path):
    hosts_dir = tmp_path / "hosts.d"
    hosts_dir.mkdir()
    for name in ("a.yml", "b.yml"):
        (hosts_dir / name).write_text("hosts:\n  gpu-a:\n    ssh_hostname: 127.0.0.201\n")
    result = debug_inventory(tmp_path, hosts_dir)
    assert result.returncode != 0 and "Traceback" not in result.output
    assert f"{hosts_dir / 'b.yml'}: host gpu-a: also registered in {hosts_dir / 'a.yml'}" in result.output


def test_a_bad_registered_file_is_named(tmp_path):
    hosts_dir = tmp_path / "hosts.d"
    hosts_dir.mkdir()
    (hosts_dir / "tool.yml").write_text("hosts: [gpu-a]\n")
    with pytest.raises(InventoryError, match=f"{hosts_dir / 'tool.yml'}: hosts: expected a mapping"):
        load_hosts(tmp_path / "absent.yml", hosts_dir)


def test_the_registered_data_is_the_sandbox_hosts_of_before():
    """Exactly what inventory/sources.sandbox_hosts gave a node before the sandbox
    registered its own: its ssh_* data under the mirrors' settings, host keys checked,
    and now the declaration of its stand-in GPUs."""
    document = registration.inventory_document(
        {"gpu1": {"ssh_hostname": "127.0.0.11", "ssh_port": 22, "gpu_profile": "b200-x8"}}, REPO, PYPI)
    assert operator_hosts(document) == [("gpu1", {
        "ssh_strict_host_key_checking": "yes", "venv_find_links": [PYPI["url"]], "venv_no_index": True,
        "cuda_repo_url": REPO["url"], "cuda_repo_key_url": REPO["key_url"], "cuda_repo_fingerprint": REPO["fingerprint"],
        "ssh_hostname": "127.0.0.11", "ssh_port": 22, "gpu_standin": True})]
