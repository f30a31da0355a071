"""Deploy's readiness gate: wait until the SGLang unit is ``active`` and its health
endpoint answers, printing the start's milestones from the unit's journal; fail the
host with the cause ``bringup.explain`` finds when the unit fails, restarts or is not
ready in time (bringup/serving.py decides; this module only asks the node)."""

import shlex
import time

import click
from pyinfra import host, state
from pyinfra.api import FunctionCommand, StringCommand, operation
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS

from bringup import serving
from bringup.plan import ServicePlan
from control import fleet, group_gate
from facts.serving import ServiceLook, journal_since, look_command, parse_look
from tasks.operations.sglang import as_plan

POLL_SECONDS = 2
JOURNAL_LINES = 400


def asked(service, unit_name):
    """What a look needs of the plan, as the fact's arguments (plain strings)."""
    return unit_name, service.user, service.host, service.port, service.api_key_file


def _say(on, text, colour=None):
    # At any verbosity, host-prefixed on stderr as pyinfra prints a command's output.
    click.echo(f"{on.print_prefix}{click.style(text, fg=colour) if colour else text}", err=True)


def _record(state_name, reason, waited, purpose="deploy"):
    fleet.record(host.name, purpose, service_serving={"state": state_name, "reason": reason, "waited": waited})


def connector_arguments():
    """The current operation's connector arguments (``_sudo``, ``_su_user``...), for the
    commands a FunctionCommand runs itself: they run as the operation would."""
    return {key: value for key, value in (host.current_op_global_arguments or {}).items()
            if key in CONNECTOR_ARGUMENT_KEYS}


def wait_serving(state, host, service, unit_name, arguments, result):  # pyinfra passes state, host by name
    """Look every POLL_SECONDS until ``serving.decision`` is no longer ``wait``; the
    outcome goes in ``result`` (the operation's next command reads it)."""

    def run(command):
        _, output = host.run_shell_command(StringCommand(command), **arguments)
        return list(output.stdout_lines)

    started, cursor, restarts_before, since = time.monotonic(), "", None, ""
    endpoint = f"http://{service.host}:{service.port}{serving.HEALTH_PATH}"
    _say(host, f"waiting for {unit_name} to answer {endpoint} (up to {service.ready_timeout} s)")
    last_said = ""
    while True:
        unit, status, journal, seen = parse_look(run(look_command(*asked(service, unit_name), cursor=cursor)))
        cursor = seen or cursor
        unit["name"] = unit_name
        if restarts_before is None:
            # The start the gate waits for: its journal holds the cause of a failure.
            restarts_before, since = unit.get("restarts") or 0, unit.get("started") or ""
        for line in journal:
            said = serving.progress(line)
            if said:
                _say(host, f"{unit_name}: {said}")
        waited = time.monotonic() - started
        decided, why = serving.decision(unit, status, restarts_before, waited, service.ready_timeout)
        if decided == serving.READY:
            _say(host, f"{unit_name} serves: {why}", "green")
            result.update(state=serving.READY, reason=why, waited=int(waited))
            return True
        if decided != serving.WAIT:
            cause = serving.cause(run(f"{journal_since(shlex.quote(unit_name), since)} -n {JOURNAL_LINES} "
                                      "2>/dev/null"))
            result.update(state=decided, reason=f"{why}; cause: {cause}", waited=int(waited))
            return True
        if why != last_said:
            _say(host, f"{unit_name}: {why}")
            last_said = why
        time.sleep(POLL_SECONDS)


@operation(is_idempotent=False)
def service_serving(service, unit_name, fail_host=True, purpose="deploy"):
    """
    Wait until the enabled SGLang unit serves (``bringup.serving.decision``): systemd's
    ``active`` and ``/health`` answering 200, within ``service.ready_timeout`` seconds.
    A unit already serving is a no-op; one that fails, restarts or is not ready in time
    fails the host with the cause found in its journal. The outcome is recorded for the
    fleet summary (``serving``).

    + service: the ServicePlan (user, host, port, api_key_file, ready_timeout)
    + unit_name: the unit (``sglang.service``)
    + fail_host: False: a unit that does not serve is recorded, and the host goes on
      (to the rollback of ``service_rollback: on-failure``, which reads ``host_serving``)
    + purpose: the run the outcome is recorded for ("deploy", "rollback")

    **Example**:

    .. code:: python

        service_serving(name="Wait for sglang to serve", service=node.service, unit_name="sglang.service")
    """
    service = as_plan(ServicePlan, service)
    unit, status, _, _ = host.get_fact(ServiceLook, *asked(service, unit_name))
    decided, why = serving.decision(unit, status, unit.get("restarts") or 0, 0, service.ready_timeout)
    if decided == serving.READY:
        # Recorded while the run executes only: pyinfra's change detection (a run without -y)
        # runs this body before anything changed, and what a gate recorded is what the group's
        # verdict and the rollback read.
        if state.is_executing:
            _record("serving", why, 0, purpose)
        # Said at default verbosity too: the operator's answer, not only a no-op's detail.
        _say(host, f"{unit_name} serves: {why}", "green")
        host.noop(f"{unit_name} serves: {why}")
        return
    result = {}
    yield FunctionCommand(wait_serving, (service, unit_name, connector_arguments(), result), {})
    if not state.is_executing:
        return  # --dry: listed, not waited for
    if result.get("state") == serving.READY:
        _record("serving", result["reason"], result["waited"], purpose)
        return
    reason = result.get("reason") or "the gate stopped before an answer"
    _record(result.get("state") or serving.FAILED, reason, result.get("waited", 0), purpose)
    line = f"{host.name}: {unit_name} is not serving: {reason}"
    if not fail_host:
        # Said here, at the failure; the rollback that follows names it again.
        yield FunctionCommand(lambda state, host: _say(host, f"{line}; rolling back (service_rollback: on-failure)",
                                                       "yellow") or True, (), {})
        return
    yield f"echo {shlex.quote(line)} >&2; exit 1"


def host_serving(name):
    """Whether deploy's gate found ``name`` serving in this run, and why not ("" when it
    does): ``bringup.serving.serving_of`` of what the gate recorded (for a rollback). A
    serving group's member serves only when its whole group does (control/group_gate.py):
    the why then names each member that does not, with its cause."""
    group = group_gate.verdict(state, name)
    return group if group is not None else gate_serving(name)


def gate_serving(name):
    """(serving, why) of ``name``'s own gate in this run, its group aside."""
    return serving.serving_of(fleet.recorded(name, "service_serving"))
