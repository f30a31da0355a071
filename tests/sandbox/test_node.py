"""The sandbox node: real Debian 12 over real SSH, GPU driver stood in.

Tests that take nodes down (down --all, crash recovery) run against a
private state directory ($SANDBOX_STATE_DIR) so they never touch nodes an
operator has running in the default registry.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import paramiko
import pytest
import yaml

from sandbox import image, node, registration
from tests.sandbox_fixtures import node_addr

pytestmark = pytest.mark.sandbox

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "gpus"
QUERY = "nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv,noheader,nounits"


# ---------------------------------------------------------------- helpers


@pytest.fixture
def private_state(sandbox_host, tmp_path, monkeypatch):
    """A state directory of this test's own; returns a CLI runner bound to it."""
    state = tmp_path / "state"
    monkeypatch.setenv("SANDBOX_STATE_DIR", str(state))

    def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = dict(os.environ, SANDBOX_STATE_DIR=str(state))
        proc = subprocess.run([sys.executable, "-m", "sandbox", *args], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        if check and proc.returncode != 0:
            raise AssertionError(f"sandbox {' '.join(args)} exited {proc.returncode}:\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    cli.state = state
    yield cli
    cli("down", "--all", check=False)


def node_pids(state: Path, name: str) -> list[int]:
    """Host pids of every process in node *name*'s namespaces (sshd included), its launcher and boot loop."""
    rec = json.loads((state / "nodes" / name / "state.json").read_text())
    return node.pids_in_namespaces(rec["pidns"], rec["mntns"]) + [rec["launcher_pid"], rec["boot_pid"]]


def is_running(pid: int) -> bool:
    """Alive and not a zombie (a zombie holds no namespace, mount or socket)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def cmdline(pid: int) -> str:
    """Command line of *pid* ('' if gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def registry(state: Path) -> dict:
    """The registry file of *state*, parsed."""
    return yaml.safe_load((state / "nodes.yaml").read_text())


# ---------------------------------------------------------------- image


def test_base_image_is_cached(sandbox_host):
    root = image.base_root()
    started = time.monotonic()
    assert image.base_root() == root
    assert time.monotonic() - started < 0.5
    assert (root / "usr/sbin/sshd").is_file()
    assert not list((root / "etc/ssh").glob("ssh_host_*")), "host keys must be per node"
    assert sorted(image.image_info()["packages"]) == sorted(image.PACKAGES)


def test_interrupted_image_build_leaves_no_valid_cache(tmp_path, monkeypatch):
    """A build that dies half way must not look like an image; the next one cleans up."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def crash(root, log, spec, arch):
        (root / "etc").mkdir(parents=True)
        raise RuntimeError("simulated crash in debootstrap")

    monkeypatch.setattr(image, "_debootstrap", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        image.base_root()
    assert not image.image_dir().exists()
    assert image.image_info() is None
    assert list(image.cache_dir().glob(".tmp-*")), "the half-built tree stays aside, named .tmp-*"

    def fake(root, log, spec, arch):
        assert arch == "amd64"  # this machine's CPU, by Debian's name
        for sub in ("etc/ssh", "etc/apt", "var/cache/apt/archives"):
            (root / sub).mkdir(parents=True)
        (root / "etc/ssh/ssh_host_ed25519_key").write_text("x")

    monkeypatch.setattr(image, "_debootstrap", fake)
    root = image.base_root()
    assert root == image.image_dir() / "root" and root.is_dir()
    assert not list(image.cache_dir().glob(".tmp-*")), "stale half-built trees are deleted"
    assert not (root / "etc/ssh/ssh_host_ed25519_key").exists()


# ---------------------------------------------------------------- one node, incident state


@pytest.fixture(scope="module")
def incident(sandbox_node):
    """An RTX PRO 6000 x8 node with the incident's CUDA 12.8 toolkit."""
    return sandbox_node("t-incident", "127.0.0.31", gpu="rtx-pro-6000-x8", toolkit="incident")


def test_registry_entry_format(incident):
    assert list(incident) == ["ssh_hostname", "ssh_port", "ssh_user", "ssh_key",
                              "ssh_known_hosts_file", "gpu_profile", "toolkit", "os", "arch", "states"]
    addr = node_addr("127.0.0.31")
    assert incident["ssh_hostname"] == addr
    assert incident["ssh_user"] == "root"
    assert incident["gpu_profile"] == "rtx-pro-6000-x8" and incident["toolkit"] == "incident"
    assert incident["os"] == "debian12" and incident["arch"] == "amd64" and incident["states"] == []
    assert registry(node.state_dir())["nodes"]["t-incident"] == incident
    assert (node.state_dir() / "nodes.yaml").stat().st_mode & 0o777 == 0o644
    # Registered for inventory/gpu.py: its ssh_* data, in the operator's hosts.yml format, and
    # the declaration that its GPUs (a recorded rtx-pro-6000-x8) are stand-ins.
    registered = yaml.safe_load(registration.registered_file().read_text())
    assert registered["hosts"]["t-incident"] == {**{key: value for key, value in incident.items()
                                                     if key.startswith("ssh_")}, "gpu_standin": True}
    assert Path(incident["ssh_key"]).stat().st_mode & 0o777 == 0o600
    host = addr if incident["ssh_port"] == 22 else f"[{addr}]:{incident['ssh_port']}"
    lines = Path(incident["ssh_known_hosts_file"]).read_text().splitlines()
    assert any(line.startswith(host + " ssh-ed25519 ") for line in lines)


def test_nvidia_smi_query_returns_recorded_rows(incident, sandbox_ssh):
    out = sandbox_ssh(incident, QUERY).stdout
    assert out == (FIXTURES / "rtx-pro-6000-x8" / "query.csv").read_text()
    assert len(out.splitlines()) == 8


def test_nvidia_smi_plain_prints_recorded_table(incident, sandbox_ssh):
    out = sandbox_ssh(incident, "nvidia-smi").stdout
    assert out == (FIXTURES / "rtx-pro-6000-x8" / "smi.txt").read_text()
    assert "CUDA Version: 13.0" in out


def test_login_shell_finds_cuda_12_8(incident, sandbox_ssh):
    out = sandbox_ssh(incident, "nvcc --version", login=True).stdout
    assert "Cuda compilation tools, release 12.8, V12.8.93" in out
    assert sandbox_ssh(incident, "command -v nvcc", login=True).stdout.strip() == \
        "/usr/local/cuda-12.8/bin/nvcc"
    # Only login shells get it, as with an /etc/profile.d snippet on a real host.
    assert sandbox_ssh(incident, "command -v nvcc", check=False).returncode != 0


def test_incident_toolkit_layout(incident, sandbox_ssh):
    assert sandbox_ssh(incident, "readlink /usr/local/cuda").stdout.strip() == "/usr/local/cuda-12.8"
    version = json.loads(sandbox_ssh(incident, "cat /usr/local/cuda-12.8/version.json").stdout)
    assert version == {"cuda": {"name": "CUDA SDK", "version": "12.8.1"}}
    bad = sandbox_ssh(incident, "/usr/local/cuda-12.8/bin/nvcc -c x.cu", check=False)
    assert bad.returncode != 0 and "stand-in" in bad.stderr


def test_node_looks_like_a_host(incident, sandbox_ssh):
    assert "processor" in sandbox_ssh(incident, "cat /proc/cpuinfo").stdout
    assert sandbox_ssh(incident, "apt-get --version").stdout.startswith("apt ")
    assert sandbox_ssh(incident, "hostname").stdout.strip() == "t-incident"
    assert sandbox_ssh(incident, ". /etc/os-release; echo $ID $VERSION_ID").stdout.split() == ["debian", "12"]
    # Its own PID namespace: systemd is PID 1, no host process is visible.
    assert sandbox_ssh(incident, "cat /proc/1/comm").stdout.strip() == "systemd"
    mounts = sandbox_ssh(incident, "cat /proc/mounts").stdout
    for point in (" / overlay", " /proc proc", " /sys sysfs", " /dev tmpfs", " /dev/pts devpts",
                  " /sys/fs/cgroup cgroup2", " /proc/sys proc ro,"):
        assert point in mounts
    modes = sandbox_ssh(incident, "stat -c '%a %n' /root/.ssh/authorized_keys /usr/bin/nvidia-smi").stdout
    assert modes.split("\n")[:2] == ["600 /root/.ssh/authorized_keys", "755 /usr/bin/nvidia-smi"]
    libs = sandbox_ssh(incident, "readlink /usr/lib/x86_64-linux-gnu/libcuda.so; "
                                 "ldconfig -p | grep -c 'libcuda.so.1 '").stdout.split()
    assert libs == ["libcuda.so.1", "1"]
    # A pty works (interactive operators, sudo -S...).
    assert sandbox_ssh(incident, "python3 -c 'import pty; pty.spawn([\"tty\"])'").stdout.startswith("/dev/pts/")


T_UNIT = """[Service]
Type=oneshot
RemainAfterExit=yes
User=nobody
EnvironmentFile=/etc/t-unit.env
Environment=WHERE=unit
ExecStart=/bin/sh -c 'echo "$$GREETING from $$WHERE as $$(id -un)"'

[Install]
WantedBy=multi-user.target
"""


def test_systemd_runs_units_as_on_a_host(incident, sandbox_ssh):
    """What tasks/service.py and the node checks rely on: units, env files, the journal."""
    sandbox_ssh(incident, "test -d /run/systemd/system")  # how pyinfra tasks detect systemd
    assert sandbox_ssh(incident, "systemctl is-system-running --wait").stdout.strip() == "running"
    sandbox_ssh(incident, f"echo 'GREETING=hello world' >/etc/t-unit.env && "
                          f"printf %s {shlex.quote(T_UNIT)} >/etc/systemd/system/t-unit.service && "
                          f"systemctl daemon-reload && systemctl enable --now t-unit.service")
    assert sandbox_ssh(incident, "systemctl is-active t-unit").stdout.strip() == "active"
    assert sandbox_ssh(incident, "systemctl show -p Environment t-unit").stdout.strip() == "Environment=WHERE=unit"
    assert "hello world from unit as nobody" in sandbox_ssh(incident, "journalctl -u t-unit").stdout
    env = sandbox_ssh(incident, "systemd-run -q -p User=nobody -p EnvironmentFile=/etc/t-unit.env "
                                "--wait --pipe env").stdout.splitlines()
    assert "GREETING=hello world" in env and "USER=nobody" in env
    failed = sandbox_ssh(incident, "systemd-run -q --unit t-fail sh -c 'echo boom; exit 3'; sleep 1; "
                                   "systemctl is-failed t-fail; journalctl -u t-fail")
    assert failed.stdout.startswith("failed\n") and "boom" in failed.stdout


def test_paramiko_with_strict_host_keys(incident):
    """What pyinfra's SSH connector does: paramiko, known_hosts, reject unknown keys."""
    client = paramiko.SSHClient()
    client.load_host_keys(incident["ssh_known_hosts_file"])
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(incident["ssh_hostname"], incident["ssh_port"], username=incident["ssh_user"],
                   key_filename=incident["ssh_key"], look_for_keys=False, allow_agent=False)
    try:
        _, stdout, _ = client.exec_command(QUERY)
        assert stdout.read().decode().startswith("0, NVIDIA RTX PRO 6000")
    finally:
        client.close()


def test_wrong_host_key_is_rejected(incident, tmp_path):
    """Strict checking really is on: a stale known_hosts entry fails the connection."""
    stale = tmp_path / "known_hosts"
    key = paramiko.Ed25519Key.from_private_key_file(incident["ssh_key"])  # not a host key
    host = incident["ssh_hostname"] if incident["ssh_port"] == 22 \
        else f"[{incident['ssh_hostname']}]:{incident['ssh_port']}"
    stale.write_text(f"{host} ssh-ed25519 {key.get_base64()}\n")
    proc = subprocess.run(
        ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
         "-o", f"UserKnownHostsFile={stale}", "-o", "HostKeyAlgorithms=ssh-ed25519",
         "-i", incident["ssh_key"], "-p", str(incident["ssh_port"]),
         f"root@{incident['ssh_hostname']}", "true"],
        capture_output=True, text=True, timeout=30)
    assert proc.returncode == 255
    assert "HOST IDENTIFICATION HAS CHANGED" in proc.stderr


# ---------------------------------------------------------------- other profiles


def test_driver_failed_profile(sandbox_node, sandbox_ssh):
    entry = sandbox_node("t-drvfail", "127.0.0.32", gpu="driver-failed", toolkit="none")
    proc = sandbox_ssh(entry, QUERY, check=False)
    assert proc.returncode == int((FIXTURES / "driver-failed" / "exit_code").read_text())
    assert "couldn't communicate with the NVIDIA driver" in proc.stdout
    assert sandbox_ssh(entry, "ls /usr/lib/x86_64-linux-gnu/libcuda.so*", check=False).returncode != 0
    assert sandbox_ssh(entry, "test -e /usr/local/cuda", check=False).returncode != 0
    assert sandbox_ssh(entry, "command -v nvcc", login=True, check=False).returncode != 0


def test_no_gpu_profile(sandbox_node, sandbox_ssh):
    entry = sandbox_node("t-nogpu", "127.0.0.33", gpu="none", toolkit="none")
    assert sandbox_ssh(entry, "command -v nvidia-smi", check=False).returncode != 0
    assert sandbox_ssh(entry, "ls /usr/lib/x86_64-linux-gnu/libcuda.so*", check=False).returncode != 0


def test_up_rejects_bad_input(private_state):
    assert "not in 127.0.0.0/8" in private_state("up", "x", "--addr", "10.0.0.1", "--gpu", "none",
                                                check=False).stderr
    assert "unknown GPU profile" in private_state("up", "x", "--addr", node_addr("127.0.0.40"), "--gpu", "a100",
                                                 check=False).stderr


# ---------------------------------------------------------------- lifecycle (private state)


def test_two_nodes_at_once_then_down_all_leaves_nothing(private_state, sandbox_ssh):
    state = private_state.state
    private_state("up", "n1", "--addr", node_addr("127.0.0.11"), "--gpu", "rtx-pro-6000-x8", "--toolkit", "incident")
    private_state("up", "n2", "--addr", node_addr("127.0.0.12"), "--gpu", "h100-x8")
    nodes = registry(state)["nodes"]
    assert set(nodes) == {"n1", "n2"}
    # A private state directory registers its nodes in its own hosts.d/, never the checkout's.
    assert set(yaml.safe_load((state / "hosts.d" / "sandbox.yml").read_text())["hosts"]) == {"n1", "n2"}
    assert sandbox_ssh(nodes["n1"], "hostname").stdout.strip() == "n1"
    assert sandbox_ssh(nodes["n2"], "hostname").stdout.strip() == "n2"
    assert "H100" in sandbox_ssh(nodes["n2"], QUERY).stdout
    assert "RTX PRO 6000" in sandbox_ssh(nodes["n1"], QUERY).stdout
    assert "running" in private_state("status").stdout

    pids = node_pids(state, "n1") + node_pids(state, "n2")
    sshds = [p for p in pids if "sshd" in cmdline(p)]
    assert len(sshds) >= 2, "each node has a listening sshd"

    private_state("down", "--all")

    assert [p for p in pids if is_running(p)] == []
    with open("/proc/self/mountinfo") as fh:
        assert str(state) not in fh.read()
    assert not node.node_cgroup("n1").exists() and not node.node_cgroup("n2").exists()
    assert not list((state / "nodes").iterdir())
    assert registry(state) == {"nodes": {}}
    assert not (state / "hosts.d" / "sandbox.yml").exists(), "no node left registered for inventory/gpu.py"
    assert (state / "ssh" / "known_hosts").read_text() == ""
    assert "no sandbox nodes" in private_state("status").stdout


def test_killed_node_does_not_block_next_up(private_state, sandbox_ssh):
    state = private_state.state
    private_state("up", "crash", "--addr", node_addr("127.0.0.11"), "--gpu", "gb10")
    rec = json.loads((state / "nodes" / "crash" / "state.json").read_text())
    old = node_pids(state, "crash")
    # The namespace's first process dies abruptly (the kernel takes the rest).
    os.kill(rec["init_pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(is_running(p) for p in old) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "dead" in private_state("status").stdout

    private_state("up", "crash", "--addr", node_addr("127.0.0.11"), "--gpu", "gb10")
    entry = registry(state)["nodes"]["crash"]
    assert "GB10" in sandbox_ssh(entry, QUERY).stdout
    assert not any(is_running(p) for p in old)


def test_half_created_node_dir_does_not_block_next_up(private_state, sandbox_ssh):
    """A crash while writing the node's files leaves a directory and no process."""
    state = private_state.state
    junk = state / "nodes" / "half"
    (junk / "upper" / "etc").mkdir(parents=True)
    (junk / "work" / "work").mkdir(parents=True)
    (junk / "work" / "work").chmod(0)
    private_state("up", "half", "--addr", node_addr("127.0.0.12"), "--gpu", "b200-x8", "--toolkit", "incident")
    entry = registry(state)["nodes"]["half"]
    assert "release 12.8" in sandbox_ssh(entry, "nvcc --version", login=True).stdout


def test_up_again_restarts_clean(private_state, sandbox_ssh):
    state = private_state.state
    private_state("up", "again", "--addr", node_addr("127.0.0.12"), "--gpu", "rtx-5090")
    entry = registry(state)["nodes"]["again"]
    sandbox_ssh(entry, "touch /root/marker")
    old = node_pids(state, "again")
    private_state("up", "again", "--addr", node_addr("127.0.0.12"), "--gpu", "rtx-5090")
    entry = registry(state)["nodes"]["again"]
    assert sandbox_ssh(entry, "test -e /root/marker", check=False).returncode == 1
    assert not any(is_running(p) for p in old)
    private_state("down", "again")
    assert not (state / "nodes" / "again").exists()
    assert registry(state) == {"nodes": {}}


def test_port_22_taken_falls_back_and_known_hosts_has_the_port(private_state, sandbox_ssh):
    state = private_state.state
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind((node_addr("127.0.0.13"), 22))
        squatter.listen()
        private_state("up", "moved", "--addr", node_addr("127.0.0.13"), "--gpu", "rtx-5090")
    entry = registry(state)["nodes"]["moved"]
    assert entry["ssh_port"] != 22
    lines = (state / "ssh" / "known_hosts").read_text().splitlines()
    assert all(line.startswith(f"[{node_addr('127.0.0.13')}]:{entry['ssh_port']} ") for line in lines)
    assert "RTX 5090" in sandbox_ssh(entry, QUERY).stdout


def test_cli_usage_errors(private_state):
    assert private_state("down", check=False).returncode == 2
    assert private_state("down", "x", "--all", check=False).returncode == 2
    proc = private_state("down", "ghost")
    assert "no such node" in proc.stderr
