"""The node-side helpers run here for real: files/session-bound (a command dies with its
session), the wait for apt's locks and the apt-get update check (the exact commands the
operations yield)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.util import FakeHost, FakeState

from tasks.operations.packages import apt_lists_refreshed, apt_unlocked

ROOT = Path(__file__).resolve().parents[2]
SESSION_BOUND = ROOT / "files" / "session-bound"


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state not in "ZX"


def wait_gone(pid, seconds=15):
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


# -------------------------------------------------------------- session-bound


def test_command_dies_when_its_session_goes(tmp_path):
    """The reading end of the output pipe closes (sshd gone): the whole group is stopped."""
    pid_file = tmp_path / "pid"
    wrapper = subprocess.Popen([sys.executable, str(SESSION_BOUND), "sh", "-c",
                                f"sleep 300 & echo $! > {pid_file}; echo started; wait"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert wrapper.stdout.readline() == b"started\n"
    grandchild = int(pid_file.read_text())
    wrapper.stdout.close()
    wrapper.stderr.close()
    assert wrapper.wait(timeout=20) == 129
    assert wait_gone(grandchild), "the command's background child outlived its session"


def test_status_passes_through_and_output_is_not_watched_when_it_is_a_file(tmp_path):
    out = tmp_path / "out"
    with open(out, "w") as handle:
        run = subprocess.run([sys.executable, str(SESSION_BOUND), "sh", "-c", "sleep 1.5; echo done; exit 3"],
                             stdout=handle, stderr=handle, timeout=30)
    assert run.returncode == 3 and out.read_text() == "done\n"


def test_a_signal_to_the_wrapper_stops_the_group(tmp_path):
    pid_file = tmp_path / "pid"
    wrapper = subprocess.Popen([sys.executable, str(SESSION_BOUND), "sh", "-c",
                                f"sleep 300 & echo $! > {pid_file}; wait"])
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    wrapper.send_signal(signal.SIGTERM)
    assert wrapper.wait(timeout=20) == 128 + signal.SIGTERM
    assert wait_gone(int(pid_file.read_text()))


def test_a_urls_user_and_password_never_leave_through_the_output(tmp_path):
    """Review (secrets in argv, reports, logs): the env file's HF_ENDPOINT may carry a
    password (docs/security.md sends it there), and huggingface_hub's CLI prints the URL
    whole when the hub fails ("Server error '500 ...' for url 'http://svc:PASSWORD@mirror/
    api/models/...'"): the fetch, the pre-warm and DeepGEMM print their output at default
    verbosity. What a bound command prints has every URL's userinfo replaced, in both
    streams, split across writes or not; progress lines and the status pass through."""
    script = ("printf 'Error: for url %s\\n' \"'http://svc:Pw9secret@127.0.0.1:1/api/models/x'\" >&2; "
              "printf 'progress 1\\rprogress 2\\r'; printf 'https://u:Pw9'; sleep 0.3; printf 'xy@mirror/ok\\n'; "
              "exit 7")
    run = subprocess.run([sys.executable, str(SESSION_BOUND), "sh", "-c", script], capture_output=True, timeout=30)
    assert run.returncode == 7
    assert b"Pw9" not in run.stdout + run.stderr, (run.stdout, run.stderr)
    assert run.stderr == b"Error: for url 'http://<redacted>@127.0.0.1:1/api/models/x'\n", run.stderr
    assert run.stdout == b"progress 1\rprogress 2\rhttps://<redacted>@mirror/ok\n", run.stdout


def test_a_command_that_closed_its_output_still_dies_with_its_session(tmp_path):
    pid_file = tmp_path / "pid"
    wrapper = subprocess.Popen([sys.executable, str(SESSION_BOUND), "sh", "-c",
                                f"echo $$ > {pid_file}; echo started; exec >&- 2>&-; sleep 300"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert wrapper.stdout.readline() == b"started\n"
    time.sleep(1.5)  # the command has closed its output, and the wrapper has seen it end
    wrapper.stdout.close()
    wrapper.stderr.close()
    assert wrapper.wait(timeout=20) == 129
    assert wait_gone(int(pid_file.read_text()))


# -------------------------------------------------------------- apt's locks


def commands(operation, **kwargs):
    state = FakeState()
    host = FakeHost(state, "gpu-node-01", facts={}, data={})
    with ctx_state.use(state), ctx_host.use(host):
        return [str(command) for command in operation._inner(**kwargs)]


@pytest.fixture
def lock_file(tmp_path):
    path = tmp_path / "lock-frontend"
    path.write_text("")
    return path


def hold(lock_file, kind="lockf"):
    """A process holding ``lock_file`` the way apt does (lockf: POSIX) or flock(1) does."""
    take = "fcntl.lockf(f, fcntl.LOCK_EX)" if kind == "lockf" else "fcntl.flock(f, fcntl.LOCK_EX)"
    holder = subprocess.Popen([sys.executable, "-c", f"import fcntl, sys, time; f = open({str(lock_file)!r}, 'w'); "
                               f"{take}; print('held', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
    assert holder.stdout.readline() == b"held\n"
    return holder


def wait_for_apt(lock_file, timeout):
    holders = [{"lock": str(lock_file), "pid": 1, "command": "seen at probe time"}]
    [command] = commands(apt_unlocked, holders=holders, timeout=timeout)
    return subprocess.run(["sh", "-c", command], env={**os.environ, "APT_LOCK_FILES": str(lock_file)},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("kind", ["lockf", "flock"])
def test_a_held_lock_is_waited_for_then_the_host_fails(lock_file, kind):
    holder = hold(lock_file, kind)
    try:
        started = time.monotonic()
        run = wait_for_apt(lock_file, timeout=2)
    finally:
        holder.kill()
        holder.wait()
    assert run.returncode == 1
    assert time.monotonic() - started >= 2
    assert f"held by pid {holder.pid}" in run.stdout and "deploy_apt_lock_timeout" in run.stdout
    assert run.stderr.startswith("gpu-node-01: apt is still locked after 2 s; nothing was changed on this host")
    assert f"pid {holder.pid} (" in run.stderr


def test_a_lock_released_while_waiting_lets_the_deploy_go_on(lock_file):
    holder = hold(lock_file)
    waiting = subprocess.Popen(["sh", "-c", commands(apt_unlocked, holders=[{"lock": "x", "pid": 1, "command": ""}],
                                                     timeout=30)[0]],
                               env={**os.environ, "APT_LOCK_FILES": str(lock_file)}, stdout=subprocess.PIPE,
                               text=True)
    time.sleep(2)
    holder.kill()
    holder.wait()
    out, _ = waiting.communicate(timeout=30)
    assert waiting.returncode == 0 and "apt-locks: free after" in out


FETCH_FAILED = ("Err:1 http://m.example/cuda/debian12/x86_64  InRelease\n  Could not connect to m.example:80\n"
                "W: Failed to fetch http://m.example/cuda/debian12/x86_64/InRelease  Could not connect to "
                "m.example:80 (10.0.0.9). - connect (111: Connection refused)\n"
                "W: Some index files failed to download. They have been ignored, or old ones used instead.\n")


@pytest.mark.parametrize("output,status,fails", [
    (FETCH_FAILED, 0, True),
    ("W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  timeout\n", 0, False),
    ("Hit:1 http://m.example/cuda/debian12/x86_64  InRelease\nReading package lists...\n", 0, False),
    ("E: Could not get lock /var/lib/apt/lists/lock\n", 100, True),
])
def test_apt_update_fails_the_host_when_the_cuda_repository_does_not_answer(tmp_path, output, status, fails):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "output").write_text(output)
    (bin_dir / "apt-get").write_text(f"#!/bin/sh\ncat {bin_dir / 'output'}\nexit {status}\n")
    (bin_dir / "apt-get").chmod(0o755)
    [command] = commands(apt_lists_refreshed, repo_url="http://m.example/cuda/debian12/x86_64/")
    run = subprocess.run(["sh", "-c", command], env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=30)
    assert (run.returncode != 0) == fails
    if fails and status == 0:
        assert run.stderr.startswith("gpu-node-01: the CUDA repository http://m.example/cuda/debian12/x86_64/ did "
                                     "not answer apt-get update: W: Failed to fetch")
        assert "Connection refused" in run.stderr and "run deploy again; nothing was installed" in run.stderr


# -------------------------------------------------------------- apt-cache: locked versions served


def test_apt_unserved_names_versions_apt_does_not_know():
    """The fact's command, run against this machine's apt (one apt-cache for every pin):
    apt-cache prints nothing for an unknown version of a known package, nor for an unknown
    package; both are named, a version dpkg or a list holds is not. A repository apt holds no
    lists of gives no answer."""
    from facts.dpkg import AptUnserved

    installed = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True,
                               check=True).stdout
    policy = subprocess.run(["apt-cache", "policy"], capture_output=True, text=True, check=True).stdout
    listed = next(word for line in policy.splitlines() for word in line.split() if word.startswith("http"))
    # A pin that reads as an option ("-o=1") is one unserved pin, not apt-cache's refusal of all.
    pins = ["-o=1", f"dpkg={installed}", "dpkg=0.0-0", "no-such-package-here=1.0-1"]
    fact = AptUnserved()

    def unserved(repo_url):
        run = subprocess.run(["sh", "-c", fact.command(pins, repo_url)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        return fact.process(run.stdout.splitlines())

    assert unserved(listed) == ["-o=1", "dpkg=0.0-0", "no-such-package-here=1.0-1"]
    assert unserved("http://repository.invalid/cuda/debian12/x86_64/") is None
