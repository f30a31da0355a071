"""NVIDIA's driver at the lock's branch, version and flavour (opt-in: ``driver_manage``),
held, kept out of unattended-upgrades, nouveau blacklisted; its units started once the
module is loaded, the host rebooted where ``driver_reboot: if-needed`` allows it."""

from functools import partial
from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.files import Directory
from pyinfra.operations import systemd
from pyinfra.operations.util import any_changed

from bringup.layout import DEPLOY_LOCK, ProbeInputs
from control import run
from control.host_plan import replanned_host
from tasks.deploy_lock import control_identity
from tasks.operations.cuda import finish_interrupted_dpkg
from tasks.operations.driver import (
    LOADED,
    driver_module_loaded,
    driver_packages,
    initramfs_updated,
    needs_reboot_failed,
    packages_held,
)
from tasks.operations.files import whole_file
from tasks.operations.packages import system_packages


@deploy("NVIDIA driver")
def nvidia_driver(node, later_steps=True):
    """
    Converge the driver the plan names (nothing at all with ``driver_manage`` off): an
    interrupted dpkg run finished first, kernel headers, the locked packages with the
    other flavour purged, held, the unattended-upgrades file, the nouveau blacklist and
    initramfs; then the loaded module is read again (needs reboot, or a reboot) and the
    driver's units enabled and started once it is the plan's.

    + node: the NodePlan (``driver``, ``repo``, ``layout``, ``deploy_lock_timeout``)
    + later_steps: whether this deploy runs steps that need the driver after this one
    """
    driver = node.driver
    if not driver.manage:
        return
    names = [pin.partition("=")[0] for pin in driver.install]
    finish_interrupted_dpkg(name="Finish an interrupted dpkg run (a killed DKMS build included)", packages=names)
    if driver.headers:
        system_packages(name=f"Install the installed kernels' headers ({', '.join(driver.headers)})",
                        packages=list(driver.headers), timeout=node.apt_lock_timeout)
    driver_packages(name=f"Install NVIDIA driver {driver.version} ({driver.flavour}) at {driver.lock}'s versions",
                    install=list(driver.install), remove=list(driver.remove), timeout=node.apt_lock_timeout)
    held_at = "their versions (Canonical's, adopted)" if driver.canonical == "adopt" else "the lock's versions"
    packages_held(name=f"Hold the driver's packages at {held_at}", packages=list(driver.hold))
    if driver.unattended_file:
        whole_file(name="Keep the driver's packages out of unattended-upgrades", src=StringIO(driver.unattended),
                   dest=driver.unattended_file, mode="0644")
    if driver.blacklist_file or driver.initramfs:
        # The initramfs converges on what it holds (the probe's ``initramfs`` of each kernel),
        # not on whether this run wrote the blacklist: a run killed between the two re-runs it.
        wrote = any_changed()
        if driver.blacklist_file:
            wrote = any_changed(whole_file(name="Blacklist nouveau", src=StringIO(driver.blacklist),
                                           dest=driver.blacklist_file, mode="0644"))
        initramfs_updated(name="Update the initramfs (nouveau blacklisted)", kernels=list(driver.initramfs),
                          _if=lambda: bool(driver.initramfs) or wrote())
    relock = {"lock": DEPLOY_LOCK, "run_id": run.run_id(), "timeout": node.deploy_lock_timeout, "control": control_identity(),
              "stage_mark": run.STAGE_MARK, "stage_dirs": node.layout.stage_dirs}
    driver_module_loaded(name=f"Check the loaded module is {driver.version} {driver.flavour}", driver=driver,
                         inputs=ProbeInputs(node.layout), revalidate=partial(replanned_host, "deploy"), relock=relock,
                         later_steps=later_steps)
    if not host.get_fact(Directory, path="/run/systemd/system"):
        return  # no systemd here (an image build): the units start at the node's boot
    for unit in driver.units:
        systemd.service(name=f"Enable and start {unit}", service=f"{unit}.service", enabled=True, running=True,
                        _if=lambda: LOADED.get(host.name, False))


@deploy("NVIDIA driver")
def nvidia_driver_outcome(node):
    """
    At the end of the deploy: a host the driver step left needing a reboot fails with its
    reason (the summary's ``needs reboot``, exit status 1).

    + node: the NodePlan (``driver``)
    """
    if node.driver.manage and node.runs("driver"):
        needs_reboot_failed(name="Needs reboot (the installed driver is not the loaded module)?")
