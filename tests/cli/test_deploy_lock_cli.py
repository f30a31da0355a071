"""The deploy lock's operations through the real pyinfra CLI on @local: a deploy file
that takes the lock, checks it, does its work and lets go (as deploy.py does), run twice
at once. The second waits, then fails naming the first, or goes after it; a control
process killed mid-run lets go of the lock by itself; the lock's operations are no change."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from facts.deploy_lock import lock_command

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")

DEPLOY = """
import os

from pyinfra.operations import server

from control import run
from tasks.operations.lock import deploy_lock_held, deploy_lock_released, deploy_lock_taken

LOCK, OUT, TAG = os.environ["TEST_LOCK"], os.environ["TEST_OUT"], os.environ["TEST_TAG"]
deploy_lock_taken(name="Take the lock", lock=LOCK, run_id=run.run_id(), timeout=int(os.environ["TEST_TIMEOUT"]),
                  control="tester@cli")
deploy_lock_held(name="Lock still ours", lock=LOCK, run_id=run.run_id(), before="work")
server.shell(name="Work", commands=[f"echo start-{TAG} >> {OUT}; sleep {os.environ['TEST_SLEEP']}; echo end-{TAG} >> {OUT}"])
deploy_lock_released(name="Let go", lock=LOCK, run_id=run.run_id())
"""


@pytest.fixture
def lock(tmp_path):
    deploy_file = tmp_path / "lock_deploy.py"
    deploy_file.write_text(DEPLOY)
    processes = []

    def start(tag, timeout=60, sleep=0, json_output=False):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_LOCK": str(tmp_path / "run" / "deploy.lock"),
               "TEST_OUT": str(tmp_path / "out"), "TEST_TAG": tag, "TEST_TIMEOUT": str(timeout),
               "TEST_SLEEP": str(sleep), "GPU_BRINGUP_REPORTS": str(tmp_path / f"reports-{tag}")}
        process = subprocess.Popen([PYINFRA, "-y", *(["--json"] if json_output else []), "@local", str(deploy_file)],
                                   cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        processes.append(process)
        return process

    def record():
        path = tmp_path / "run" / "deploy.lock.json"
        return json.loads(path.read_text()) if path.exists() else None

    def wait_for_holder(seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if record() and (tmp_path / "out").exists():
                return record()
            time.sleep(0.1)
        raise AssertionError("the first run never took the lock")

    def state():
        command = lock_command("state", str(tmp_path / "run" / "deploy.lock"), "x")
        return json.loads(subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30).stdout)

    def out():
        return (tmp_path / "out").read_text().split() if (tmp_path / "out").exists() else []

    yield {"start": start, "record": record, "wait_for_holder": wait_for_holder, "state": state, "out": out}
    for process in processes:
        # Its whole group: a killed pyinfra leaves its @local commands (the sleep) behind.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.communicate()


def finish(process, timeout=120, stdout_only=False):
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout if stdout_only else stdout + stderr


def test_a_second_deploy_waits_then_fails_naming_the_holder(lock):
    first = lock["start"]("one", sleep=8)
    holder = lock["wait_for_holder"]()
    second = lock["start"]("two", timeout=2)
    rc, output = finish(second)
    assert rc != 0
    assert "another deploy holds this node's deploy lock " in output, output
    assert f"run {holder['run_id']} (pid {holder['pid']}, started {holder['started']}, from tester@cli" in output, output
    assert "waited 2 s (deploy_lock_timeout); nothing was changed on this host" in output
    assert finish(first)[0] == 0
    # The second run's work never started.
    assert lock["out"]() == ["start-one", "end-one"]
    assert lock["state"]()["locked"] is False


def test_two_deploys_at_once_run_one_after_the_other(lock):
    first = lock["start"]("one", sleep=3)
    lock["wait_for_holder"]()
    second = lock["start"]("two", sleep=0)
    assert finish(first)[0] == 0
    assert finish(second)[0] == 0
    assert lock["out"]() == ["start-one", "end-one", "start-two", "end-two"]


def test_the_lock_goes_with_a_killed_control_process(lock):
    first = lock["start"]("one", sleep=300)
    holder = lock["wait_for_holder"]()
    first.send_signal(signal.SIGKILL)
    first.communicate()
    deadline = time.monotonic() + 15
    while lock["state"]()["locked"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lock["state"]()["locked"] is False, "the lock outlived its control process"
    # The next run takes it at once.
    rc, output = finish(lock["start"]("two"))
    assert rc == 0, output
    assert holder["run_id"] not in (lock["record"]() or {}).get("run_id", "")


def test_the_lock_operations_are_no_change(lock):
    rc, output = finish(lock["start"]("one", json_output=True), stdout_only=True)
    assert rc == 0, output
    operations = json.loads(output)["results"]["operations"]
    changed = [op["name"] for op in operations if op["success"] or op["error"]]
    assert changed == ["Work"], changed
