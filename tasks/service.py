"""The SGLang systemd unit: written everywhere, enabled where systemd runs and a model is set."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.files import Directory
from pyinfra.operations import files, systemd

from tasks.sglang_venv import service_home

UNIT = "/etc/systemd/system/sglang.service"


@deploy("SGLang service")
def sglang_service(config):
    """
    Render the unit; enable and start it only on a systemd host with a model.

    + config: the host's ``bringup.config.Config``
    """
    unit = files.template(name="SGLang systemd unit", src="files/templates/sglang.service.j2", dest=UNIT,
                          user="root", group="root", mode="0644", service_user=config.service_user,
                          env_file=config.service_env_file, home=service_home(config), venv=config.venv_path,
                          model=config.service_model, bind="0.0.0.0", port=config.service_port,
                          args=config.service_args)
    if host.get_fact(Directory, path="/run/systemd/system") and config.service_model:
        systemd.service(name="Enable and start sglang", service="sglang.service", enabled=True, running=True,
                        daemon_reload=unit.did_change)
