"""The node's deploy lock: files/deploy_lock.py run here for real (the exact command the
operations run, facts/deploy_lock.py) in scratch directories, from a stand-in for the
run's SSH connection (a process the commands are children of), and the operations'
decisions on its answers (tasks/operations/lock.py)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.util import FakeHost, FakeState

from facts.deploy_lock import lock_command
from tasks.operations.lock import deploy_lock_held, deploy_lock_released, deploy_lock_taken

CONNECTION = """
import subprocess, sys, time
for command in sys.argv[1:]:
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
    print(run.stdout.strip() or run.stderr.strip() or "{}", flush=True)
time.sleep(600)
"""


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] not in "ZX"


def wait_until(predicate, seconds=15):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


class Connection:
    """A stand-in for one run's SSH connection: runs each command in turn as its child,
    answers with their JSON lines, then stays until it is closed."""

    def __init__(self, *commands):
        self.process = subprocess.Popen([sys.executable, "-c", CONNECTION, *commands], stdout=subprocess.PIPE,
                                        text=True)
        self.answers = [json.loads(self.process.stdout.readline()) for _ in commands]

    def close(self):
        self.process.kill()
        self.process.wait()


@pytest.fixture
def lock(tmp_path):
    connections = []

    def connect(*commands):
        connection = Connection(*commands)
        connections.append(connection)
        return connection

    yield {"path": str(tmp_path / "run" / "deploy.lock"), "connect": connect, "dir": tmp_path}
    for connection in connections:
        connection.close()


def acquire(lock, run_id, timeout=0, **kwargs):
    return lock_command("acquire", lock["path"], run_id, timeout=timeout, control="ops@laptop", **kwargs)


def state(lock, run_id):
    return lock_command("state", lock["path"], run_id)


def test_a_run_takes_the_lock_and_its_holder_lives_as_long_as_its_connection(lock):
    started = time.monotonic()
    first = lock["connect"](acquire(lock, "run-one"), state(lock, "run-one"), state(lock, "run-two"))
    # The acquire returned at once: its holder left the command's pipes.
    assert time.monotonic() - started < 10
    taken, own, other = first.answers
    assert taken["held"] is True and taken["record"]["run_id"] == "run-one"
    assert taken["record"]["control"] == "ops@laptop"
    holder = taken["record"]["pid"]
    assert alive(holder)
    assert own["held"] is True
    assert other["held"] is False and other["locked"] is True
    # Killed control machine: the connection goes, the holder with it, the lock is free.
    first.close()
    assert wait_until(lambda: not alive(holder)), "the holder outlived its connection"
    after = subprocess.run(["sh", "-c", state(lock, "run-one")], capture_output=True, text=True, timeout=30)
    assert json.loads(after.stdout) == {"held": False, "locked": False, "record": None}


def test_a_second_run_waits_then_is_told_who_holds_the_lock(lock):
    first = lock["connect"](acquire(lock, "run-one"))
    holder = first.answers[0]["record"]
    started = time.monotonic()
    [refused] = lock["connect"](acquire(lock, "run-two", timeout=2)).answers
    assert time.monotonic() - started >= 2
    assert refused["held"] is False and refused["waited"] >= 2
    assert refused["holder"]["run_id"] == "run-one" and refused["holder"]["pid"] == holder["pid"]


def test_a_waiting_run_gets_the_lock_when_the_first_connection_ends(lock):
    first = lock["connect"](acquire(lock, "run-one"))
    waiting = subprocess.Popen(["sh", "-c", acquire(lock, "run-two", timeout=60)], stdout=subprocess.PIPE, text=True)
    time.sleep(1.5)
    assert waiting.poll() is None, "the second run did not wait"
    first.close()
    out, _ = waiting.communicate(timeout=60)
    answer = json.loads(out)
    assert answer["held"] is True and answer["record"]["run_id"] == "run-two"
    os.kill(answer["record"]["pid"], 15)


def test_the_same_run_asking_again_is_recognised_and_release_lets_go(lock):
    first = lock["connect"](acquire(lock, "run-one"), acquire(lock, "run-one"),
                            lock_command("release", lock["path"], "run-two"),
                            lock_command("release", lock["path"], "run-one"), state(lock, "run-one"))
    taken, again, not_mine, released, after = first.answers
    assert again["held"] is True and again["again"] is True and again["record"] == taken["record"]
    assert not_mine["released"] is False
    assert released["released"] is True and after["locked"] is False
    assert wait_until(lambda: not alive(taken["record"]["pid"]))


def test_stale_stage_files_of_killed_runs_are_removed_under_the_lock_and_the_runs_own_kept(lock):
    etc = lock["dir"] / "etc"
    etc.mkdir()
    stale = [etc / ".sglang.env.gpu-bringup-new-deadbeef", etc / ".sglang.env.gpu-bringup-new"]
    kept = [etc / ".sglang.env.gpu-bringup-new-run-one", etc / "sglang.env", etc / ".other"]
    for path in stale + kept:
        path.write_text("x")
    (etc / ".dir.gpu-bringup-new-x").mkdir()
    [taken] = lock["connect"](acquire(lock, "run-one", stage_mark="gpu-bringup-new", stage_dirs=[str(etc)])).answers
    assert sorted(taken["removed_stages"]) == sorted(str(path) for path in stale)
    assert all(path.exists() for path in kept) and (etc / ".dir.gpu-bringup-new-x").is_dir()


def test_a_lock_that_cannot_be_opened_is_one_answer(lock):
    (lock["dir"] / "run").write_text("not a directory")
    run = subprocess.run(["sh", "-c", acquire(lock, "run-one")], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and run.stderr == ""
    answer = json.loads(run.stdout)
    assert answer == {"held": False, "error": f"File exists: {lock['dir'] / 'run'}"}


# -------------------------------------------------------------- the operations' decisions


class AnsweringHost(FakeHost):
    """A fake host whose DeployLock fact answers with ``answer`` (and records the ask)."""

    def __init__(self, state, answer):
        super().__init__(state, "gpu-node-01", facts={}, data={})
        self.answer, self.asked = answer, []

    def get_fact(self, fact_cls, *args, **kwargs):
        self.asked.append(kwargs)
        return self.answer


def run_operation(operation, answer, executing=False, **kwargs):
    state = FakeState()
    state.is_executing = executing
    host = AnsweringHost(state, answer)
    with ctx_state.use(state), ctx_host.use(host):
        commands = [str(command) for command in operation._inner(**kwargs)]
    return commands, host


HOLDER = {"run_id": "run-one", "pid": 812, "started": "2026-12-01T19:00:00Z", "control": "ops@laptop",
          "node_user": "root"}


def test_a_taken_lock_is_no_change():
    commands, host = run_operation(deploy_lock_taken, {"held": True, "record": {**HOLDER, "run_id": "mine-1"}},
                                   lock="/run/gpu-bringup/deploy.lock", run_id="mine-1", timeout=600)
    assert commands == [] and "held by this run (mine-1, holder pid 812)" in host.noop_description
    assert host.asked[0]["action"] == "acquire" and host.asked[0]["timeout"] == 600


def test_a_lock_held_by_another_deploy_fails_the_host_naming_the_holder_and_is_not_waited_twice():
    answer = {"held": False, "holder": HOLDER, "waited": 600}
    kwargs = {"lock": "/run/gpu-bringup/deploy.lock", "run_id": "mine-2", "timeout": 600}
    [command], _ = run_operation(deploy_lock_taken, answer, **kwargs)
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.startswith("gpu-node-01: another deploy holds this node's deploy lock "
                                 "/run/gpu-bringup/deploy.lock: run run-one (pid 812, started 2026-12-01T19:00:00Z, "
                                 "from ops@laptop as root); waited 600 s (deploy_lock_timeout); nothing was changed")
    # pyinfra's second pass (the run itself, after the change listing): no second wait.
    [again], host = run_operation(deploy_lock_taken, answer, executing=True, **kwargs)
    assert again == command and host.asked == []


def test_each_step_goes_on_only_while_the_lock_is_this_runs():
    kwargs = {"lock": "/run/gpu-bringup/deploy.lock", "run_id": "mine-3", "before": "env"}
    commands, host = run_operation(deploy_lock_held, {"held": True, "locked": True, "record": HOLDER}, **kwargs)
    assert commands == [] and host.asked[0]["action"] == "state"
    [command], _ = run_operation(deploy_lock_held, {"held": False, "locked": True, "record": HOLDER}, **kwargs)
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert run.returncode == 1 and "no longer holds the node's deploy lock" in run.stderr
    assert "run run-one (pid 812" in run.stderr and "stopped before the env step" in run.stderr


def test_the_lock_is_released_only_when_the_run_runs():
    listing, host = run_operation(deploy_lock_released, {"released": True}, lock="/l", run_id="mine-4")
    assert listing == [] and host.asked == []
    running, host = run_operation(deploy_lock_released, {"released": True}, executing=True, lock="/l",
                                  run_id="mine-4")
    assert running == [] and host.asked[0]["action"] == "release"


def test_two_runs_never_share_a_stage_name():
    """Each control run (one process) names its uploads' stage files with an id of its own."""
    script = "from tasks.operations.files import _upload_stage; print(_upload_stage('/etc/sglang/sglang.env'))"
    names = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[2]).stdout.strip() for _ in range(2)}
    assert len(names) == 2, names
    assert all(name.startswith("/etc/sglang/.sglang.env.gpu-bringup-new-") for name in names)


