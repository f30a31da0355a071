"""The node suite's command line (pytest tests/node) without a node: its usage errors,
the inventories it refuses (with the reason), and a run against this machine
(--connection=local) with --node-config settings."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTEST = str(Path(sys.executable).parent / "pytest")


def node_suite(*args, hosts_file=None, cwd=ROOT):
    env = {**os.environ, **({"GPU_BRINGUP_HOSTS": str(hosts_file)} if hosts_file else {})}
    result = subprocess.run([PYTEST, "tests/node", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result


def test_without_hosts_it_is_a_usage_error():
    result = node_suite()
    assert result.returncode == 4, result.output
    assert "tests/node checks nodes: give --inventory INVENTORY [--node-limit NAME], --hosts=HOSTSPEC" in result.output


def test_node_limit_without_inventory_is_a_usage_error():
    result = node_suite("--node-limit", "gpu-*", "--connection=local")
    assert result.returncode == 4 and "--node-limit selects hosts of --inventory" in result.output


@pytest.mark.parametrize("host_data,reason", [
    ("ssh_password: secret", "cannot translate ssh_password"),
    ("ssh_config_file: ~/.ssh/config", "cannot translate ssh_config_file"),
    ("ssh_strict_host_key_checking: 'no'", "host keys are always checked"),
])
def test_inventories_it_refuses(tmp_path, host_data, reason):
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(f"hosts:\n  gpu-node-01:\n    ssh_hostname: 10.0.0.11\n    {host_data}\n")
    result = node_suite("--inventory", "inventory/gpu.py", hosts_file=hosts)
    assert result.returncode == 4, result.output
    assert reason in result.output and "gpu-node-01" in result.output


def test_another_connector_is_refused(tmp_path):
    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = ["@docker/ubuntu:24.04"]\n')
    result = node_suite("--inventory", str(inventory))
    assert result.returncode == 4, result.output
    assert "reaches hosts over SSH (or @local), not through pyinfra's @docker connector" in result.output


def test_accept_new_is_checked_as_yes():
    from tests.node.connection import InventoryHost, ssh_config_block

    block = ssh_config_block(InventoryHost("n1", data={"ssh_hostname": "10.0.0.5",
                                                       "ssh_strict_host_key_checking": "accept-new"}))
    assert "    StrictHostKeyChecking yes" in block.splitlines()


def test_local_connection_with_node_config(tmp_path):
    """This machine has no GPU: the suite runs, every check reports, the verdict is NO and
    the settings of --node-config are the ones expected (the venv path named in a failure)."""
    config = tmp_path / "settings.yaml"
    config.write_text('venv_path: "/srv/sglang-suite-test/venv"\nservice_user: "sglang"\n')
    report = tmp_path / "report.md"
    result = node_suite("--connection=local", "--node-config", str(config), f"--node-report={report}")
    assert result.returncode == 1, result.output
    text = report.read_text()
    assert "| nvidia_smi_answers" in text and "**FAIL**" in text and "**NO**" in text
    assert "no /srv/sglang-suite-test/venv/bin/python" in text
