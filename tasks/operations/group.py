"""A serving group's operations (control/group_gate.py): a member failed for its group's sake, with
one line the run's state decides when it gets there, and the look at whether a member can go back
before any member does."""

from pyinfra import logger
from pyinfra.api import FunctionCommand, operation

from bringup.layout import NodeLayout
from bringup.release import rollback_problem
from control import fleet, group_gate
from facts.release import ReleaseLook, release_paths
from tasks.operations.sglang import as_plan

HELD, NOT_SERVING, NOT_ROLLED_BACK = "held", "not serving", "not rolled back"


def stop_line(name, group, stage, run_state):
    """The line that fails member ``name`` of ``group`` at ``stage``, from what the run found."""
    if stage == HELD:
        return (f"{name}: serving group {group!r} is not restarted, nothing restarted here: "
                f"{group_gate.held(run_state, group)}; fix that member, then deploy the whole group again")
    cause = (group_gate.verdict(run_state, name) or (True, ""))[1]
    if stage == NOT_SERVING:
        return f"{name}: {cause}; fix the member named, then deploy the whole group again"
    problems = group_gate.rollback_problems(run_state, name)
    return (f"{name}: {cause + '; ' if cause else ''}serving group {group!r} is not rolled back, nothing changed "
            f"here: a group goes back whole or not at all, and {problems}; fix that member (or deploy the whole "
            "group again)")


@operation(is_idempotent=False)
def group_stopped(group, stage, purpose="deploy"):
    """
    Fail this member for its serving group's sake, with one line naming the members and their
    causes, decided as the run gets there: ``held``, its change asks the group to restart and
    a member failed earlier in the run (or does not reach its service step), so nothing is
    restarted; ``not serving``, its own gate passed and another member's did not; ``not rolled
    back``, the group did not serve and a member cannot go back, so none does.

    + group: the group's name
    + stage: "held", "not serving" or "not rolled back"
    + purpose: the run it is recorded for ("deploy", "rollback")

    **Example**:

    .. code:: python

        group_stopped(name="Hold the serving group", group="llama", stage="held",
                      _if=lambda: group_gate.changed("llama") and bool(group_gate.held(state, "llama")))
    """

    def fail(state, host):
        line = stop_line(host.name, group, stage, state)
        fleet.record(host.name, purpose, group_stopped={"stage": stage, "reason": line.split(": ", 1)[1]})
        host.log_styled(line, fg="red", log_func=logger.error)
        return False

    yield FunctionCommand(fail, (), {})


def look_back(state, host, layout):  # pyinfra passes state, host by name
    """Record whether this member can go back to its previous release (control/group_gate.py)."""
    look = host.get_fact(ReleaseLook, **release_paths(as_plan(NodeLayout, layout)))
    group_gate.note_rollback_problem(host.name, rollback_problem(True, True, look))
    return True


@operation(is_idempotent=False)
def group_release_checked(layout):
    """
    Before any member of a serving group goes back to its previous release: whether this one can
    (that release recorded, its venv there), recorded for the group; the group goes back only when
    every member can (``group_gate.rollback_problems``).

    + layout: the NodeLayout
    """
    yield FunctionCommand(look_back, (layout,), {})