def release_command(lock, run_id):
    return lock_command("release", lock["path"], run_id)


@pytest.mark.parametrize("started", ["another", "none"], ids=["pid reused", "record without a start time"])
def test_release_never_signals_a_pid_that_is_no_longer_the_holder(lock, started):
    """A holder killed with SIGKILL leaves its record; its pid, reused by an unrelated
    process, got release's SIGTERM. Now the record names pid and start time, both are
    checked before any signal, and a stale record is cleared without one."""
    os.makedirs(os.path.dirname(lock["path"]))
    Path(lock["path"]).write_text("")
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        record = {"run_id": "run-one", "pid": bystander.pid, "started": "2026-12-01T19:00:00Z", "control": "ops@laptop",
                  "node_user": "root"}
        if started == "another":
            with open(f"/proc/{bystander.pid}/stat") as handle:
                record["pid_start"] = int(handle.read().rsplit(")", 1)[1].split()[19]) + 1
        Path(f"{lock['path']}.json").write_text(json.dumps(record))
        run = subprocess.run(["sh", "-c", release_command(lock, "run-one")], capture_output=True, text=True,
                             timeout=30, check=False)
        answer = json.loads(run.stdout)
        time.sleep(0.3)
        assert bystander.poll() is None, "release signalled a process that was not the lock's holder"
        assert answer["released"] is True and answer["stale"] is True, answer
        assert not Path(f"{lock['path']}.json").exists(), "the stale record was left"
    finally:
        bystander.kill()
        bystander.wait()


