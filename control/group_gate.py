"""A serving group's members restarted, gated and rolled back as one, within one pyinfra run
(deploy.py, rollback.py).

pyinfra runs each operation on every active host before the next operation starts, and fails the
hosts an operation failed on only after every host ran it (pyinfra/api/operations.py
``_run_single_op``; ``--serial`` and ``--no-wait`` run otherwise, and a group is refused under them:
``run_problem``). So each member registers, while its deploy file loads, what the group needs of it
(``join``: whether its own change asks for a restart), and the group's operations ask the group
while they execute: the restart's ``_if`` whether any member changed (``changed``), the gate's
verdict whether every member serves (``verdict``), the rollback whether every member can go back
(``rollback_problems``). Nothing here connects to a host: what a member showed is what its own
operations recorded (control/fleet.py).
"""

from bringup.group import group_verdict
from bringup.serving import serving_of
from bringup.summary import ERROR
from control import fleet


class GroupRun:
    """What this process knows of each serving group while the run executes."""

    def __init__(self):
        self.members = {}    # group -> its hosts in rank order
        self.changes = {}    # group -> host -> (its operations whose change asks for a restart, pending)
        self.problems = {}   # group -> host -> why the member cannot go back ("" when it can)


RUN = GroupRun()


def join(group, name, changes=None, pending=False):
    """Register member ``name`` of ``group`` (a GroupPlan) for this run. ``changes``: the operations
    (pyinfra OperationMeta) whose change asks its service to restart; ``pending``: it asks for a
    (re)start whatever they do (a change live on the node that was not started, its unit not
    running). None: the member does not restart in this run (rollback.py)."""
    RUN.members[group.name] = tuple(group.members)
    if changes is not None:
        RUN.changes.setdefault(group.name, {})[name] = (tuple(changes), pending)


def _asks(changes, pending):
    """Whether a member asks for a restart: its operations that ran and changed something (one
    that did not run, its host failed before it, says nothing), or ``pending``."""
    return pending or any(meta.is_complete() and meta.did_change() for meta in changes)


def group_of(name):
    """The group host ``name`` joined in this run, or None."""
    return next((group for group, members in RUN.members.items() if name in members), None)


def changed(group):
    """Whether any member's change asks for a restart: then every member restarts (a member
    restarted alone breaks the group's collectives, and the others' processes fail with it)."""
    return any(_asks(*asked) for asked in RUN.changes.get(group, {}).values())


def failures(state, group):
    """host -> why each member failed in this run: its first failed operation and its error."""
    found = {}
    for host in state.inventory:
        if host.name in RUN.members.get(group, ()) and host in state.failed_hosts:
            errors = [op for op in fleet.operations_of(state, host) if op["status"] == ERROR]
            found[host.name] = (": ".join(part for part in (errors[0]["name"], errors[0]["error"]) if part)
                                if errors else "refused or unreachable")
    return found


def held(state, group):
    """Why ``group`` may not be restarted in this run ("" when it may): a member failed earlier
    in the run, or its service step does not run in it (the driver waits for a reboot,
    ``deploy_steps`` leaves it out, the service is not enabled there). Restarting the others
    would leave them waiting for it."""
    joined, failed = RUN.changes.get(group, {}), failures(state, group)
    return "; ".join(f"{member}: failed ({failed[member]})" if member in failed else
                     f"{member}: its service step does not run in this run"
                     for member in RUN.members.get(group, ()) if member in failed or member not in joined)


def verdict(state, name):
    """(serving, why) of host ``name``'s group as one (bringup.group.group_verdict over every
    member's last gate of this run), or None when ``name`` is in no group. A member that failed
    before its gate counts only when the group restarted: otherwise the others serve on as they
    did, and its failure is its own."""
    group = group_of(name)
    if group is None:
        return None
    members = RUN.members[group]
    gates = {member: serving_of(fleet.recorded(member, "service_serving")) for member in members
             if fleet.recorded(member, "service_serving")}
    failed = {member: why for member, why in failures(state, group).items()
              if member not in gates} if changed(group) else {}
    serving, why = group_verdict(members, gates, failed)
    return serving, (f"serving group {group!r} is not serving as one: {why}" if why else "")


def note_rollback_problem(name, problem):
    """Record why member ``name`` cannot go back to its previous release ("" when it can)."""
    group = group_of(name)
    if group is not None:
        RUN.problems.setdefault(group, {})[name] = problem


def rollback_problems(state, name):
    """``host: why`` of each member of ``name``'s group that cannot go back, "" when every member
    can (or ``name`` is in no group): a group goes back whole or not at all. A member failed in
    this run, or that never looked (refused before its rollback, not in the run), cannot."""
    group = group_of(name)
    if group is None:
        return ""
    problems, failed = RUN.problems.get(group, {}), failures(state, group)
    lines = []
    for member in RUN.members[group]:
        if problems.get(member):  # what it found says more than the operation that refused it
            lines.append(f"{member}: {problems[member]}")
        elif member in failed:
            lines.append(f"{member}: failed in this run ({failed[member]})")
        elif member not in problems:
            lines.append(f"{member}: did not look (not in this rollback)")
    return "; ".join(lines)


def run_problem(purpose, argv):
    """Why this run cannot change a serving group as one ("" when it can): ``--serial`` and
    ``--no-wait`` run a host's operations apart from the others' (a member restarted and gated
    alone). ``--parallel`` below the group's size is no problem: pyinfra still runs each
    operation on every batch before the next operation, so every member is restarted before any
    gate waits.

    >>> run_problem("deploy", ["pyinfra", "inv.py", "deploy.py", "--serial"])[:43]
    'deploy runs each host on its own (--serial)'
    >>> run_problem("validate", ["pyinfra", "--serial"]), run_problem("rollback", ["--parallel", "1"])
    ('', '')
    """
    if purpose not in ("deploy", "rollback"):
        return ""
    for flag in ("--serial", "--no-wait"):
        if flag in argv:
            return (f"{purpose} runs each host on its own ({flag}), and a serving group's members are restarted "
                    f"and gated together: run {purpose} without {flag}")
    return ""
