"""A serving group within one run (control/group_gate.py, tasks/operations/group.py): restart when
any member changed and none failed, serve when every member's gate passed, go back whole or not at
all; and the lines that fail a member for its group's sake name the member at fault."""

from types import SimpleNamespace

import pytest

from bringup.plan.model import GroupPlan
from control import fleet, group_gate
from tasks.operations import group as group_ops

MEMBERS = ("gpu-a", "gpu-b", "gpu-c")
SERVING = {"state": "serving", "reason": "/health answered 200 after 3 s", "waited": 3}
TIMED_OUT = {"state": "timed out", "reason": "not serving after 60 s; cause: waiting for node ranks [2]", "waited": 60}


class Host(SimpleNamespace):
    __hash__ = object.__hash__


def run_state(failed=()):
    hosts = [Host(name=name) for name in MEMBERS]
    return SimpleNamespace(inventory=hosts, failed_hosts={host for host in hosts if host.name in failed})


@pytest.fixture(autouse=True)
def fresh_run(monkeypatch):
    monkeypatch.setattr(fleet, "RUN", fleet.Run())
    monkeypatch.setattr(group_gate, "RUN", group_gate.GroupRun())
    errors = {"gpu-b": [{"name": "Install the venv", "status": "error", "error": "pip: no matching distribution"}]}
    monkeypatch.setattr(fleet, "operations_of", lambda state, host, lost_at=None: errors.get(host.name, []))


class Meta:
    """An operation of the run as pyinfra's OperationMeta answers: run or not, changed or not."""

    def __init__(self, ran, changed):
        self.ran, self.changed = ran, changed

    def is_complete(self):
        return self.ran

    def did_change(self):
        if not self.ran:
            raise RuntimeError("Cannot evaluate operation result before execution")
        return self.changed


def join(changes=None, joined=MEMBERS, pending=()):
    """Each member joins with one operation: ``changes`` name -> True (ran, changed), False (ran,
    no change) or None (never ran: its host failed before it)."""
    plan = GroupPlan(name="llama", rank=0, members=MEMBERS, dist_init_addr="10.0.0.1:29500", args=())
    for name in joined:
        value = (changes or {}).get(name, False)
        group_gate.join(plan, name, (Meta(value is not None, bool(value)),), pending=name in pending)


# (case, members' operations (True changed, None never ran), failed members, joined members,
#  members asking for a start whatever changed, restarts, held says)
HOLDS = [
    ("nothing changed", {}, (), MEMBERS, (), False, ""),
    ("one member changed: all restart", {"gpu-c": True}, (), MEMBERS, (), True, ""),
    ("a member's unit was not running: all restart", {}, (), MEMBERS, ("gpu-b",), True, ""),
    ("a member failed earlier", {"gpu-a": True, "gpu-b": None}, ("gpu-b",), MEMBERS, (), True,
     "gpu-b: failed (Install the venv: pip: no matching distribution)"),
    ("a member failed before any change, nothing else changed", {"gpu-b": None}, ("gpu-b",), MEMBERS, (), False,
     "gpu-b: failed (Install the venv: pip: no matching distribution)"),
    ("a member's service step is not in the run", {"gpu-a": True}, (), ("gpu-a", "gpu-b"), (), True,
     "gpu-c: its service step does not run in this run"),
]


@pytest.mark.parametrize("case, changes, failed, joined, pending, restarts, said", HOLDS,
                         ids=[row[0] for row in HOLDS])
def test_the_group_restarts_as_one_or_is_held(case, changes, failed, joined, pending, restarts, said):
    join(changes, joined, pending)
    assert group_gate.changed("llama") is restarts
    assert group_gate.held(run_state(failed), "llama") == said


# (case, gates recorded, failed members, the group changed, serving, why)
VERDICTS = [
    ("every member serves", {name: SERVING for name in MEMBERS}, (), True, True, ""),
    ("a member never joined: the head and it time out", {"gpu-a": TIMED_OUT, "gpu-b": SERVING, "gpu-c": TIMED_OUT},
     (), True, False, "serving group 'llama' is not serving as one: gpu-a (the head): timed out: not serving after "
     "60 s; cause: waiting for node ranks [2]; gpu-c: timed out: not serving after 60 s; cause: waiting for node "
     "ranks [2]"),
    ("a member failed after the restart", {"gpu-a": SERVING, "gpu-c": SERVING}, ("gpu-b",), True, False,
     "serving group 'llama' is not serving as one: gpu-b: failed before its gate (Install the venv: pip: no "
     "matching distribution)"),
    ("nothing restarted: a member's own failure is its own", {"gpu-a": SERVING, "gpu-c": SERVING}, ("gpu-b",), False,
     True, ""),
]


