"""Both venv installers end to end on a light node, through deploy.py with only the
account and venv steps: pip builds from a lock, uv is bootstrapped from its own lock
with hashes and builds the next venv beside it (the pip-built one becomes the rollback),
a second run changes nothing, and a uv that cannot be bootstrapped stops the build
with a message: no silent fallback to pip, the live venv untouched."""

import pytest

from sandbox import aptrepo, pypimirror
from tests.sandbox_fixtures import REPO_ROOT, changed_operations, pyinfra_cli, run_ssh

pytestmark = pytest.mark.sandbox

NAME = "venv-inst"
OPERATOR_LOCK = "sandbox/locks/operator-venv-cp311-x86_64.txt"
STEPS = "deploy_steps=account,venv"


@pytest.fixture(scope="module")
def node(sandbox_node):
    aptrepo.ensure_served()
    # The operator's lock is no lock of this node's platform (no --state operator): fetch it.
    pypimirror.serve([REPO_ROOT / OPERATOR_LOCK])
    return dict(sandbox_node(NAME, "127.0.0.58", gpu="rtx-pro-6000-x8", toolkit="none"), name=NAME)


@pytest.fixture(scope="module")
def second_lock(tmp_path_factory):
    """The operator's lock with one more comment line: another digest, so another
    venv, with the same single wheel."""
    path = tmp_path_factory.mktemp("locks") / "second-cp311-x86_64.txt"
    path.write_text("# the second venv of this suite\n" + (REPO_ROOT / OPERATOR_LOCK).read_text())
    return path


def deploy(node, *data, json_output=False):
    return pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py", data=(STEPS, *data),
                       json_output=json_output)


def live(node):
    """(link target, packaging's version in the live venv, what venvs/ holds)."""
    out = run_ssh(node, "readlink /opt/sglang/venv; /opt/sglang/venv/bin/python -c "
                        "'import packaging; print(packaging.__version__)'; ls /opt/sglang/venvs").stdout.split()
    return out[0], out[1], sorted(out[2:])


def test_pip_builds_the_venv_from_the_lock(node):
    result = deploy(node, f"venv_lock={OPERATOR_LOCK}", "venv_installer=pip")
    assert result.returncode == 0, result.output[-4000:]
    assert "built with pip" in result.output
    target, version, _ = live(node)
    assert target.startswith("venvs/") and version == "26.4"
    # pip alone: nothing was bootstrapped.
    assert run_ssh(node, "test -e /opt/sglang/tools", check=False).returncode != 0
    again = deploy(node, f"venv_lock={OPERATOR_LOCK}", "venv_installer=pip", json_output=True)
    assert again.returncode == 0, again.output[-3000:]
    assert changed_operations(again) == []


def test_a_uv_that_cannot_be_bootstrapped_stops_the_build(node, second_lock):
    before = live(node)
    # An index without uv: the node's own empty directory as the only find-links.
    result = deploy(node, f"venv_lock={second_lock}", "venv_installer=uv", "venv_find_links=/srv",
                    "venv_no_index=true")
    assert result.returncode != 0
    assert "uv could not be installed" in result.output, result.output[-3000:]
    assert "venv_installer=pip" in result.output
    assert live(node) == before, "the live venv changed"
    # No pip fallback built the second venv, and no half-bootstrapped uv is left.
    leftovers = run_ssh(node, "ls /opt/sglang/venvs; test -e /opt/sglang/tools && echo tools-left; true").stdout
    assert leftovers.split() == before[2], leftovers


def test_uv_builds_the_next_venv_and_keeps_the_pip_one_as_rollback(node, second_lock):
    first_target, _, _ = live(node)
    result = deploy(node, f"venv_lock={second_lock}", "venv_installer=uv")
    assert result.returncode == 0, result.output[-4000:]
    assert "uv bootstrapped" in result.output and "built with uv" in result.output
    target, version, held = live(node)
    assert target != first_target and version == "26.4"
    previous = run_ssh(node, "readlink /opt/sglang/venvs/previous").stdout.strip()
    assert previous == first_target.removeprefix("venvs/")
    assert held == sorted([previous, target.removeprefix("venvs/"), "previous"])
    # Built by root, read-only to the service account.
    # uv in tools/<its lock's digest>/, complete (files/build-venv.sh), the only one there.
    owner = run_ssh(node, "stat -c '%U %a' /opt/sglang/venv/ /opt/sglang/tools/*/bin/uv; "
                          "ls -A /opt/sglang/tools; cat /opt/sglang/tools/*/.complete").stdout.split()
    assert owner[0] == "root" and owner[2] == "root", owner
    assert len(owner) == 6 and owner[4] == owner[5] and len(owner[4]) == 16, owner
