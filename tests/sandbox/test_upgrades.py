"""An upgrade and its way back (docs/upgrades.md) over real SSH to one light sandbox node
with real systemd, through the real CLI and the page's commands: validate, the canary
deploy (``--limit`` the host, ``service_rollback=on-failure``), a batch (``--limit`` a
pattern), then the same path back to the first release.

Light, as tests/sandbox/test_rollback.py: no toolkit (``deploy_steps=env,account,venv,
service``), the test double of SGLang's HTTP server run by an operator's drop-in, two
small real venvs from two small locks standing for the releases ``make lock`` writes (the
operator's tiny lock, and the same with one more comment line: another digest, the same
single wheel from the sandbox's PyPI mirror; ``make lock`` itself needs PyPI and is
proved by tests/network/test_lock_resolution.py). ``venv_lock`` names them, as
``stack_sglang`` names the locks of ``files/locks/``.

Not run in the session that wrote it (the lead runs the sandbox suites).
"""

import pytest

from tests.sandbox_fixtures import OPERATOR_LOCK, REPO_ROOT, pyinfra_cli, registered_serving_node, run_ssh, summary_rows

pytestmark = pytest.mark.sandbox

NAME = "up-upgrade"
DATA = ("deploy_steps=env,account,venv,service", "cuda_manage_alternative=false", "service_model=fake/model",
        "service_ready_timeout=60", "venv_installer=pip", "service_env=FAKE_SGLANG_READY_AFTER=2")
LIVE = ("readlink /opt/sglang/venv; readlink /opt/sglang/venvs/previous || echo none; "
        "systemctl is-active sglang.service || true")


@pytest.fixture(scope="module")
def node(sandbox_node, tmp_path_factory):
    with registered_serving_node(sandbox_node, NAME, "127.0.0.98") as (entry, _):
        new_release = tmp_path_factory.mktemp("locks") / "new-release-cp311-x86_64.txt"
        new_release.write_text("# the new release of the upgrade suite\n" + (REPO_ROOT / OPERATOR_LOCK).read_text())
        yield dict(entry, new_lock=str(new_release))


def run(script, *args, lock):
    """One documented command: ``pyinfra inventory/gpu.py [args] script`` with the release's lock."""
    result = pyinfra_cli("inventory/gpu.py", *args, script, data=(*DATA, f"venv_lock={lock}"), timeout=600)
    [result.row] = summary_rows().values()
    return result


def live(node):
    """(the live venv, the rollback's venv, systemd's state)."""
    return tuple(run_ssh(node, LIVE).stdout.split())


def move(node, lock):
    """Validate, the canary, a batch: the page's steps 4 and 5 for a fleet of one host."""
    checked = run("validate.py", lock=lock)
    # Nothing blocks the move (with the small locks, venv_lock names the release: the
    # planner compares no SGLang version, so the verdict may be ready or needs deploy).
    assert checked.returncode == 0 and checked.row["verdict"] in ("ready", "needs deploy"), checked.output[-4000:]
    canary = run("deploy.py", "--limit", NAME, "--data", "service_rollback=on-failure", lock=lock)
    assert canary.returncode == 0 and canary.row["verdict"] == "serving", canary.output[-4000:]
    moved = live(node)
    batch = run("deploy.py", "--limit", "up-*", "--data", "service_rollback=on-failure", lock=lock)
    assert batch.returncode == 0 and batch.row["verdict"] == "serving", batch.output[-4000:]
    assert live(node) == moved, "the batch after the canary changed the canary again"
    return moved


def test_a_host_moves_to_another_release_and_back_through_the_documented_commands(node):
    first = run("deploy.py", lock=OPERATOR_LOCK)
    assert first.returncode == 0 and first.row["verdict"] == "serving", first.output[-4000:]
    before = live(node)
    assert before[-1] == "active", before

    upgraded = move(node, node["new_lock"])
    assert upgraded[0] != before[0] and upgraded[1] == before[0].removeprefix("venvs/"), (before, upgraded)
    assert upgraded[-1] == "active"

    back = move(node, OPERATOR_LOCK)
    # The first release's venv again (the lock's digest names it), the new one its rollback.
    assert back[0] == before[0] and back[-1] == "active", (before, back)
    assert back[1] == upgraded[0].removeprefix("venvs/"), (upgraded, back)

    again = run("validate.py", lock=OPERATOR_LOCK)
    assert again.returncode == 0 and again.row["verdict"] in ("ready", "needs deploy"), again.output[-4000:]
