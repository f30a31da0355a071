"""Serving groups in a pyinfra run (issue 38): each member's place, read from the whole inventory,
and the group's preflight once every member of the run is planned.

How one host's planning sees the others: never by connecting to them. Each member plans alone
(its own probe, which asks for the route to the head); its plan's summary is kept here
(``arrive``), and the member whose arrival completes the group (every other member arrived, or
is not coming: outside ``--limit``, failed to connect) runs the preflight over the summaries
(bringup/group_preflight.py). pyinfra 3.10 caches no fact: reading another member's facts with
``inventory.get_host(name).get_fact(...)`` would run that node's probe (and its gpu_diag) a
second time, and connect to hosts ``--limit`` left out. pyinfra loads the deploy file of every
host before it executes any operation (pyinfra_cli/util.py ``_parallel_load_hosts``), and no
arrival waits for another (a ``--parallel 1`` run loads hosts one by one), so the preflight runs
before anything changes. Its findings go into each member's saved report and its fleet record,
and a member still active is failed when they block it (rollback.py: only GROUP_MEMBERS_MISSING
among them, bringup/release.py ROLLBACK_BLOCKERS). What happens once the run executes is
control/group_gate.py's.
"""

import hashlib
import sys

from pyinfra import logger
from pyinfra.api.exceptions import PyinfraError

from bringup.group_inventory import membership as group_membership
from bringup.group_preflight import member_summary, preflight, rendezvous_findings
from bringup.release import rollback_blockers
from bringup.setting_checks import cut
from control import fleet, rendezvous, reports

class Arrivals:
    """What this process saw of each group's members: host -> what the preflight needs."""

    def __init__(self):
        self.members = {}     # group -> its Members (rank order)
        self.entries = {}     # group -> host -> {"summary", "facts", "config", "node"} or {"missing": why}
        self.done = set()


ARRIVALS = Arrivals()


def membership(state, name, config):
    """(Member, route target) of host ``name`` from the whole inventory (members outside --limit
    too), or (None, "") when it serves alone. Raises GroupError (one line) for a group that
    cannot be made."""
    if not config.service_group:
        return None, ""
    member, route_to = group_membership({host.name: host.data.dict() for host in state.inventory}, name)
    ARRIVALS.members[config.service_group] = member.group_members
    return member, route_to


def not_in_run(state, members, arrived):
    """host -> why a member of ``members`` will not arrive in this run.

    A member outside --limit (or --exclude) never runs the deploy file, nor does one pyinfra could
    not connect to (it is failed before any deploy file runs)."""
    missing = {}
    for member in members:
        host = state.inventory.get_host(member.host)
        if member.host in arrived:
            continue
        if not state.is_host_in_limit(host):
            missing[member.host] = "outside --limit/--exclude"
        elif host in state.failed_hosts:
            why = fleet.RUN.connect_errors.get(member.host)
            missing[member.host] = f"unreachable: {cut(why, 120)}" if why else "failed before its plan"
    return missing


def lock_digests(node):
    """sha256 of each lock the plan names (the control side's files), "" for one not readable."""
    digests = {}
    for path in (node.venv.lock if node.venv else "", node.toolkit.lock if node.toolkit else ""):
        if path:
            try:
                with open(path, "rb") as handle:
                    digests[path] = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                digests[path] = ""
    return digests


def arrive(state, purpose, name, group, entry):
    """Record member ``name``'s arrival (its plan, or why it has none) and, when that completes
    its group, run the preflight: its findings are added to every planned member's plan, whose
    report and fleet record are rewritten. Returns the findings (empty until the group is
    complete, or when it is whole and alike)."""
    entries = ARRIVALS.entries.setdefault(group, {})
    entries[name] = entry
    members = ARRIVALS.members.get(group)
    if members is None or group in ARRIVALS.done:
        return []
    missing = not_in_run(state, members, entries)
    pending = [m.host for m in members if m.host not in entries and m.host not in missing]
    if pending:
        return []
    ARRIVALS.done.add(group)
    missing.update({host: value["missing"] for host, value in entries.items() if "missing" in value})
    summaries = {host: value["summary"] for host, value in entries.items() if "summary" in value}
    findings = preflight(members, entries_args(entries), summaries, missing)
    if not missing:
        # Every member is planned and connected: the head listens while the others try its port.
        head_unit = (entries[members[0].host].get("facts") or {}).get("service_unit") or {}
        findings += rendezvous_findings(members, *rendezvous.check(state, members, head_unit.get("active_state", "")))
    if findings:
        print(f"== serving group {group!r}: preflight of {len(members)} members\n"
              + "\n".join(f"  {f.code}: {f.message}; fix: {f.fix}" for f in findings), file=sys.stderr, flush=True)
    for host, value in entries.items():
        if "node" not in value:
            continue
        value["node"].findings.extend(findings)
        if host != name:
            settle(state, purpose, host, value, findings)
    return findings


def entries_args(entries):
    """The group's service_args (alike on every member: bringup/group.py refused it otherwise)."""
    for value in entries.values():
        if "config" in value:
            return value["config"].service_args
    return ""


def settle(state, purpose, host, value, findings):
    """A member planned before its group was complete: its report and record with the group's
    findings, and the member failed when they block it and it is still active."""
    node = value["node"]
    reports.save_host_report(host, value["facts"], value["config"].as_dict(), node.as_dict())
    fleet.record(host, purpose, plan=node.as_dict())
    blockers = [f for f in findings if f.severity == "blocker"]
    if purpose == "rollback":
        blockers = rollback_blockers(blockers)
    target = state.inventory.get_host(host)
    if blockers and target in state.active_hosts:
        target.log_styled(f"{purpose} refused, nothing changed: {', '.join(f.code for f in blockers)}",
                          fg="red", log_func=logger.error)
        try:
            state.fail_hosts({target})
        except PyinfraError:
            if state.active_hosts:
                raise


def summary_entry(facts, config, node):
    """A planned member's arrival."""
    return {"summary": member_summary(facts, config, node, lock_digests(node)), "facts": facts, "config": config,
            "node": node}


def missing_entry(record):
    """The arrival of a member refused before its plan, from what the run recorded of it.

    >>> missing_entry({"settings_error": "gpu-b: setting x=1 is invalid: fix"}), missing_entry({})
    ({'missing': 'refused: gpu-b: setting x=1 is invalid: fix'}, {'missing': 'its probe failed'})
    """
    line = record.get("settings_error") or record.get("plan_error") or ""
    return {"missing": f"refused: {cut(line.splitlines()[0], 160)}" if line else "its probe failed"}

