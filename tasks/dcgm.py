"""NVIDIA's DCGM at its lock's versions (opt-in: ``gpu_diag_install``), its host engine
(``nvidia-dcgm``) enabled and started: what ``dcgmi diag`` (``gpu_diag``) needs."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.files import Directory
from pyinfra.operations import apt, systemd

from tasks.operations.cuda import finish_interrupted_dpkg
from tasks.operations.packages import APT_ENV, lock_timeout_option


@deploy("NVIDIA DCGM")
def nvidia_dcgm(node):
    """
    Install the plan's DCGM packages at their locked versions (nothing at all without
    ``gpu_diag_install``), then enable and start the host engine's unit.

    + node: the NodePlan (``dcgm``, ``apt_lock_timeout``); apt's lists are fresh
      (tasks/locks_served.py)
    """
    dcgm = node.dcgm
    if not dcgm.install:
        return
    finish_interrupted_dpkg(name="Finish an interrupted dpkg run", packages=[pin.partition("=")[0] for pin in dcgm.pins])
    # Exactly the lock's packages: recommends would pull packages the lock does not pin.
    installed = apt.packages(name=f"Install NVIDIA DCGM at {dcgm.lock}'s versions", packages=list(dcgm.pins),
                             no_recommends=True, allow_downgrades=True,
                             extra_install_args=lock_timeout_option(node.apt_lock_timeout), _env=APT_ENV)
    if not host.get_fact(Directory, path="/run/systemd/system"):
        return  # no systemd here (an image build): the unit starts at the node's boot
    # NVIDIA's packages restart nothing when they are upgraded or downgraded (their postinst
    # only adds the service user): a host engine started before keeps running the old
    # binaries until it is restarted, so a lock moved to another release restarts it, and so
    # does an engine the probe found older than the installed packages (a run stopped between
    # apt and the restart: on the re-run apt changes nothing). Enabling and starting are two
    # operations: a running engine whose unit was disabled is enabled and still restarted.
    systemd.daemon_reload(name="Reload systemd (DCGM's packages changed)", _if=installed.did_change)
    systemd.service(name=f"Enable {dcgm.unit}", service=f"{dcgm.unit}.service", enabled=True)
    started = systemd.service(name=f"Start {dcgm.unit}", service=f"{dcgm.unit}.service", running=True)
    systemd.service(name=f"Restart {dcgm.unit} (its packages changed)", service=f"{dcgm.unit}.service",
                    restarted=True, _if=lambda: (dcgm.restart or installed.did_change()) and not started.did_change())
