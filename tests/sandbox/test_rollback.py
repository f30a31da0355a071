"""The rollback (rollback.py, ``service_rollback: on-failure``) over real SSH to one
light sandbox node with real systemd, through the real CLI: the previous release (the
venv link's target, the unit and the env file that went with it, files/release.sh) is
put back, restarted and waited for with deploy's readiness gate.

Light: no toolkit (``deploy_steps=env,account,venv,service``, no CUDA alternative),
two small real venvs from one tiny lock (the operator's, and the same with one more
comment line: another digest, the same single wheel from the sandbox's PyPI mirror).
The test double of SGLang's HTTP server (tests/fixtures/serving/fake_sglang.py) runs in
place of the unit's ExecStart through an operator's drop-in, as in test_serving_gate.py;
its knob comes from the env file (``service_env``: EnvironmentFile= overrides the
drop-in's Environment=), so the change that fails the gate is one the rollback reverts:
the double exits at start with SGLang's no-GPU line (CUDA_UNAVAILABLE).
"""

import shlex

import pytest

from tests.sandbox_fixtures import (
    OPERATOR_LOCK,
    REPO_ROOT,
    pyinfra_cli,
    registered_serving_node,
    reports_dir,
    run_ssh,
    summary_rows,
)

pytestmark = pytest.mark.sandbox

NAME = "rb-rollback"
NO_GPU = "RuntimeError: No accelerator (CUDA, XPU, HPU) or platform plugin is available"
# A secret in the env file: never printed, never in a report.
SECRET = "hf_rollbacksecret0123456789"
DATA = ("deploy_steps=env,account,venv,service", "cuda_manage_alternative=false", "service_model=fake/model",
        "service_ready_timeout=30", "venv_installer=pip")
SERVES = f"service_env=HF_TOKEN={SECRET} FAKE_SGLANG_READY_AFTER=2"
FAILS = f"service_env=HF_TOKEN={SECRET} FAKE_SGLANG_EXIT_AT_START={shlex.quote(NO_GPU)}"
# What a rollback must put back, and nothing else: the link's target and the files' digests.
LIVE = ("readlink /opt/sglang/venv; sha256sum /etc/systemd/system/sglang.service /etc/sglang/sglang.env | "
        "cut -d' ' -f1; systemctl is-active sglang.service || true")


@pytest.fixture(scope="module")
def node(sandbox_node, tmp_path_factory):
    with registered_serving_node(sandbox_node, NAME, "127.0.0.96") as (entry, _):
        second = tmp_path_factory.mktemp("locks") / "second-cp311-x86_64.txt"
        second.write_text("# the second venv of the rollback suite\n" + (REPO_ROOT / OPERATOR_LOCK).read_text())
        yield dict(entry, second_lock=str(second))


def run(script, *data):
    result = pyinfra_cli("inventory/gpu.py", script, data=(*DATA, *data), timeout=300)
    [result.row] = summary_rows().values()
    assert SECRET not in result.output, "the env file's secret was printed"
    assert not [path for path in reports_dir().rglob("*.json") if SECRET in path.read_text()], "a report holds the secret"
    return result


def live(node):
    """(venv link target, unit sha256, env file sha256, systemd's state)."""
    return tuple(run_ssh(node, LIVE).stdout.split())


def test_a_change_that_fails_the_gate_is_rolled_back_by_deploy(node):
    first = run("deploy.py", f"venv_lock={OPERATOR_LOCK}", SERVES)
    assert first.returncode == 0 and first.row["verdict"] == "serving", first.output[-4000:]
    serving = live(node)
    assert serving[-1] == "active", serving

    failed = run("deploy.py", f"venv_lock={node['second_lock']}", FAILS, "service_rollback=on-failure")
    # The change failed: the host fails (exit status 1), back on the release before it.
    assert failed.returncode == 1, failed.output[-4000:]
    assert failed.row["verdict"] == "rolled back", failed.row
    assert "cause: CUDA_UNAVAILABLE" in failed.row["reason"], failed.row
    assert "back on the previous release, serving" in failed.row["reason"], failed.row
    assert f"{NAME}: rolled back: the change did not serve (" in failed.output, failed.output[-4000:]
    assert live(node) == serving
    # The failed venv stays for inspection until the next change.
    venvs = run_ssh(node, "find /opt/sglang/venvs -mindepth 1 -maxdepth 1 -type d").stdout.split()
    assert len(venvs) == 2, venvs
    # The records: root's only.
    modes = run_ssh(node, "stat -c '%a %U' /opt/sglang/releases /opt/sglang/releases/*/* | sort -u").stdout
    assert set(modes.split("\n")[:-1]) <= {"700 root", "600 root"}, modes


def test_rollback_on_demand_then_a_second_is_refused(node):
    before = live(node)
    changed = run("deploy.py", f"venv_lock={node['second_lock']}", SERVES.replace("=2", "=3"))
    assert changed.returncode == 0 and changed.row["verdict"] == "serving", changed.output[-4000:]
    assert live(node) != before

    # rollback.py with the inventory's settings as they are (the last deploy's).
    back = run("rollback.py", f"venv_lock={node['second_lock']}", SERVES)
    assert back.returncode == 0, back.output[-4000:]
    assert back.row["verdict"] == "rolled back", back.row
    assert live(node) == before and before[-1] == "active"
    assert "sglang.service serves: /health answered 200" in back.output, back.output[-4000:]

    again = run("rollback.py", f"venv_lock={node['second_lock']}", SERVES)
    assert again.returncode == 1, again.output[-4000:]
    assert f"{NAME}: rollback refused, nothing changed: no previous release recorded; fix: " in again.output, \
        again.output[-4000:]
    assert again.row["verdict"] == "failed" and "rollback refused" in again.row["reason"], again.row
    assert live(node) == before


def test_the_blockers_of_the_change_do_not_refuse_the_rollback(node):
    """Issue 33, finding 6: the change's settings name a model the node cannot have
    (MODEL_UNAVAILABLE: not in the cache, the hub does not answer); rollback.py still puts
    the release that served back: it judges what it restores, not the settings that failed."""
    before = live(node)
    changed = run("deploy.py", f"venv_lock={node['second_lock']}", SERVES.replace("=2", "=4"))
    assert changed.returncode == 0 and changed.row["verdict"] == "serving", changed.output[-4000:]
    assert live(node) != before
    unavailable = ("service_model=nobody/no-such-model",
                   f"service_env=HF_TOKEN={SECRET} FAKE_SGLANG_READY_AFTER=4 HF_ENDPOINT=http://127.0.0.1:9")
    blocked = run("validate.py", f"venv_lock={node['second_lock']}", *unavailable)
    assert blocked.returncode == 1 and "MODEL_UNAVAILABLE" in blocked.row["reason"], blocked.row
    back = run("rollback.py", f"venv_lock={node['second_lock']}", *unavailable)
    assert back.returncode == 0, back.output[-4000:]
    assert back.row["verdict"] == "rolled back", back.row
    assert "blocker(s)" not in back.output
    assert live(node) == before and before[-1] == "active"
