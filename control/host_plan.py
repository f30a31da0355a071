"""Observe and decide for the current host: facts -> settings -> NodePlan.

Shared by validate.py and deploy.py so both see a host the same way. A host with
invalid settings or blockers gets one failing operation that runs no command on
the node, so it changes nothing while other hosts carry on. What each host showed is
recorded for the fleet summary printed at the end of the run (control/fleet.py); the
full per-host report is printed as the host is planned with ``-v`` (or the host's
``report_detail`` setting), and always saved in reports/<host>.json.

Whatever else fails while one host is planned (a facts document of an unexpected shape,
a bug) refuses that host alone with one bounded line: pyinfra would re-raise it and end
the whole run, every other host unplanned and no summary.
"""

import sys
import traceback

from pyinfra import host, logger, state
from pyinfra.api import FunctionCommand, operation
from pyinfra.api.exceptions import PyinfraError
from pyinfra.context import ctx_host, ctx_state

from bringup.setting_checks import cut
from bringup.config import Config, ConfigError
from bringup.facts_schema import FactsError
from bringup.layout import MODEL_ENV_KEYS, ProbeInputs
from bringup.plan import managed_env_keys, plan, service_env
from bringup.report import render
from bringup.summary import purpose_from_argv
from bringup.group import GroupError
from bringup.group_inventory import group_name
from control import api_key, fleet, group_gate, groups, locks_served, metrics, reports
from control.sudo import sudo_refusal
from facts.node import NodeFacts


@operation(is_idempotent=False)
def refuse_host(reason):
    """
    Fail the host with ``reason``; runs nothing on it.

    + reason: why the host is refused (logged, one line per item)

    **Example**:

    .. code:: python

        refuse_host("deploy refused: NO_GPU")
    """

    def fail(state, host):
        for line in reason.splitlines():
            host.log_styled(line, fg="red", log_func=logger.error)
        return False

    yield FunctionCommand(fail, (), {})


def refuse(reason):
    """Fail this host with ``reason`` without running anything on it. A validate.py run
    fails it as it is planned, with no operation: a refusal is no change (pyinfra's
    "Detected changes", ``--json``'s ``hosts_with_change``), and ``pyinfra --json``
    without ``-y``, which executes nothing, still fails the host. So does a deploy or a
    rollback that executes nothing (``--dry``): its exit status says the host is refused."""
    at_once = (fleet.RUN.purpose or purpose_from_argv(sys.argv)) == "validate" or fleet.executes_nothing(sys.argv)
    if at_once and ctx_state.isset() and ctx_host.isset():
        fleet.validate_never_asks(ctx_state.get())
        for line in reason.splitlines():  # as refuse_host prints it
            host.log_styled(line, fg="red", log_func=logger.error)
        try:
            ctx_state.get().fail_hosts({ctx_host.get()})
        except PyinfraError:
            if ctx_state.get().active_hosts:
                raise  # --fail-percent: the operator's stop
            # "No hosts remaining!": every host is refused or unreachable; the run ends
            # as any run does (exit status 1, the summary), not on an error of this file.
        return
    refuse_host(reason, name=f"Refuse {host.name}: {reason.splitlines()[0]}")


def load_config(purpose):
    """The host's validated settings, or None after refusing the host."""
    try:
        return Config.from_data(host.data.dict(), host=host.name)
    except ConfigError as error:
        print(f"== {host.name}: INVALID SETTINGS\n  {error}", file=sys.stderr)
        fleet.record(host.name, purpose, settings_error=str(error))
        refuse(str(error))
        return None


def probe_inputs(config, route_to=""):
    """What the probe is given for this host's settings: their layout, the env file keys
    the plan manages (whose values it reports as the service sees them), the
    operator's CPython (venv_python), the level of NVIDIA's diagnostic (gpu_diag) and, for a
    serving group's member, the address whose route it reports (``route_to``: the head's).

    >>> from bringup.config import Config
    >>> inputs = probe_inputs(Config.from_data({"venv_path": "/srv/venv", "venv_managed": False}))
    >>> inputs.layout.venv, inputs.layout.torch_record, "CUDA_HOME" in inputs.env_keys
    ('/srv/venv', '', True)
    """
    # The hub's settings as the service will have them after deploy: the plan's
    # XDG_CACHE_HOME (bringup/caches.py) and service_env's HF_* keys.
    planned = service_env(config, "", "")
    return ProbeInputs(config.layout, tuple(managed_env_keys(config)), model=config.service_model,
                       venv_python=config.venv_python, gpu_diag="" if config.gpu_diag == "off" else config.gpu_diag,
                       model_env=tuple((key, planned[key]) for key in MODEL_ENV_KEYS if key in planned),
                       route_to=route_to)


