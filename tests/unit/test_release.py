"""The service's release decisions (bringup/release.py): when deploy restarts for a
release not yet live, why a rollback is refused and what the operator does about it."""

import pytest

from bringup import release

LOOK = ["current=aaaaaaaaaaaaaaaa", "live=bbbbbbbbbbbbbbbb", "previous=cccccccccccccccc",
        "previous_venv=venvs/0123456789abcdef", "previous_problem="]


def test_the_look_is_parsed_whole():
    assert release.parse_look(LOOK) == {
        "current": "aaaaaaaaaaaaaaaa", "live": "bbbbbbbbbbbbbbbb", "previous": "cccccccccccccccc",
        "previous_venv": "venvs/0123456789abcdef", "previous_problem": ""}


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
