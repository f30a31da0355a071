"""The service's release decisions (bringup/release.py): when deploy restarts for a
release not yet live, why a rollback is refused and what the operator does about it."""

import pytest

from bringup import release

LOOK = ["current=aaaaaaaaaaaaaaaa", "live=bbbbbbbbbbbbbbbb", "previous=cccccccccccccccc",
        "previous_venv=venvs/0123456789abcdef", "previous_problem=", "recordable=yes"]


def test_the_look_is_parsed_whole():
    assert release.parse_look(LOOK) == {
        "current": "aaaaaaaaaaaaaaaa", "live": "bbbbbbbbbbbbbbbb", "previous": "cccccccccccccccc",
        "previous_venv": "venvs/0123456789abcdef", "previous_problem": "", "recordable": "yes"}


@pytest.mark.parametrize("current,live,expected", [
    ("a", "a", False),   # what the service was started with is live: nothing pending
    ("a", "b", True),    # an earlier run changed it and did not restart (interrupted, no service step)
    ("", "b", False),    # no record yet: only this run's own changes restart
])
def test_pending(current, live, expected):
    assert release.pending({"current": current, "live": live}) is expected


@pytest.mark.parametrize("managed,enabled,look,problem,fix", [
    (False, True, None, "venv_managed is false", "put the venv you want back there yourself"),
    (True, False, None, "the service is not enabled", "nothing to roll back"),
    (True, True, {"previous_problem": release.NO_PREVIOUS}, release.NO_PREVIOUS, "a rollback already used it"),
    (True, True, {"previous_problem": "its venv /opt/sglang/venvs/ab is missing"},
     "its venv /opt/sglang/venvs/ab is missing", "deploy the release you want with deploy.py"),
    (True, True, {"previous_problem": ""}, "", None),
])
def test_rollback_problem_and_its_fix(managed, enabled, look, problem, fix):
    assert release.rollback_problem(managed, enabled, look) == problem
    if fix:
        line = release.refusal_line("gpu-01", problem)
        assert line.startswith(f"gpu-01: rollback refused, nothing changed: {problem}; fix: ")
        assert fix in line and "\n" not in line


@pytest.mark.parametrize("enabled,look,problem", [
    # The release it would restore is judged first: on a node without the service, too.
    (False, {"previous_problem": release.NO_PREVIOUS}, release.NO_PREVIOUS),
    (False, {"previous_problem": ""}, "the service is not enabled"),
    (True, {"previous_problem": "its venv /opt/sglang/venvs/ab is missing"}, "its venv /opt/sglang/venvs/ab is missing"),
])
def test_the_release_is_judged_before_the_service(enabled, look, problem):
    assert release.rollback_problem(True, enabled, look) == problem


@pytest.mark.parametrize("codes,blocking", [
    (["MODEL_UNAVAILABLE", "NO_GPU", "DRIVER_TOO_OLD", "VENV_LOCK_MISSING"], []),
    (["MODEL_UNAVAILABLE", "UNSAFE_PATH"], ["UNSAFE_PATH"]),
])
def test_only_the_blockers_about_its_paths_refuse_a_rollback(codes, blocking):
    from bringup.findings import BLOCKER, Finding

    found = [Finding(code, BLOCKER, "seen", "fix") for code in codes]
    assert [finding.code for finding in release.rollback_blockers(found)] == blocking


@pytest.mark.parametrize("stderr,state,says", [
    (["state=unchanged", "no previous release recorded"], release.UNCHANGED, None),
    (["state=as-before", "could not put the env file /e in place (x): the node is as it was before the rollback"],
     release.AS_BEFORE, "rollback failed, the node is as it was before it: could not put the env file"),
    (["state=mixed", ("could not put ..., and could not put back the unit /u: the node has the unit /u of the "
                      "previous release")], release.MIXED, "rollback failed, the node is half-restored: could not put"),
    (["sh: 1: cannot create /etc/x: Read-only file system"], release.UNKNOWN,
     "rollback failed, the node may be half-restored: sh: 1: cannot create"),
])
def test_a_failed_restore_says_the_state_it_left(stderr, state, says):
    found, problem = release.restore_failure(stderr)
    assert found == state and problem == stderr[-1]
    if says:
        line = release.restore_failure_line("gpu-01", found, problem)
        assert line.startswith(f"gpu-01: {says}") and "nothing changed" not in line and "\n" not in line


# Review of issue 33 (class: bad input is one line naming the fix): a restore refused by
# a check of the node says what to do about that check, then to run the rollback again;
# deploying another release neither recreates a group nor remounts /etc.
@pytest.mark.parametrize("problem,fix", [
    (("the env file /etc/sglang/sglang.env of the previous release belongs to group sglang, which no longer exists "
      "on this node"), "create group sglang again"),
    (("the unit /etc/systemd/system/sglang.service of the previous release belongs to user svc, who no longer "
      "exists on this node"), "create user svc again"),
    (("the directory of the env file /etc/sglang/sglang.env, /etc/sglang, is not writable (a read-only file "
      "system?)"), "make /etc/sglang writable"),
    ("the directory of the env file /etc/sglang/sglang.env, /etc/sglang, is missing (or a link)",
     "make /etc/sglang a directory of root's"),
    ("the directory of the venv link /opt/sglang/venv, /opt/sglang, is not root's alone (owner ops, mode 775)",
     "make /opt/sglang root's and writable by root alone"),
])
def test_a_restore_refused_by_a_check_names_its_own_fix(problem, fix):
    line = release.refusal_line("gpu-01", problem)
    assert fix in line and line.endswith("then run rollback.py again"), line