def gather(config, member=None, route_to=""):
    """Run the probe once and plan: returns (facts, node_plan), or (None, None) when
    the probe gave nothing (pyinfra has then failed the host already). ``member``: the
    host's place in its serving group (control/groups.py), ``route_to`` its peer's address."""
    facts = host.get_fact(NodeFacts, inputs=probe_inputs(config, route_to))
    if facts is None:
        return None, None
    node = plan(facts, config, member=member)
    # The API key's files, on the control machine and the node: before anything changes.
    node.findings += api_key.key_findings(config, node)
    # The locked versions deploy would install, where the node's lists can say already.
    node.findings += locks_served.served_findings(facts, node)
    return facts, node


def write_report(facts, config, node):
    """Write reports/<host>.json (control/reports.py: whole, 0600, secrets redacted)."""
    return reports.save_host_report(host.name, facts, config.as_dict(), node.as_dict())


def summary_facts(facts):
    """What the fleet summary shows of the facts: GPUs, driver, what resolves now."""
    return {key: facts.get(key) for key in ("gpus", "driver", "resolution")}


def blockers_text(node, blockers=None):
    """One line naming every blocker (or those of ``blockers``), then each with its fix."""
    blockers = node.blockers if blockers is None else blockers
    lines = [f"{len(blockers)} blocker(s): {', '.join(b.code for b in blockers)}"]
    lines += [f"{b.code}: {b.message}; fix: {b.fix}" for b in blockers]
    return "\n".join(lines)


def failure_line(name, purpose, error):
    """The one line that refuses host ``name`` after ``error`` while planning it: the
    error's class and message (on one line, cut to checks.SHOWN_CHARS) and the fix.

    >>> failure_line("n1", "validate", TypeError("x" * 300))[:78]
    'n1: validate refused, nothing changed: planning failed: TypeError: xxxxxxxxxxx'
    >>> failure_line("n1", "deploy", FactsError("facts.python.version: expected a version")).split(": fix: ")[1]
    "the node's facts do not fit docs/facts.md: check the probe's output (pyinfra n1 fact facts.node.NodeFacts)"
    """
    message = cut(" ".join(str(error).split()) or "(no message)")
    if isinstance(error, FactsError):
        fix = f"the node's facts do not fit docs/facts.md: check the probe's output (pyinfra {name} fact facts.node.NodeFacts)"
    else:
        fix = ("an unexpected failure of this tool: the other hosts carry on; pyinfra --debug prints its traceback, "
               f"report it with the facts (pyinfra {name} fact facts.node.NodeFacts)")
    return f"{name}: {purpose} refused, nothing changed: planning failed: {type(error).__name__}: {message}: fix: {fix}"


def planned_host(purpose, blocking=None):
    """Settings, facts and plan of this host, with the report printed and saved.

    Returns the NodePlan when the host may proceed, else None after refusing it.
    ``purpose`` names the run in the refusal ("validate", "deploy"). ``blocking``: which
    of the plan's blockers refuse the host (a function of the list; default: all of them;
    rollback.py: only those about the paths it writes).
    """
    if ctx_state.isset():
        fleet.validate_never_asks(ctx_state.get())  # inventories other than inventory/gpu.py (@local)
        fleet.json_stdout_always()
    node, error = guarded(_planned_host, purpose, blocking)
    if error is not None:
        line = failure_line(host.name, purpose, error)
        print(f"== {host.name}: PLANNING FAILED\n  {line}", file=sys.stderr)
        fleet.record(host.name, purpose, plan_error=line)
        refuse(line)
    _, error = guarded(_arrived_unplanned, purpose)
    if error is not None:  # the group's preflight failed: its members are refused already
        logger.debug(f"{host.name}: serving group preflight: {type(error).__name__}: {error}")
    return node


