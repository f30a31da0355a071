"""Put each host's SGLang service back on the release it ran before the last change.

    pyinfra inventory/gpu.py rollback.py

The previous release is the venv ``venvs/previous`` names with the unit and the env
file that went with it, as deploy recorded them (files/release.sh); rollback.py puts
all three back, reloads systemd, restarts the unit and waits with deploy's readiness
gate (``service_ready_timeout``), under deploy's per-node lock. A host with nothing to
go back to (no release recorded, a rollback already used it, its venv gone, an
external venv) is refused with one line, nothing changed; the other hosts go on.
"""

from pyinfra import host
from pyinfra.facts.files import Directory

from bringup.release import rollback_problem
from control.host_plan import planned_host
from tasks.deploy_lock import deploy_lock, deploy_lock_check, deploy_lock_release
from tasks.operations.release import rollback_refused
from tasks.rollback import sglang_rollback

node = planned_host("rollback")

if node:
    systemd = bool(host.get_fact(Directory, path="/run/systemd/system"))
    problem = rollback_problem(node.venv.managed, node.service.enable and systemd)
    if problem:
        rollback_refused(name="Refuse the rollback", problem=problem)
    else:
        deploy_lock(node)
        deploy_lock_check("rollback")
        sglang_rollback(node)
        deploy_lock_release()
