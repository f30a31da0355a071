"""service_user never takes over an account (or a home) deploy did not create: the real
probe's account section run here (files/probe.d/, this machine's own accounts), the
planner's SERVICE_USER_FOREIGN through ``python -m bringup.plan``, and the deploy's own
check as it runs (tasks/operations/account.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.util import FakeHost, FakeState

from bringup.config import Config
from bringup.layout import SERVICE_ACCOUNT_MARK, NodeLayout, ProbeInputs
from bringup.plan import plan, service_account_problem
from facts.node import probe_command
from facts.probe_output import build_document
from tasks.operations.account import service_account_ours

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "tests" / "fixtures" / "facts" / "incident.json"

OURS = {"uid": 998, "gid": 998, "gecos": SERVICE_ACCOUNT_MARK, "home": "/var/lib/sglang",
        "shell": "/usr/sbin/nologin"}
OUR_HOME = {"path": "/var/lib/sglang", "user": "sglang", "mode": "755", "kind": "directory"}
SSHD = {"uid": 101, "gid": 65534, "gecos": "", "home": "/run/sshd", "shell": "/usr/sbin/nologin"}
OPS = {"uid": 1000, "gid": 1000, "gecos": "Ops", "home": "/home/ops", "shell": "/bin/bash"}


def probe_account(user, **env):
    """The probe's account section for ``user``, run here as the fact runs it on a node."""
    layout = NodeLayout.for_settings("/nonexistent/venv", "/nonexistent/env", "/nonexistent/cache", user)
    result = subprocess.run(["sh", "-c", probe_command(ProbeInputs(layout), ("account",))],
                            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **env}, capture_output=True, text=True,
                            timeout=60, check=True)
    return build_document(result.stdout.splitlines(), ["account"])["account"]


def test_the_probe_reports_an_existing_system_account():
    found = probe_account("daemon")
    assert found["user"] == "daemon"
    assert found["entry"] == {"uid": 1, "gid": 1, "gecos": "daemon", "home": "/usr/sbin", "shell": "/usr/sbin/nologin"}
    assert "gpu-bringup did not create (uid 1, shell /usr/sbin/nologin, home /usr/sbin, GECOS 'daemon')" in \
        service_account_problem(found, "daemon", "/var/lib/daemon")


def test_the_probe_reports_a_home_that_is_already_there():
    # No account "apt" (Debian's is _apt), but /var/lib/apt is apt's own state.
    found = probe_account("apt")
    assert found["entry"] is None
    assert found["home"] == {"path": "/var/lib/apt", "user": "root", "mode": found["home"]["mode"], "kind": "directory"}
    assert service_account_problem(found, "apt", "/var/lib/apt").startswith(
        "the service home /var/lib/apt is already there (directory, owner root")


def test_the_probe_names_the_ssh_user_behind_sudo():
    found = probe_account("ops-gpu-bringup-test", SUDO_USER="ops-gpu-bringup-test")
    assert found["entry"] is None and found["home"] is None
    assert found["login_user"] == "ops-gpu-bringup-test"
    assert "the account this deploy logs in as" in \
        service_account_problem(found, "ops-gpu-bringup-test", "/var/lib/ops-gpu-bringup-test")


def test_an_absent_account_plans_ok():
    found = probe_account("gpu-bringup-nobody-has-this")
    assert found["entry"] is None and found["home"] is None and found["login_user"] == os.popen("id -un").read().strip()
    assert service_account_problem(found, "gpu-bringup-nobody-has-this", "/var/lib/gpu-bringup-nobody-has-this") is None