def _arrived_unplanned(purpose):
    """A serving group's member refused before its plan still arrives (control/groups.py), so
    that its group's preflight runs, naming it as missing."""
    group = group_name(host.data.get("service_group"))
    if group and host.name not in groups.ARRIVALS.entries.get(group, {}):
        groups.arrive(state, purpose, host.name, group, groups.missing_entry(fleet.RUN.records.get(host.name, {})))


def replanned_host(purpose):
    """This host's settings, facts and plan once more, while the run executes (the driver
    step's reboot loaded another module): planned_host's own steps under its guard,
    recorded for the fleet summary and saved in reports/<host>.json as the first plan.
    Inside a running operation no host can be refused, so it returns what the operation
    acts on: ``(facts, NodePlan, None)``; ``(None, None, None)`` when the probe gave
    nothing; ``(None, None, error)`` for a settings error or an exception while planning
    (pyinfra's own errors pass, as in planned_host).
    """
    found, error = guarded(_replanned, purpose)
    facts, node = found or (None, None)
    return facts, node, error


def guarded(work, *args):
    """``work(*args)`` under the one guard of planning a host: ``(result, None)``, or
    ``(None, error)`` after any exception but pyinfra's own (no host left, --fail-percent
    exceeded: those end the run as pyinfra means them to), its traceback in pyinfra's
    debug log. One host's failure never ends the others' run.

    >>> guarded(int, "7"), guarded(int, "x")[1].__class__.__name__
    ((7, None), 'ValueError')
    """
    try:
        return work(*args), None
    except PyinfraError:
        raise
    except Exception as error:  # noqa: BLE001 - one host's failure must not end the others' run
        logger.debug("".join(traceback.format_exception(error)))
        return None, error


def _plan_recorded(purpose, config, member=None, route_to=""):
    """(facts, NodePlan) of this host for ``config``, the plan recorded for the fleet
    summary and its metrics; (facts, None) when the probe gave nothing."""
    # A host serving alone is gathered exactly as before groups (tests stand in for gather(config)).
    facts, node = gather(config) if member is None else gather(config, member, route_to)
    if node is not None:
        fleet.record(host.name, purpose, facts=summary_facts(facts), plan=node.as_dict(),
                     stacks=metrics.stacks(facts, config, node.as_dict()))
    return facts, node


def _replanned(purpose):
    config = Config.from_data(host.data.dict(), host=host.name)
    # A serving group's member is planned as one again: its place, its route to the peer.
    member, route_to = groups.membership(state, host.name, config)
    facts, node = _plan_recorded(purpose, config, member, route_to)
    if node is not None:
        write_report(facts, config, node)
    return facts, node


def _planned_host(purpose, blocking=None):
    config = load_config(purpose)
    if config is None:
        return None
    asked = sudo_refusal(state, host)
    if asked:
        print(f"== {host.name}: SUDO ASKS FOR A PASSWORD\n  {asked}", file=sys.stderr)
        fleet.record(host.name, purpose, settings_error=asked)
        refuse(asked)
        return None
    try:
        member, route_to = groups.membership(state, host.name, config)
        problem = member and group_gate.run_problem(purpose, sys.argv)
        if problem:
            raise GroupError(f"{host.name}: serving group {member.group!r}: {problem}")
    except GroupError as error:
        print(f"== {host.name}: INVALID SERVING GROUP\n  {error}", file=sys.stderr)
        fleet.record(host.name, purpose, settings_error=str(error))
        refuse(str(error))
        return None
    facts, node = _plan_recorded(purpose, config, member, route_to)
    if node is None:
        fleet.record(host.name, purpose, probe_failed=True)
        return None
    if member is not None:
        # The group's preflight, when this member completes it: its findings join this plan.
        if groups.arrive(state, purpose, host.name, member.group, groups.summary_entry(facts, config, node)):
            fleet.record(host.name, purpose, plan=node.as_dict())
    if config.report_detail or fleet.verbose(state):
        # stderr, beside pyinfra's own log: stdout stays pure JSON under --json.
        print(render(host.name, facts, node), file=sys.stderr, flush=True)
    write_report(facts, config, node)
    blockers = node.blockers if blocking is None else blocking(node.blockers)
    if blockers:
        refuse(f"{purpose} refused, nothing changed: {blockers_text(node, blockers)}")
        return None
    return node
