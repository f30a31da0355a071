"""Put each host's SGLang service back on the release it ran before the last change.

    pyinfra inventory/gpu.py rollback.py

The previous release is the venv ``venvs/previous`` names with the unit and the env
file that went with it, as deploy recorded them (files/release.sh); rollback.py puts
all three back, reloads systemd, restarts the unit and waits with deploy's readiness
gate (``service_ready_timeout``), under deploy's per-node lock. A host with nothing to
go back to (no release recorded, a rollback already used it, its venv gone, an
external venv) is refused with one line, nothing changed; the other hosts go on.

It judges what it restores, not the settings of the change: the plan's blockers
(``MODEL_UNAVAILABLE`` of the model that failed, ...) refuse no rollback, except those
about the safety of the paths it writes (``bringup.release.ROLLBACK_BLOCKERS``); the
release recorded on the node is looked at first (there, complete, its venv present).

A serving group's members go back together or not at all: the run takes the whole group
(``--limit`` on part of it is refused), and a member that cannot go back keeps every member
where it is, naming it.
"""

from pyinfra import host
from pyinfra.facts.files import Directory

from bringup.release import rollback_blockers, rollback_problem
from control import group_gate
from control.host_plan import planned_host
from facts.release import ReleaseLook, release_paths
from tasks.deploy_lock import deploy_lock, deploy_lock_check, deploy_lock_release
from tasks.operations.release import rollback_refused
from tasks.rollback import sglang_rollback

node = planned_host("rollback", blocking=rollback_blockers)

if node:
    systemd = bool(host.get_fact(Directory, path="/run/systemd/system"))
    look = host.get_fact(ReleaseLook, **release_paths(node.layout)) if node.venv.managed else None
    problem = rollback_problem(node.venv.managed, node.service.enable and systemd, look)
    if node.group is not None:
        # Every member's problem is known before any member executes (control/group_gate.py).
        group_gate.join(node.group, host.name)
        group_gate.note_rollback_problem(host.name, problem)
    if problem:
        rollback_refused(name="Refuse the rollback", problem=problem)
    else:
        deploy_lock(node)
        deploy_lock_check("rollback")
        sglang_rollback(node)
        deploy_lock_release()
