"""The SGLang service put back on its previous release (the venv link's target, the unit
and the env file that went with it), restarted, and waited for with deploy's readiness
gate: rollback.py's one task, and deploy's under ``service_rollback: on-failure``."""

from pyinfra import host, state
from pyinfra.api import deploy
from pyinfra.operations import server

from control import group_gate
from facts.release import release_command
from tasks.operations.group import NOT_ROLLED_BACK, group_release_checked, group_stopped
from tasks.operations.release import ROLLED_BACK, release_restored, rollback_state
from tasks.operations.serving import service_serving


def rolled_back():
    """Whether this run put the current host back on its previous release."""
    return rollback_state(host.name) == ROLLED_BACK


@deploy("SGLang rollback")
def sglang_rollback(node, purpose="rollback", when=None):
    """
    Put the previous release back (refused, nothing changed, when there is none or its
    venv is gone), reload systemd, restart the unit on it and wait until it serves.

    + node: the NodePlan (``layout``, ``service``)
    + purpose: "rollback" (rollback.py) or "deploy" (after deploy's gate failed)
    + when: a callable: roll back only if it says so when the run gets there (deploy:
      the gate failed); None: always

    A serving group's member goes back only with every other member (control/group_gate.py).
    """
    layout, unit_name = node.layout, node.layout.unit_name
    group = node.group
    if group is not None:
        # A serving group goes back whole or not at all: every member looks first (rollback.py's
        # members looked as they were planned), and none goes back while one cannot.
        group_gate.join(group, host.name)
        asked = when or (lambda: True)
        if purpose == "deploy":
            group_release_checked(name="Look whether this member can go back (the group goes back whole)",
                                  layout=layout, _if=asked)
        group_stopped(name="The serving group goes back whole or not at all", group=group.name,
                      stage=NOT_ROLLED_BACK, purpose=purpose,
                      _if=lambda: asked() and bool(group_gate.rollback_problems(state, host.name)))
        when = lambda: asked() and not group_gate.rollback_problems(state, host.name)  # noqa: E731
    release_restored(name="Put the previous release back", layout=layout, unit_name=unit_name, purpose=purpose,
                     **({"_if": when} if when else {}))
    # systemd's own restart, always: the unit file changed under it, and a unit that
    # crash-loops is restarted as well as one that runs. Only then is the release restored
    # current and no longer the rollback (release.sh settle): a run killed before the
    # restart is re-run whole (restore, restart), and a deploy restarts for it (pending).
    server.shell(name="Reload systemd and restart sglang on the previous release",
                 commands=[f"systemctl daemon-reload && systemctl restart {unit_name}",
                           release_command(layout, "settle")], _if=rolled_back)
    service_serving(name="Wait for sglang to serve (the previous release)", service=node.service,
                    unit_name=unit_name, purpose=purpose, _if=rolled_back)