@pytest.mark.parametrize("user,account,foreign", [
    ("sglang", None, False),                                                            # an older probe: nothing to say
    ("sglang", {"entry": None, "login_user": "root", "home": None}, False),             # created by deploy
    ("sglang", {"entry": OURS, "login_user": "root", "home": OUR_HOME}, False),         # ours, from an earlier deploy
    # unmarked, as an earlier release made it (default name, system uid, its home, nologin): marked by deploy
    ("sglang", {"entry": {**OURS, "gecos": ""}, "login_user": "root", "home": OUR_HOME}, False),
    ("sglang", {"entry": {**OURS, "gecos": "", "uid": 1001}, "login_user": "root", "home": OUR_HOME}, True),
    ("sglang", {"entry": {**OURS, "gecos": "", "shell": "/bin/bash"}, "login_user": "root", "home": OUR_HOME}, True),
    ("sglang", {"entry": {**OURS, "gecos": "Someone"}, "login_user": "root", "home": OUR_HOME}, True),
    ("redis", {"entry": {**OURS, "gecos": "", "home": "/var/lib/redis"}, "login_user": "root",
               "home": {**OUR_HOME, "path": "/var/lib/redis", "user": "redis"}}, True),  # another service's
    ("sshd", {"entry": SSHD, "login_user": "root", "home": None}, True),
    ("ops", {"entry": OPS, "login_user": "ops", "home": None}, True),                   # the SSH user
    ("ops", {"entry": None, "login_user": "ops", "home": None}, True),                  # the SSH user, sudo
    ("dpkg", {"entry": None, "login_user": "root",
              "home": {"path": "/var/lib/dpkg", "user": "root", "mode": "755", "kind": "directory"}}, True),
    ("sglang", {"entry": OURS, "login_user": "root", "home": {**OUR_HOME, "kind": "symbolic link"}}, True),
    ("sglang", {"entry": OURS, "login_user": "root", "home": {**OUR_HOME, "user": "root"}}, True),
])
def test_planner_scenarios(user, account, foreign):
    facts = json.loads(INCIDENT.read_text())
    if account is not None:
        facts["account"] = {"user": user, **account}
    node = plan(facts, Config(service_user=user))
    assert ("SERVICE_USER_FOREIGN" in node.codes("blocker")) == foreign


def test_the_plan_cli_refuses_an_existing_account(tmp_path):
    facts = json.loads(INCIDENT.read_text())
    facts["account"] = {"user": "sshd", "entry": SSHD, "login_user": "root", "home": None}
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    (tmp_path / "settings.yaml").write_text("service_user: sshd\n")
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(tmp_path / "facts.json"), "--config",
                             str(tmp_path / "settings.yaml"), "--host", "gpu-7"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    document = json.loads(result.stdout)
    [finding] = [f for f in document["findings"] if f["code"] == "SERVICE_USER_FOREIGN"]
    assert document["ok"] is False and finding["severity"] == "blocker"
    assert finding["message"] == ("service_user sshd is an existing account gpu-bringup did not create (uid 101, "
                                  "shell /usr/sbin/nologin, home /run/sshd, GECOS empty): deploy would change its "
                                  "shell and home")
    assert "set service_user to a name of its own" in finding["fix"] and "userdel sshd" in finding["fix"]


# -------------------------------------------------------------- at deploy time


class AnsweringHost(FakeHost):
    def __init__(self, state, answer):
        super().__init__(state, "gpu-node-01", facts={}, data={})
        self.answer, self.asked = answer, []

    def get_fact(self, fact_cls, *args, **kwargs):
        self.asked.append((fact_cls.__name__, kwargs))
        return self.answer


def account_layout(user):
    return NodeLayout.for_settings("/opt/sglang/venv", "/etc/sglang/sglang.env", "/var/cache/sglang", user)


def account_check(answer, user="sglang"):
    state = FakeState()
    host = AnsweringHost(state, answer)
    with ctx_state.use(state), ctx_host.use(host):
        commands = [str(command) for command in service_account_ours._inner(layout=account_layout(user))]
    return commands, host


def test_deploy_goes_on_with_its_own_account():
    commands, host = account_check({"user": "sglang", "entry": OURS, "login_user": "root", "home": OUR_HOME})
    assert commands == [] and host.asked == [("ServiceAccount", {"inputs": ProbeInputs(account_layout("sglang"))})]


def test_deploy_refuses_an_account_that_appeared_since_validate():
    [command], _ = account_check({"user": "sshd", "entry": SSHD, "login_user": "root", "home": None}, user="sshd")
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.startswith("gpu-node-01: service_user sshd is an existing account gpu-bringup did not create")
    assert "nothing of it was changed" in run.stderr and "SERVICE_USER_FOREIGN" in run.stderr
