"""One deploy at a time on a node: the node-wide deploy lock, held for a whole run.

    /usr/bin/python3 -I deploy_lock.py acquire --lock PATH --run-id ID --timeout S [--control WHO]
                                               [--stage-mark MARK] [--stage-dir DIR...]
    /usr/bin/python3 -I deploy_lock.py state   --lock PATH --run-id ID
    /usr/bin/python3 -I deploy_lock.py release --lock PATH --run-id ID

Each prints one JSON line and exits 0 (the control side decides: tasks/operations/lock.py).
It travels inline with the command that runs it (like the probe): the lock is taken
before the deploy installs its helpers.

Why a process: pyinfra runs each operation as a command of its own over one SSH
connection, so no single command can hold a lock for the whole run. ``acquire`` takes
``flock`` on PATH and hands it to a holder process of its own (a child that leaves the
command's session and pipes, so the operation ends) which lives as long as the run's
connection: it watches the connection's sshd process (every command of the run is a
child of it; ``sshd-session`` on OpenSSH 9.8 and later), or, for a local run, the first
ancestor that is not a shell or sudo (pyinfra itself), and exits when that process is
gone. A control machine killed mid-deploy therefore releases the lock by itself; a
second deploy waits for it at most ``--timeout`` seconds. The holder's record
(PATH.json: run id, holder pid and the pid's start time, control machine and user, the
node's SSH user) names it to a waiting deploy, and lets each later operation of the run
check the lock is still its own (``state``). ``release`` ends the holder of the given run
only, and signals its pid only while that pid is still the holder (the same pid started
at the recorded time, /proc/<pid>/stat field 22): a holder killed with SIGKILL leaves its
record, and its pid may since name another process; such a stale record is cleared
without a signal.

While it holds the lock, ``acquire`` removes the stage files (``.<name>.<MARK>-<run
id>``) that killed runs left in the given directories: no other deploy is live then,
and its own run's are kept.
"""

import argparse
import datetime
import fcntl
import json
import os
import signal
import sys
import time

# The per-connection sshd process; every other name passes on to its parent.
SESSION_ANCHORS = ("sshd", "sshd-session")
PASS_THROUGH = ("sh", "dash", "bash", "sudo", "su", "doas", "runuser", "env", "timeout")
POLL = 0.5


def stat_fields(pid):
    """/proc/<pid>/stat's fields after the command name: [state, ppid, ...]."""
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()


def start_time(pid):
    """The process's start (clock ticks since boot): with its pid, names one process."""
    try:
        return int(stat_fields(pid)[19])
    except (OSError, IndexError, ValueError):
        return None


def is_holder(record):
    """Whether the record's process is still the one that wrote it: the same pid, started
    at the recorded time (a record without the start time names no one for sure).

    >>> is_holder({"pid": os.getpid(), "pid_start": start_time(os.getpid())})
    True
    >>> is_holder({"pid": os.getpid(), "pid_start": start_time(os.getpid()) + 1}), is_holder({"pid": os.getpid()})
    (False, False)
    """
    try:
        pid, started = int(record.get("pid") or 0), record.get("pid_start")
    except (TypeError, ValueError):
        return False
    return pid > 1 and isinstance(started, int) and start_time(pid) == started


def command_name(pid):
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def ancestors(pid):
    """pid's parent, its parent, ... up to (not including) init."""
    chain = []
    while True:
        try:
            pid = int(stat_fields(pid)[1])
        except (OSError, IndexError, ValueError):
            return chain
        if pid <= 1:
            return chain
        chain.append(pid)


def anchor(pid):
    """The process the run's lock lives as long as (module docstring)."""
    chain = ancestors(pid)
    for ancestor in chain:
        if command_name(ancestor) in SESSION_ANCHORS:
            return ancestor
    for ancestor in chain:
        if command_name(ancestor) not in PASS_THROUGH:
            return ancestor
    return chain[-1] if chain else os.getppid()


def read_record(lock):
    try:
        with open(f"{lock}.json") as handle:
            record = json.load(handle)
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def write_record(lock, record):
    """The record, written whole (write, then rename), readable by all (it holds no secret)."""
    stage = f"{lock}.json.new-{record['run_id']}"
    fd = os.open(stage, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle)
    os.replace(stage, f"{lock}.json")


