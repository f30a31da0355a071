"""The node suite never runs a program as root in the service's environment
(tests/node/remote.py): the env file's PATH puts the venv's bin first, and an external
venv another user owns (or a ``service_env`` LD_PRELOAD) would run as root. The checks
that prove the service's environment resolves the toolkit run as the service user
(``nobody`` before that account exists).

Two ways: on a systemd node every ``systemd-run`` the checks start carries ``User=``
(recorded by a stand-in host); elsewhere the rebuilt environment is run here for real by
``sh`` as root, with a PATH whose first directory holds a planted ``timeout`` and ``sh``
that record who ran them."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.node import remote

USER = "nobody"


class Result(SimpleNamespace):
    pass


class RecordingHost:
    """A testinfra host stand-in: answers the suite's few questions, runs nothing
    else, records every command."""

    def __init__(self, systemd, env_text):
        self.systemd, self.env_text, self.commands = systemd, env_text, []

    def run(self, command):
        self.commands.append(command)
        if command.startswith("test -d /run/systemd/system"):
            return Result(rc=0 if self.systemd else 1, stdout="", stderr="")
        if command.startswith("cat -- /etc/sglang/sglang.env"):
            return Result(rc=0, stdout=self.env_text, stderr="")
        if command.startswith("cat -- "):
            return Result(rc=1, stdout="", stderr="")
        if command.startswith("getent passwd"):
            return Result(rc=0, stdout="", stderr="")
        return Result(rc=0, stdout="PATH=/x\x1eCUDA_HOME=/usr/local/cuda-13.0\x1e", stderr="")


def expected_for(user=USER):
    layout = SimpleNamespace(env_file="/etc/sglang/sglang.env", unit="/etc/systemd/system/sglang.service")
    return SimpleNamespace(name="gpu-node-01", layout=layout, config=SimpleNamespace(service_user=user))


@pytest.mark.parametrize("call", ["service_environment", "run_in_service_env", "run_in_service_env as user"])
def test_every_systemd_run_names_the_service_user(call):
    host = RecordingHost(systemd=True, env_text="CUDA_HOME=/usr/local/cuda-13.0\n")
    expected = expected_for("sglang")
    if call == "service_environment":
        remote.service_environment(host, expected)
    else:
        remote.run_in_service_env(host, expected, "command -v nvcc", as_service_user=call.endswith("as user"))
    runs = [command for command in host.commands if command.startswith("systemd-run")]
    assert runs, host.commands
    for command in runs:
        assert "--property=User=sglang" in command, f"systemd-run as root: {command}"


@pytest.fixture
def planted():
    """A PATH directory holding ``timeout`` and ``sh`` that record their uid, readable
    by every user (as the venv's bin of an external venv would be)."""
    top = Path(tempfile.mkdtemp(prefix="node-remote-", dir="/tmp"))
    try:
        top.chmod(0o755)
        bin_dir, record = top / "bin", top / "record"
        bin_dir.mkdir(mode=0o755)
        record.mkdir(mode=0o777)
        record.chmod(0o777)
        for name in ("timeout", "sh", "env"):
            script = bin_dir / name
            script.write_text(f"#!/bin/sh\nid -u >> {record}/{name}\nexec /usr/bin/{name} \"$@\"\n"
                              if name != "sh" else f"#!/bin/sh\nid -u >> {record}/sh\nexec /bin/sh \"$@\"\n")
            script.chmod(0o755)
        yield bin_dir, record
    finally:
        shutil.rmtree(top)


class LocalHost(RecordingHost):
    """Runs the suite's snippets here, for real (no systemd: the rebuilt environment)."""

    def run(self, command):
        if command.startswith(("test -d /run/systemd/system", "cat -- ")):
            return super().run(command)
        self.commands.append(command)
        done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        return Result(rc=done.returncode, stdout=done.stdout, stderr=done.stderr)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to show that root does not run the planted programs")
def test_root_never_runs_what_the_service_path_names(planted):
    bin_dir, record = planted
    env_text = f"PATH={bin_dir}:/usr/bin:/bin\nCUDA_HOME=/usr/local/cuda-13.0\n"
    host = LocalHost(systemd=False, env_text=env_text)
    result = remote.run_in_service_env(host, expected_for(USER), "command -v nvcc; id -u")
    assert result.rc == 0, result
    uid = subprocess.run(["id", "-u", USER], capture_output=True, text=True, check=True).stdout.strip()
    ran = {path.name: set(path.read_text().split()) for path in record.iterdir()}
    assert ran, "the planted programs never ran: the check did not use the service's PATH"
    assert result.stdout.split()[-1] == uid, result
    for name, uids in ran.items():
        assert "0" not in uids, f"root ran the planted {name}"
