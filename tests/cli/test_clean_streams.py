"""Clean streams (docs/fleets.md): ``pyinfra [--json] INVENTORY validate.py`` with a host
that cannot be reached beside ``@local``, without ``-y`` and without a terminal (stdin
from /dev/null): validate.py never asks for confirmation (it changes nothing), stdout
is one JSON document under ``--json``, the unreachable host is one line of pyinfra's
and one under the summary, never a traceback; pyinfra-debug.log is no file of the
repository."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = Path(sys.executable).parent / "pyinfra"

# Two unreachable kinds: a refused port, and TEST-NET-1 (RFC 5737: never routed) with a
# short connect timeout.
DOWN = {"refused": {"ssh_hostname": "127.0.0.1", "ssh_port": 1, "ssh_connect_timeout": 3},
        "timeout": {"ssh_hostname": "192.0.2.1", "ssh_connect_timeout": 2}}


@pytest.fixture
def not_ssh():
    """A port that answers with no SSH banner and hangs up (paramiko logs a traceback)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                continue
            with client:
                client.sendall(b"not ssh\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield {"ssh_hostname": "127.0.0.1", "ssh_port": server.getsockname()[1], "ssh_connect_timeout": 3}
    stop.set()
    thread.join()
    server.close()


def test_a_port_that_speaks_no_ssh_is_one_line_and_its_traceback_only_with_v(tmp_path, not_ssh):
    path = inventory(tmp_path, not_ssh)
    result = validate(tmp_path, "--json", str(path), "validate.py")
    assert result.returncode == 1, result.stderr
    json.loads(result.stdout)
    assert "Traceback" not in result.stderr and "Exception (client)" not in result.stderr, result.stderr
    assert "down-01: unreachable: SSH error (Error reading SSH protocol banner" in result.stderr
    detailed = validate(tmp_path, "-v", "--json", str(path), "validate.py")
    json.loads(detailed.stdout)
    assert "Traceback" in detailed.stderr  # -v keeps paramiko's own log


def inventory(tmp_path, down):
    (tmp_path / "known_hosts").write_text("")
    data = {**down, "ssh_known_hosts_file": str(tmp_path / "known_hosts")}
    path = tmp_path / "inventory.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                    "from control import fleet\nfleet.watch_connections()\n"
                    f"hosts = ([\"@local\", (\"down-01\", {data!r})], {{\"target_sms\": \"12.0\"}})\n")
    return path


def validate(tmp_path, *args):
    return subprocess.run([str(PYINFRA), *args], cwd=ROOT, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL, env=dict(os.environ, GPU_BRINGUP_REPORTS=str(tmp_path / "reports")))


@pytest.mark.parametrize("kind", sorted(DOWN))
def test_json_stdout_is_one_document_with_an_unreachable_host(tmp_path, kind):
    result = validate(tmp_path, "--json", str(inventory(tmp_path, DOWN[kind])), "validate.py")
    assert result.returncode == 1, result.stderr
    json.loads(result.stdout)  # one document, whatever happened to the hosts
    assert "Traceback" not in result.stderr and "Press enter" not in result.stderr
    down = [line for line in result.stderr.splitlines() if "down-01" in line and "Could not connect" in line]
    assert len(down) == 2, result.stderr  # pyinfra's line, and the one under the summary
    assert "-- 1 needs deploy, 1 unreachable: 1 of 2 host(s) need a look (exit status 1)" in result.stderr


def test_validate_never_asks_without_y_and_without_a_terminal(tmp_path):
    result = validate(tmp_path, str(inventory(tmp_path, DOWN["refused"])), "validate.py")
    assert result.returncode == 1, result.stderr
    assert "Press enter" not in result.stderr and "continue?" not in result.stderr
    assert "EOFError" not in result.stderr and "Traceback" not in result.stderr
    assert "-- the run stopped early" not in result.stderr
    assert "down-01: unreachable: Could not connect" in result.stderr


def test_a_blocked_host_alone_under_json_without_y(tmp_path):
    """Every host refused: pyinfra has no host left and prints no JSON of its own."""
    result = validate(tmp_path, "--json", "@local", "validate.py")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert [op for op in document["plan"] if op["hosts_with_change"]] == []  # a refusal is no change
    assert "-- 1 blocked: 1 of 1 host(s) need a look (exit status 1)" in result.stderr


def test_a_ready_host_under_json_without_y_is_not_a_stopped_run(tmp_path):
    result = validate(tmp_path, "--json", "@local", "--data", "target_sms=12.0", "validate.py")
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)
    assert "no host is blocked, failed or unreachable (exit status 0)" in result.stderr
    assert "the run stopped early" not in result.stderr


def test_pyinfra_debug_log_is_ignored_and_not_committed():
    tracked = subprocess.run(["git", "ls-files", "pyinfra-debug.log"], cwd=ROOT, capture_output=True, text=True)
    assert tracked.stdout == ""
    ignored = subprocess.run(["git", "check-ignore", "-q", "pyinfra-debug.log"], cwd=ROOT)
    assert ignored.returncode == 0


def test_a_host_without_a_report_this_run_keeps_no_old_one(tmp_path):
    """The summary's hint (python -m bringup.report reports/<host>.json) showed a host
    that was unreachable, or whose settings were refused, as its previous run had it:
    READY TO DEPLOY and exit status 0 while this run's verdict was unreachable or failed."""
    path = inventory(tmp_path, DOWN["refused"])
    first = validate(tmp_path, str(path), "validate.py", "--limit", "@local")
    assert first.returncode == 0, first.stderr
    reports = tmp_path / "reports"
    shutil.copy(reports / "@local.json", reports / "down-01.json")  # down-01 was ready the day before
    shutil.copy(reports / "@local.json", reports / "other-01.json")  # a host this run does not target
    result = validate(tmp_path, str(path), "--data", "driver_reboot=always", "validate.py")
    assert result.returncode == 1, result.stderr
    assert "down-01: unreachable" in result.stderr and "setting driver_reboot='always' is invalid" in result.stderr
    assert not (reports / "down-01.json").exists() and not (reports / "@local.json").exists()
    assert (reports / "other-01.json").exists()
    shown = subprocess.run([sys.executable, "-m", "bringup.report", str(reports / "down-01.json")], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 2 and shown.stdout == "", shown