def open_lock(lock):
    os.makedirs(os.path.dirname(lock), mode=0o755, exist_ok=True)
    return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def try_lock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def is_locked(lock):
    """Whether some process holds the lock now (taken and let go at once when not)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if try_lock(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        return True
    finally:
        os.close(fd)


def hold(fd, lock, run_id, watched, watched_start):
    """The holder (a forked child): out of the command's session and pipes, it keeps the
    lock's descriptor open until the watched process is gone or it is told to stop."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(devnull, target)
    os.closerange(3, fd)
    os.closerange(fd + 1, 65536)

    def leave(*_):
        record = read_record(lock)
        if record and record.get("run_id") == run_id:
            try:
                os.unlink(f"{lock}.json")
            except OSError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while watched_start is not None and start_time(watched) == watched_start:
        time.sleep(1)
    leave()


def remove_stale_stages(directories, mark, run_id):
    """Stage files of other runs (files or links, never directories) in ``directories``."""
    removed = []
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if not (name.startswith(".") and f".{mark}" in name) or name.endswith(f"-{run_id}"):
                continue
            path = os.path.join(directory, name)
            try:
                if not os.path.isdir(path) or os.path.islink(path):
                    os.unlink(path)
                    removed.append(path)
            except OSError:
                pass
    return removed


def acquire(args):
    fd = open_lock(args.lock)
    started = time.monotonic()
    while not try_lock(fd):
        record = read_record(args.lock)
        if record and record.get("run_id") == args.run_id:
            return {"held": True, "again": True, "record": record}
        if time.monotonic() - started >= args.timeout:
            return {"held": False, "holder": record, "waited": int(time.monotonic() - started)}
        time.sleep(POLL)
    watched = anchor(os.getpid())
    watched_start = start_time(watched)
    sys.stdout.flush()
    child = os.fork()
    if child == 0:
        hold(fd, args.lock, args.run_id, watched, watched_start)
    os.close(fd)
    record = {"run_id": args.run_id, "pid": child, "pid_start": start_time(child), "watches": watched,
              "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "control": args.control, "node_user": os.environ.get("SUDO_USER") or os.environ.get("USER") or ""}
    write_record(args.lock, record)
    removed = remove_stale_stages(args.stage_dir, args.stage_mark, args.run_id) if args.stage_mark else []
    return {"held": True, "again": False, "record": record, "waited": int(time.monotonic() - started),
            "removed_stages": removed}


def state(args):
    record = read_record(args.lock)
    locked = is_locked(args.lock)
    alive = bool(record) and is_holder(record)
    own = bool(record) and record.get("run_id") == args.run_id
    return {"held": locked and alive and own, "locked": locked, "record": record}


def clear_stale_record(lock, run_id):
    """Remove run ``run_id``'s record while holding the lock itself (a moment): a run that
    takes the lock writes its record only once it holds it, so it never loses its own.
    False, the record kept, when some process holds the lock."""
    fd = open_lock(lock)
    try:
        if not try_lock(fd):
            return False
        if (read_record(lock) or {}).get("run_id") == run_id:
            try:
                os.unlink(f"{lock}.json")
            except OSError:
                pass
        return True
    finally:
        os.close(fd)  # lets go of the lock


def release(args):
    record = read_record(args.lock)
    if not record or record.get("run_id") != args.run_id:
        return {"released": False, "record": record}
    if not is_holder(record):
        # The holder is gone (its pid free or another process's now): no signal.
        return {"released": clear_stale_record(args.lock, args.run_id), "stale": True, "record": record}
    try:
        os.kill(int(record["pid"]), signal.SIGTERM)
    except (OSError, ValueError, KeyError):
        pass
    deadline = time.monotonic() + 10
    while is_locked(args.lock) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {"released": not is_locked(args.lock), "stale": False, "record": record}


def main(argv):
    parser = argparse.ArgumentParser(prog="deploy_lock.py")
    parser.add_argument("action", choices=("acquire", "state", "release"))
    parser.add_argument("--lock", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--timeout", type=int, default=0)
    parser.add_argument("--control", default="")
    parser.add_argument("--stage-mark", default="")
    parser.add_argument("--stage-dir", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        result = {"acquire": acquire, "state": state, "release": release}[args.action](args)
    except OSError as error:
        # A lock that cannot be opened (no root, a read-only /run): one line, the host fails.
        result = {"held": False, "error": f"{error.strerror}: {error.filename or args.lock}"}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
