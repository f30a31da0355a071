"""Observe and decide for the current host: facts -> settings -> NodePlan.

Shared by validate.py and deploy.py so both see a host the same way. A host with
invalid settings or blockers gets one failing operation that runs no command on
the node, so it changes nothing while other hosts carry on. What each host showed is
recorded for the fleet summary printed at the end of the run (control/fleet.py); the
full per-host report is printed as the host is planned with ``-v`` (or the host's
``report_detail`` setting), and always saved in reports/<host>.json.
"""

import sys

from pyinfra import host, logger, state
from pyinfra.api import FunctionCommand, operation

from bringup.config import Config, ConfigError
from bringup.plan import managed_env_keys, plan
from bringup.report import render
from control import fleet
from control import reports
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
    """Fail this host with ``reason`` without running anything on it."""
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


def gather(config):
    """Run the probe once and plan: returns (facts, node_plan), or (None, None) when
    the probe gave nothing (pyinfra has then failed the host already)."""
    layout = config.layout
    facts = host.get_fact(NodeFacts, venv=layout.venv, env_file=layout.env_file, cache_dir=layout.cache_dir,
                          env_keys=" ".join(managed_env_keys(config)), venv_managed=config.venv_managed,
                          service_user=config.service_user)
    if facts is None:
        return None, None
    return facts, plan(facts, config)


def write_report(facts, config, node):
    """Write reports/<host>.json (control/reports.py: whole, 0600, secrets redacted)."""
    return reports.save_host_report(host.name, facts, config.as_dict(), node.as_dict())


def summary_facts(facts):
    """What the fleet summary shows of the facts: GPUs, driver, what resolves now."""
    return {key: facts.get(key) for key in ("gpus", "driver", "resolution")}


def blockers_text(node):
    """One line naming every blocker, then each with its fix."""
    blockers = node.blockers
    lines = [f"{len(blockers)} blocker(s): {', '.join(b.code for b in blockers)}"]
    lines += [f"{b.code}: {b.message}; fix: {b.fix}" for b in blockers]
    return "\n".join(lines)


def planned_host(purpose):
    """Settings, facts and plan of this host, with the report printed and saved.

    Returns the NodePlan when the host may proceed, else None after refusing it.
    ``purpose`` names the run in the refusal ("validate", "deploy").
    """
    config = load_config(purpose)
    if config is None:
        return None
    facts, node = gather(config)
    if node is None:
        fleet.record(host.name, purpose, probe_failed=True)
        return None
    fleet.record(host.name, purpose, facts=summary_facts(facts), plan=node.as_dict())
    if config.report_detail or fleet.verbose(state):
        # stderr, beside pyinfra's own log: stdout stays pure JSON under --json.
        print(render(host.name, facts, node), file=sys.stderr, flush=True)
    write_report(facts, config, node)
    if not node.ok:
        refuse(f"{purpose} refused, nothing changed: {blockers_text(node)}")
        return None
    return node