def test_the_holders_record_names_its_start_time_and_release_ends_it(lock):
    first = lock["connect"](acquire(lock, "run-one"), release_command(lock, "run-one"))
    taken, released = first.answers
    holder = taken["record"]["pid"]
    assert isinstance(taken["record"]["pid_start"], int)
    assert released["released"] is True and released.get("stale") is False, released
    assert wait_until(lambda: not alive(holder))


def deploy_lock_script():
    """files/deploy_lock.py loaded as a module (files/ is no package), to call its functions."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "files" / "deploy_lock.py"
    spec = importlib.util.spec_from_file_location("deploy_lock_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_stale_record_is_cleared_only_while_release_holds_the_lock(tmp_path, monkeypatch):
    """release cleared a stale record after it saw the lock free, without taking it: a run
    that took the lock in between (it writes its record once it holds the lock) lost its
    record, and its next step failed as if another deploy held the node. Now the record is
    removed only while release holds the lock itself; a lock someone holds keeps it."""
    from types import SimpleNamespace

    script = deploy_lock_script()
    lock = tmp_path / "run" / "deploy.lock"
    lock.parent.mkdir()
    lock.write_text("")
    record = Path(f"{lock}.json")
    record.write_text(json.dumps({"run_id": "run-one", "pid": 4_194_305, "pid_start": 1}))  # no such pid
    removed, real_unlink = [], os.unlink

    def unlink(path, *args, **kwargs):
        removed.append((str(path), script.is_locked(str(lock))))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    answer = script.release(SimpleNamespace(lock=str(lock), run_id="run-one"))
    assert answer["released"] is True and answer["stale"] is True, answer
    assert removed == [(str(record), True)], "the record was removed without holding the lock"
    assert not script.is_locked(str(lock)), "release kept the lock"
    # Some process holds the lock (a run that took it and is writing its record): kept.
    record.write_text(json.dumps({"run_id": "run-one", "pid": 4_194_305, "pid_start": 1}))
    code = (f"import fcntl, os, time\nfd = os.open({str(lock)!r}, os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\ntime.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        answer = script.release(SimpleNamespace(lock=str(lock), run_id="run-one"))
        assert answer["released"] is False and record.exists(), answer
    finally:
        holder.kill()
        holder.wait()
