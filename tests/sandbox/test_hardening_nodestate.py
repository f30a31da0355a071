"""Node state under two deploys and foreign accounts, end to end on one light node:
two deploys at once are serialised by the node's deploy lock (both succeed, the env file
whole, no stage file left); a deploy that finds the lock held waits deploy_lock_timeout,
then fails naming the holder with nothing changed, and goes through once the holder's
SSH connection is gone; service_user naming an account deploy did not create (or a home
already there) is refused with the account and its home unchanged."""

import json
import os
import subprocess

import pytest

from facts.deploy_lock import lock_command
from sandbox import aptrepo
from tests.sandbox_fixtures import PYINFRA, REPO_ROOT, pyinfra_cli, run_ssh, ssh_command

pytestmark = pytest.mark.sandbox

NAME = "hard-nodestate"
LOCK = "/run/gpu-bringup/deploy.lock"
ENV_STEP = ("deploy_steps=env", "cuda_manage_alternative=false")
# What the env step writes (and nothing else may change when a deploy is refused).
WRITTEN = "/etc/sglang/sglang.env /etc/profile.d/zz-cuda-home.sh /etc/environment"


@pytest.fixture(scope="module")
def node(sandbox_node):
    aptrepo.ensure_served()
    return dict(sandbox_node(NAME, "127.0.0.121", gpu="rtx-pro-6000-x8", toolkit="none"), name=NAME)


def deploy(*data):
    return pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=data)


def start_deploy(tmp_path, tag, *data):
    """A deploy in the background, with reports of its own (two runs side by side)."""
    settings = [arg for item in data for arg in ("--data", item)]
    log = open(tmp_path / f"{tag}.log", "w")
    process = subprocess.Popen([PYINFRA, "-y", *settings, "inventory/gpu.py", "--limit", NAME, "deploy.py"],
                               cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env={**os.environ, "GPU_BRINGUP_REPORTS": str(tmp_path / f"reports-{tag}")})
    return process, tmp_path / f"{tag}.log"


def digests(node):
    return run_ssh(node, f"for f in {WRITTEN}; do sha256sum $f 2>/dev/null || echo absent $f; done").stdout


def stage_files(node):
    return run_ssh(node, "ls -a /etc /etc/sglang /etc/profile.d 2>/dev/null | grep -c gpu-bringup-new; true").stdout.strip()


def lock_state(node):
    return json.loads(run_ssh(node, lock_command("state", LOCK, "sandbox-test")).stdout.strip().splitlines()[-1])


def test_two_deploys_at_once_both_succeed_one_after_the_other(node, tmp_path):
    first, first_log = start_deploy(tmp_path, "one", *ENV_STEP, "service_env=RUN_MARK=one")
    second, second_log = start_deploy(tmp_path, "two", *ENV_STEP, "service_env=RUN_MARK=two")
    assert first.wait(timeout=900) == 0, first_log.read_text()[-4000:]
    assert second.wait(timeout=900) == 0, second_log.read_text()[-4000:]
    marks = run_ssh(node, "grep '^RUN_MARK=' /etc/sglang/sglang.env").stdout.split()
    assert marks in (["RUN_MARK=one"], ["RUN_MARK=two"]), marks
    assert stage_files(node) == "0", "a stage file was left behind"
    assert lock_state(node)["locked"] is False, "the lock outlived both runs"


def test_a_held_lock_is_waited_for_then_the_host_fails_naming_the_holder(node):
    before = digests(node)
    # Another deploy in progress: the lock taken over an SSH connection of its own, kept open.
    holder = subprocess.Popen(ssh_command(node, lock_command("acquire", LOCK, "sandbox-holder", timeout=0,
                                                             control="tester@ci") + "; sleep 600"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        taken = json.loads(holder.stdout.readline())
        assert taken["held"] is True, taken
        refused = deploy(*ENV_STEP, "service_env=RUN_MARK=refused", "deploy_lock_timeout=5")
        assert refused.returncode != 0
        assert (f"another deploy holds this node's deploy lock {LOCK}: run sandbox-holder "
                f"(pid {taken['record']['pid']}, started {taken['record']['started']}, from tester@ci as root); "
                "waited 5 s (deploy_lock_timeout); nothing was changed on this host") in refused.output, \
            refused.output[-3000:]
        assert digests(node) == before, "a refused deploy changed a file"
    finally:
        # The holder's control machine goes away: its lock goes with the connection.
        holder.kill()
        holder.wait()
    released = deploy(*ENV_STEP, "service_env=RUN_MARK=after", "deploy_lock_timeout=60")
    assert released.returncode == 0, released.output[-3000:]
    assert run_ssh(node, "grep -c '^RUN_MARK=after$' /etc/sglang/sglang.env").stdout.strip() == "1"


@pytest.mark.parametrize("user", ["nobody", "hardening-op", "dpkg"])
def test_service_user_never_takes_over_an_account_or_a_home_deploy_did_not_create(node, user):
    if user == "hardening-op":
        run_ssh(node, "id hardening-op >/dev/null 2>&1 || useradd -m -s /bin/bash hardening-op")
    look = (f"getent passwd {user}; for d in /var/lib/{user} /home/{user}; do stat -c '%n %U %a %F' $d 2>/dev/null; "
            "done; test -e /usr/local/libexec/gpu-bringup && echo helpers; true")
    before = run_ssh(node, look).stdout
    result = deploy("deploy_steps=account", f"service_user={user}")
    assert result.returncode != 0
    assert "SERVICE_USER_FOREIGN" in result.output and "deploy refused, nothing changed" in result.output, \
        result.output[-3000:]
    assert run_ssh(node, look).stdout == before
    if user == "hardening-op":
        assert ":/home/hardening-op:/bin/bash" in before, before
