"""Host keys are always checked, judged on the data pyinfra really uses (inventory,
``--data``, an ssh_config, paramiko's kwargs), before any connection: through the real
CLI, ``pyinfra inventory/gpu.py validate.py`` with GPU_BRINGUP_HOSTS naming one or two
hosts on local listening sockets. A refused host gets one line (host, setting, value,
fix), nothing reaches its socket, and the other host of the run still connects."""

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


class Listener:
    """A TCP socket on 127.0.0.1 that counts connection attempts and closes each at
    once (pyinfra then fails that host at once: no SSH banner)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            conn.close()

    def attempted(self):
        return self.count > 0

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


@pytest.fixture
def listeners():
    made = [Listener(), Listener()]
    yield made
    for listener in made:
        listener.close()


def safe_known_hosts(tmp_path, name="known_hosts"):
    path = tmp_path / name
    path.write_text("")
    path.chmod(0o600)
    return path


def run_validate(tmp_path, hosts, *args):
    """pyinfra inventory/gpu.py validate.py for ``hosts`` ({name: data}), HOME in the
    scratch directory (no ~/.ssh of this machine), reports there too."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    hosts_file = tmp_path / "hosts.yml"
    hosts_file.write_text(json.dumps({"hosts": hosts}))
    env = {**os.environ, "HOME": str(home), "GPU_BRINGUP_HOSTS": str(hosts_file),
           "GPU_BRINGUP_REPORTS": str(tmp_path / "reports")}
    result = subprocess.run([PYINFRA, "-y", "--data", "ssh_connect_retries=0", *args, "inventory/gpu.py", "validate.py"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result


def host(listener, **data):
    return {"ssh_hostname": "127.0.0.1", "ssh_port": listener.port, "ssh_user": "nobody", **data}


def ssh_config(tmp_path, text, mode=0o600):
    path = tmp_path / "ssh_config"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def case_known_hosts_mode(tmp_path):
    path = safe_known_hosts(tmp_path, "case_known_hosts")
    path.chmod(0o666)
    return {"ssh_known_hosts_file": str(path)}, [], "ssh_known_hosts_file", "writable by group or others"


def case_known_hosts_owner(tmp_path):
    path = safe_known_hosts(tmp_path, "case_known_hosts")
    os.chown(path, 65534, 65534)
    return {"ssh_known_hosts_file": str(path)}, [], "ssh_known_hosts_file", "owned by uid 65534"


def case_shared_directory(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "known_hosts").write_text("")
    (shared / "known_hosts").chmod(0o600)
    return ({"ssh_known_hosts_file": str(shared / "known_hosts")}, [], "ssh_known_hosts_file",
            "which other users can write")


def case_default_ssh_config(tmp_path):
    """No ssh_config_file: pyinfra reads ~/.ssh/config, and its UserKnownHostsFile counts."""
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "config").write_text("Host *\n    UserKnownHostsFile /dev/null\n")
    return {"ssh_known_hosts_file": None}, [], "UserKnownHostsFile (ssh_config)='/dev/null'", "every key is new"


# (data in hosts.yml, --data arguments, setting named, fragment of the reason)
CASES = {
    "--data strict=no": lambda t: ({}, ["--data", "ssh_strict_host_key_checking=no"],
                                   "ssh_strict_host_key_checking='no'", "host keys are always checked"),
    "--data strict=off": lambda t: ({}, ["--data", "ssh_strict_host_key_checking=off"],
                                    "ssh_strict_host_key_checking='off'", "host keys are always checked"),
    "--data strict=ask": lambda t: ({}, ["--data", "ssh_strict_host_key_checking=ask"],
                                    "ssh_strict_host_key_checking='ask'", "host keys are always checked"),
    "yaml accept-new + /dev/null": lambda t: ({"ssh_strict_host_key_checking": "accept-new",
                                               "ssh_known_hosts_file": "/dev/null"}, [],
                                              "ssh_known_hosts_file='/dev/null'", "every key is new"),
    "--data known_hosts=/dev/null": lambda t: ({}, ["--data", "ssh_known_hosts_file=/dev/null"],
                                               "ssh_known_hosts_file='/dev/null'", "every key is new"),
    "known_hosts 0666": case_known_hosts_mode,
    "known_hosts of another user": case_known_hosts_owner,
    "known_hosts in a 0777 directory": case_shared_directory,
    "ssh_config UserKnownHostsFile /dev/null": lambda t: (
        {"ssh_known_hosts_file": None,
         "ssh_config_file": ssh_config(t, "Host *\n    UserKnownHostsFile /dev/null\n")}, [],
        "UserKnownHostsFile (ssh_config)='/dev/null'", "every key is new"),
    "~/.ssh/config UserKnownHostsFile /dev/null": case_default_ssh_config,
    "ssh_config writable by others": lambda t: (
        {"ssh_config_file": ssh_config(t, "Host *\n    ServerAliveInterval 5\n", 0o666)}, [],
        "ssh_config_file=", "only you (or root) can change"),
    "ssh_config ProxyJump hop unchecked": lambda t: (
        {"ssh_config_file": ssh_config(t, "Host 127.0.0.1\n    ProxyJump jump\nHost jump\n"
                                          "    StrictHostKeyChecking no\n")}, [],
        "ProxyJump hop jump", "StrictHostKeyChecking yes"),
    "--data paramiko gss_kex": lambda t: ({}, ["--data", 'ssh_paramiko_connect_kwargs={"gss_kex": true}'],
                                          "ssh_paramiko_connect_kwargs=", "gss_kex can bypass"),
}


@pytest.mark.parametrize("case", CASES)
def test_unchecked_host_key_refuses_the_host_before_it_connects(tmp_path, listeners, case):
    data, args, setting, reason = CASES[case](tmp_path)
    refused = listeners[0]
    hosts = {"bad-1": {**host(refused, ssh_known_hosts_file=str(safe_known_hosts(tmp_path))), **data}}
    hosts["bad-1"] = {key: value for key, value in hosts["bad-1"].items() if value is not None}
    result = run_validate(tmp_path, hosts, *args)
    assert result.returncode != 0, result.output
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.splitlines()
             if "bad-1: setting" in line and setting in line and reason in line]
    assert lines, result.output[-3000:]
    assert not refused.attempted(), f"pyinfra connected to the refused host:\n{result.output[-3000:]}"
    summary = (tmp_path / "reports" / "summary.json").read_text()
    assert "bad-1" in summary and setting.split("=")[0] in summary, summary


def test_the_other_host_of_the_run_goes_on(tmp_path, listeners):
    """One host refused for /dev/null, the other (checked keys, a known_hosts of ours)
    is still tried in the same run: only the refused one is never reached."""
    refused, good = listeners
    known_hosts = str(safe_known_hosts(tmp_path))
    result = run_validate(tmp_path, {
        "bad-1": host(refused, ssh_strict_host_key_checking="accept-new", ssh_known_hosts_file="/dev/null"),
        "good-1": host(good, ssh_strict_host_key_checking="accept-new", ssh_known_hosts_file=known_hosts)})
    assert [line for line in result.output.splitlines() if "bad-1: setting ssh_known_hosts_file='/dev/null'" in line]
    assert not refused.attempted(), result.output
    assert good.attempted(), result.output
    assert "good-1: setting" not in result.output, result.output
    summary = json.loads((tmp_path / "reports" / "summary.json").read_text())
    assert {"bad-1", "good-1"} <= set(json.dumps(summary).replace('"', " ").split()), summary
