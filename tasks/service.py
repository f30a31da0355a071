"""The SGLang systemd unit: written everywhere; enabled, started and restarted on change
where systemd runs and a model is set."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.files import Directory
from pyinfra.operations import systemd
from pyinfra.operations.util import any_changed

from tasks.operations.files import whole_template


@deploy("SGLang service")
def sglang_service(node, changes=()):
    """
    Render the unit; on a systemd host with a model, enable and start it, and restart a
    running service when its unit, its environment or its venv changed in this run
    (a run with no change restarts nothing). Drop-ins (sglang.service.d/) are the
    operator's and stay as they are.

    + node: the NodePlan (``service``)
    + changes: operations of this run whose change the running service must pick up
    """
    service = node.service
    unit = whole_template(name="SGLang systemd unit", src="files/templates/sglang.service.j2", dest=service.unit,
                          service=service)
    if not (host.get_fact(Directory, path="/run/systemd/system") and service.enable):
        return
    systemd.daemon_reload(name="Reload systemd (the unit changed)", _if=unit.did_change)
    started = systemd.service(name="Enable and start sglang", service="sglang.service", enabled=True,
                              running=True)
    changed = any_changed(unit, *changes)
    systemd.service(name="Restart sglang (its unit, environment or venv changed)", service="sglang.service",
                    restarted=True, _if=lambda: changed() and not started.did_change())
