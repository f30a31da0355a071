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

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
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


# Settings every deploy of the shared node uses, passed as pyinfra --data (and as
# --node-data to the node suite): the real stack at its pins, with the pre-warm
# reduced to two modules to fit CI's budget (make demo pre-warms the full set).
DEPLOY_DATA = ("prewarm_modules=sampling,norm",)
DEPLOYED = "deployed"
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def pyinfra_cli(*args, data=DEPLOY_DATA, json_output=False, timeout=1800):
    """Run the real pyinfra CLI from the repo root; ``.output`` holds stdout and stderr."""
    settings = [arg for item in data for arg in ("--data", item)]
    command = [PYINFRA, "-y", *(["--json"] if json_output else []), *settings, *args]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result


def read_report(host: str) -> dict:
    """reports/<host>.json of the last validate.py or deploy.py run."""
    return json.loads((REPO_ROOT / "reports" / f"{host}.json").read_text())


class SuiteRun:
    """One run of ``pytest tests/node``: exit code, output, per-(host, check) outcome
    from its JUnit XML, and its Markdown report."""

    def __init__(self, proc, junit, report):
        self.rc, self.output = proc.returncode, proc.stdout + proc.stderr
        self.report = report.read_text() if report.exists() else ""
        self.results = {}
        if junit.exists():
            for case in ET.parse(junit).iter("testcase"):
                props = {p.get("name"): p.get("value") for p in case.iter("property")}
                if "node" not in props:
                    continue
                status = next((tag.upper() for tag in ("failure", "error", "skipped") if case.find(tag) is not None),
                              "PASS")
                self.results[(props["node"], props["check"])] = status

    def hosts(self):
        return {host for host, _ in self.results}

    def checks(self, host):
        return {check for name, check in self.results if name == host}

    def failing(self, host):
        return {check for (name, check), status in self.results.items()
                if name == host and status in ("FAILURE", "ERROR")}

    def __repr__(self):
        return f"SuiteRun(rc={self.rc})\n{self.output[-6000:]}"


def node_suite(tmp, *args, env=None):
    """Run the suite's CLI exactly as an operator would, against inventory/gpu.py."""
    tmp.mkdir(parents=True, exist_ok=True)
    junit, report = tmp / "junit.xml", tmp / "report.md"
    for path in (junit, report):
        path.unlink(missing_ok=True)
    data = [arg for item in DEPLOY_DATA for arg in ("--node-data", item)]
    command = [str(Path(sys.executable).parent / "pytest"), "tests/node", "--inventory", "inventory/gpu.py", *data, *args,
               f"--junitxml={junit}", f"--node-report={report}", "-p", "no:cacheprovider"]
    proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return SuiteRun(proc, junit, report)


@pytest.fixture(scope="session")
def deployed_node(sandbox_node, tmp_path_factory):
    """One node in the incident's state, validated, then brought up by deploy.py
    through the real CLI (toolkit, env, venv, pre-warm, unit). Shared by the suites
    that check a deployed node; each restores what it breaks. The entry holds
    ``before`` (the validate report before deploy), ``before_suite`` (the node
    suite's run before deploy) and ``deploy_seconds``."""
    from sandbox import aptrepo, pypimirror

    aptrepo.ensure_served()
    pypimirror.serve()
    # GPU_BRINGUP_DEPLOYED_ADDR: another loopback address, when 127.0.0.61 is taken on this machine.
    addr = os.environ.get("GPU_BRINGUP_DEPLOYED_ADDR", "127.0.0.61")
    entry = sandbox_node(DEPLOYED, addr, gpu="rtx-pro-6000-x8", toolkit="incident")
    validated = pyinfra_cli("inventory/gpu.py", "--limit", DEPLOYED, "validate.py")
    assert validated.returncode == 0, validated.output[-4000:]
    before = read_report(DEPLOYED)
    before_suite = node_suite(tmp_path_factory.mktemp("node-suite-before"), "--node-limit", DEPLOYED)
    started = time.monotonic()
    deployed = pyinfra_cli("inventory/gpu.py", "--limit", DEPLOYED, "deploy.py")
    assert deployed.returncode == 0, deployed.output[-6000:]
    return dict(entry, name=DEPLOYED, before=before, before_suite=before_suite,
                deploy_seconds=time.monotonic() - started)