@pytest.mark.parametrize("case, gates, failed, changed, serving, why", VERDICTS, ids=[row[0] for row in VERDICTS])
def test_the_group_serves_when_every_member_s_gate_passed(case, gates, failed, changed, serving, why):
    join({"gpu-a": changed})
    for name, gate in gates.items():
        fleet.record(name, "deploy", service_serving=gate)
    assert group_gate.verdict(run_state(failed), "gpu-c") == (serving, why)


def test_a_host_serving_alone_has_no_group_verdict():
    join()
    assert group_gate.verdict(run_state(), "gpu-z") is None and group_gate.rollback_problems(run_state(), "gpu-z") == ""


def test_the_group_goes_back_whole_or_not_at_all_and_the_line_names_the_member():
    join({"gpu-a": True})
    for name in MEMBERS:
        group_gate.note_rollback_problem(name, "")
        fleet.record(name, "deploy", service_serving=TIMED_OUT)
    assert group_gate.rollback_problems(run_state(), "gpu-a") == ""
    group_gate.note_rollback_problem("gpu-b", "no previous release recorded")
    assert group_gate.rollback_problems(run_state(), "gpu-a") == "gpu-b: no previous release recorded"
    line = group_ops.stop_line("gpu-a", "llama", group_ops.NOT_ROLLED_BACK, run_state())
    assert line.startswith("gpu-a: serving group 'llama' is not serving as one: gpu-a (the head): timed out")
    assert "serving group 'llama' is not rolled back, nothing changed here: a group goes back whole or not at all, " \
           "and gpu-b: no previous release recorded" in line


def test_the_held_line_names_the_member_that_failed():
    join({"gpu-a": True})
    line = group_ops.stop_line("gpu-c", "llama", group_ops.HELD, run_state(failed=("gpu-b",)))
    assert line == ("gpu-c: serving group 'llama' is not restarted, nothing restarted here: gpu-b: failed (Install "
                    "the venv: pip: no matching distribution); fix that member, then deploy the whole group again")


def test_a_member_planned_again_after_its_driver_reboot_is_planned_as_a_member(monkeypatch):
    """The re-plan after the driver step's reboot (control/host_plan.py replanned_host) takes the
    host's place in its group and its route target, as the first plan did: its report keeps the
    group's plan."""
    from bringup.group import Member
    from control import groups, host_plan

    member = Member("gpu-b", "llama", 1, ("gpu-a", "gpu-b"), "10.0.0.1", 29500)
    asked = {}
    monkeypatch.setattr(host_plan, "host", SimpleNamespace(name="gpu-b", data=SimpleNamespace(
        dict=lambda: {"service_group": "llama", "service_model": "m", "service_args": "--tp 16"})))
    monkeypatch.setattr(groups, "membership", lambda state, name, config: (member, "10.0.0.1"))
    monkeypatch.setattr(host_plan, "_plan_recorded",
                        lambda purpose, config, *place: asked.update(place=place) or ({}, None))
    assert host_plan.replanned_host("deploy") == ({}, None, None)
    assert asked["place"] == (member, "10.0.0.1")


# (case, members that looked and what they found, failed members, what rollback_problems says)
GOING_BACK = [
    ("every member can", {name: "" for name in MEMBERS}, (), ""),
    ("a member failed in the run (its lock, its restart)", {name: "" for name in MEMBERS}, ("gpu-b",),
     "gpu-b: failed in this run (Install the venv: pip: no matching distribution)"),
    ("a member refused before its rollback never looked", {"gpu-a": "", "gpu-c": ""}, ("gpu-b",),
     "gpu-b: failed in this run (Install the venv: pip: no matching distribution)"),
    ("a member not in the rollback at all", {"gpu-a": "", "gpu-c": ""}, (),
     "gpu-b: did not look (not in this rollback)"),
    ("a member refused for what it found: what it found is named", {"gpu-a": "", "gpu-b": "no previous release "
     "recorded", "gpu-c": ""}, ("gpu-b",), "gpu-b: no previous release recorded"),
]


@pytest.mark.parametrize("case, looked, failed, said", GOING_BACK, ids=[row[0] for row in GOING_BACK])
def test_a_group_goes_back_only_when_every_member_can(case, looked, failed, said):
    join()
    for name, problem in looked.items():
        group_gate.note_rollback_problem(name, problem)
    assert group_gate.rollback_problems(run_state(failed), "gpu-a") == said
