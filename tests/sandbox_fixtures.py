"""Fixtures for tests that start real sandbox nodes (see sandbox/); tests/conftest.py
makes them available to every suite.

Reusable by other suites (tests/node/...):

    def test_x(sandbox_node, sandbox_ssh):
        entry = sandbox_node("t-gpu", "127.0.0.31", gpu="rtx-pro-6000-x8", toolkit="incident")
        out = sandbox_ssh(entry, "nvidia-smi -L").stdout

``sandbox_node`` starts nodes in the default registry (.sandbox/nodes.yaml,
the one inventory/gpu.py reads) and takes every node it started down at the
end of the session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    # `python3 -m sandbox` runs from the repo root; make the package importable
    # here the same way, whatever directory pytest was started from.
    sys.path.insert(0, str(REPO_ROOT))

from sandbox import node  # noqa: E402


def pytest_configure(config):
    """Register the `sandbox` marker (tests that start real nodes)."""
    config.addinivalue_line(
        "markers",
        "sandbox: starts real sandbox nodes (needs root, debootstrap, namespaces; "
        "first run builds the base image, about a minute)",
    )


def require_sandbox_host() -> None:
    """Skip when not root; fail loudly when a host package is missing."""
    if os.geteuid() != 0:
        pytest.skip("sandbox nodes need root (mount/PID namespaces, chroot)")
    missing = [tool for tool in ("debootstrap", "unshare", "ssh", "ssh-keygen", "gcc")
               if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"host tools missing: {', '.join(missing)}; "
                    f"install the packages in sandbox/host-packages.txt")


def ssh_command(entry: dict, command: str, login: bool = False) -> list[str]:
    """argv of an OpenSSH client call to a node, strict host key checking on."""
    remote = f"bash -lc {_quote(command)}" if login else command
    return [
        "ssh", "-F", "/dev/null",
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={entry['ssh_known_hosts_file']}",
        "-o", "IdentitiesOnly=yes",
        "-o", "ConnectTimeout=10",
        "-i", entry["ssh_key"],
        "-p", str(entry["ssh_port"]),
        f"{entry['ssh_user']}@{entry['ssh_hostname']}",
        remote,
    ]


def _quote(text: str) -> str:
    """Single-quote *text* for the remote shell."""
    return "'" + text.replace("'", "'\\''") + "'"


def run_ssh(entry: dict, command: str, login: bool = False, check: bool = True):
    """Run *command* on a node over SSH; return the CompletedProcess."""
    proc = subprocess.run(ssh_command(entry, command, login), capture_output=True,
                          text=True, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"ssh {entry['ssh_hostname']}:{entry['ssh_port']} {command!r} "
                             f"exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def sandbox_host():
    """Skip unless this machine can run sandbox nodes (root + host packages)."""
    require_sandbox_host()


@pytest.fixture(scope="session")
def sandbox_ssh():
    """`run(entry, command, login=False, check=True) -> CompletedProcess` over real SSH."""
    return run_ssh


@pytest.fixture(scope="session")
def sandbox_node(sandbox_host):
    """Factory `start_node(name, addr, gpu="rtx-pro-6000-x8", toolkit="incident", port=None) -> dict`.

    Starts (or restarts from clean) a node in the default registry and
    returns its registry entry (ssh_hostname, ssh_port, ssh_user, ssh_key,
    ssh_known_hosts_file, gpu_profile, toolkit). Every node started through
    it is taken down at the end of the session.
    """
    started: list[str] = []

    def start_node(name: str, addr: str, gpu: str = "rtx-pro-6000-x8",
                   toolkit: str = "incident", port: int | None = None) -> dict:
        entry = node.up(name, addr, gpu, toolkit, port)
        if name not in started:
            started.append(name)
        return entry

    yield start_node
    if started:
        node.down(started)
