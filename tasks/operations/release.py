"""Operations on the service's releases (files/release.sh): record what was live before
a change, promote it to the rollback when the service restarts for a change, record the
new release, and put the previous release back (rollback.py, ``service_rollback``)."""

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, StringCommand, operation

from bringup.layout import NodeLayout
from bringup.release import (
    UNCHANGED,
    refusal_line,
    restore_failure,
    restore_failure_line,
)
from control import fleet
from facts.release import ReleaseLook, release_command, release_paths
from tasks.operations.serving import connector_arguments, host_serving
from tasks.operations.sglang import as_plan

ROLLED_BACK, REFUSED, FAILED = "rolled back", "refused", "failed"


@operation(is_idempotent=False)
def release_seeded(layout):
    """
    Before the first step that can change the env file, the unit or the venv: a node
    with no release record yet gets one of what is live (nothing when no unit is
    there), so the first change has something to go back to. A record there is kept:
    it is what the service was last started with, even after an interrupted deploy.

    + layout: the NodeLayout
    """
    layout = as_plan(NodeLayout, layout)
    look = host.get_fact(ReleaseLook, **release_paths(layout))
    if look["current"]:
        host.noop(f"release {look['current']} is recorded as what sglang runs")
        return
    if not look["recordable"]:
        host.noop("nothing live to record yet (no unit, or no venv root)")
        return
    yield release_command(layout, "seed")


@operation(is_idempotent=False)
def release_promoted(layout):
    """
    Before the service restarts for a change: the release it ran becomes the rollback
    (``releases/previous``), unless it is what is live now.

    + layout: the NodeLayout
    """
    yield release_command(as_plan(NodeLayout, layout), "promote")


@operation(is_idempotent=False)
def release_recorded(layout):
    """
    After the service (re)started: what is live is the current release.

    + layout: the NodeLayout
    """
    yield release_command(as_plan(NodeLayout, layout), "record")


def rollback_state(name):
    """What the rollback of this run did on host ``name``: "rolled back", "refused", or
    "" (none ran)."""
    return fleet.recorded(name, "service_rollback").get("state", "")


def restore(state, host, layout, unit_name, purpose, arguments):  # pyinfra passes state, host by name
    """Run release.sh's restore; record the outcome for the summary; False (the host
    fails) when it is refused, after one line naming the host, why and what to do."""
    cause = host_serving(host.name)[1] if purpose == "deploy" else ""
    layout = as_plan(NodeLayout, layout)
    done, output = host.run_shell_command(StringCommand(release_command(layout, "restore")), **arguments)
    if done:
        for line in output.stdout_lines:
            host.log_styled(line, fg="yellow", log_func=logger.warning)
        fleet.record(host.name, purpose, service_rollback={"state": ROLLED_BACK, "cause": cause})
        return True
    node_state, problem = restore_failure(output.stderr_lines)
    if node_state != UNCHANGED:
        # It changed the node, or may have: the line says in which state it left it.
        line = restore_failure_line(host.name, node_state, problem)
        fleet.record(host.name, purpose, service_rollback={"state": FAILED, "cause": cause,
                                                           "reason": line.split(": ", 1)[1]})
        host.log_styled(line, fg="red", log_func=logger.error)
        return False
    fleet.record(host.name, purpose, service_rollback={"state": REFUSED, "cause": cause, "reason": problem})
    line = refusal_line(host.name, problem)
    if cause:
        line = f"{host.name}: {unit_name} is not serving ({cause}); " + line.split(": ", 1)[1]
    host.log_styled(line, fg="red", log_func=logger.error)
    return False


@operation(is_idempotent=False)
def release_restored(layout, unit_name, purpose="rollback"):
    """
    Put the previous release back: the venv link's target, the unit and the env file
    that went with it, all three or none (files/release.sh restore); once restarted on it
    (``release.sh settle``), a second rollback finds nothing to go back to. Refused,
    nothing changed, with one line (host, why, what to do) when there is no previous
    release, its venv is missing or incomplete, or a file cannot be put in place; a
    rename that fails midway is undone, and the line says in which state the node is
    (``bringup.release.restore_failure_line``). Recorded for the fleet
    summary (``service_rollback``; ``cause``: the gate's failure that asked for it).

    + layout: the NodeLayout
    + unit_name: the unit (``sglang.service``)
    + purpose: "rollback" (rollback.py) or "deploy" (``service_rollback: on-failure``)
    """
    yield FunctionCommand(restore, (layout, unit_name, purpose, connector_arguments()), {})


@operation(is_idempotent=False)
def rollback_refused(problem, purpose="rollback"):
    """
    Fail the host with its refusal line (``bringup.release.refusal_line``): a rollback
    refused from the plan, nothing asked of the node; recorded for the fleet summary.

    + problem: why (``bringup.release.rollback_problem``)
    """
    line = refusal_line(host.name, problem)
    fleet.record(host.name, purpose, service_rollback={"state": REFUSED, "cause": "", "reason": problem})

    def fail(state, host):
        host.log_styled(line, fg="red", log_func=logger.error)
        return False

    yield FunctionCommand(fail, (), {})


@operation(is_idempotent=False)
def rolled_back_outcome(unit_name):
    """
    After deploy rolled a host back and the previous release serves: the host still
    fails (its change did not serve), with one line that says so and why.

    + unit_name: the unit (``sglang.service``)
    """

    def fail(state, host):
        cause = fleet.recorded(host.name, "service_rollback").get("cause", "")
        host.log_styled(f"{host.name}: rolled back: the change did not serve ({cause}); {unit_name} is back on "
                        "the previous release and serves; fix the change, then deploy again",
                        fg="yellow", log_func=logger.error)
        return False

    yield FunctionCommand(fail, (), {})
