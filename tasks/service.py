"""The SGLang systemd unit: written everywhere, enabled where systemd runs and a model is set."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.files import Directory
from pyinfra.operations import systemd

from tasks.operations.files import whole_template


@deploy("SGLang service")
def sglang_service(node):
    """
    Render the unit; enable and start it only on a systemd host with a model.

    + node: the NodePlan (``service``)
    """
    service = node.service
    unit = whole_template(name="SGLang systemd unit", src="files/templates/sglang.service.j2", dest=service.unit,
                          service=service)
    if host.get_fact(Directory, path="/run/systemd/system") and service.enable:
        systemd.service(name="Enable and start sglang", service="sglang.service", enabled=True, running=True,
                        daemon_reload=unit.did_change)
