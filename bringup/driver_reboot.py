"""Whether the driver deploy installed is the one loaded, and what deploy does when it is
not (pure: the driver_layer fact's ``module`` and the plan's DriverPlan in, a decision
out). A kernel module only changes at a boot: ``driver_reboot: never`` leaves the host
``needs reboot``; ``if-needed`` reboots it, unless its service is serving and
``driver_reboot_serving`` is off.

    >>> from bringup.plan.model import DriverPlan
    >>> plan = DriverPlan(manage=True, version="580.95.05", flavour="open", reboot="if-needed")
    >>> reboot_decision(plan, module_mismatch({"loaded": False}, plan))
    ('reboot', 'loaded: none; installed: 580.95.05 open')
"""

from itertools import groupby

from packaging.version import InvalidVersion, Version

# What deploy does about the loaded module (reboot_decision's first value).
GO, NEEDS_REBOOT, REBOOT = "go", "needs reboot", "reboot"
# The driver step's state for the fleet summary when, rebooted and planned again, it found more
# to do than this run planned (driver_step_grown): the host stops there, healthy (``stopped``).
REPLANNED = "replanned"


def boot_order(release):
    """A kernel release's place in the boot menu: GRUB's grub-mkconfig lists the installed
    kernels newest first by ``sort -V`` (grub-mkconfig_lib ``version_sort``), and its default
    entry is the first. Runs of digits compare as numbers, the rest as text, as ``sort -V``
    does for kernel release names.

    >>> sorted(["6.1.0-9-amd64", "6.1.0-28-amd64", "6.12.48+deb13-amd64"], key=boot_order)
    ['6.1.0-9-amd64', '6.1.0-28-amd64', '6.12.48+deb13-amd64']
    """
    return tuple((0, int(run), "") if digits else (1, 0, run)
                 for digits, run in ((key, "".join(chars)) for key, chars in groupby(release, str.isdigit)))


def next_boot_kernels(kernel):
    """The installed kernels a boot may start besides the running one (``driver_layer.kernel``):
    those newer than it, the newest being GRUB's default. Older kernels stay in the menu as
    fallbacks a person picks by hand; their headers are often gone from the archive.

    >>> next_boot_kernels({"release": "6.1.0-26-amd64", "installed": [{"release": "6.1.0-9-amd64"},
    ...     {"release": "6.1.0-26-amd64"}, {"release": "6.1.0-28-amd64"}]})
    ['6.1.0-28-amd64']
    """
    running = kernel.get("release") or ""
    return [entry["release"] for entry in kernel.get("installed") or []
            if entry.get("release") and (not running or boot_order(entry["release"]) > boot_order(running))]


def same_version(found, wanted):
    """Whether two driver versions are one ("580.95.05" and "580.95.5" are).

    >>> same_version("580.95.05", "580.95.5"), same_version("570.86.15", "580.95.05"), same_version("x", "x")
    (True, False, True)
    """
    try:
        return Version(found) == Version(wanted)
    except InvalidVersion:
        return found == wanted


def module_text(module):
    """The loaded module, as the reasons say it.

    >>> module_text({"loaded": True, "version": "570.86.15", "flavour": "proprietary"}), module_text(None)
    ('570.86.15 proprietary', 'none')
    >>> module_text({"loaded": True, "version": "580.95.05", "flavour": None})
    '580.95.05'
    """
    if not module or not module.get("loaded") or not module.get("version"):
        return "none"
    return " ".join(part for part in (module["version"], module.get("flavour")) if part)


def module_mismatch(module, driver):
    """Why the loaded module (the driver_layer fact's ``module``) is not the plan's
    ``version`` and ``flavour``, or "" when it is (a flavour the kernel does not say,
    /sys/module/nvidia/version alone, is not held against it).

    >>> from bringup.plan.model import DriverPlan
    >>> plan = DriverPlan(manage=True, version="580.95.05", flavour="open")
    >>> module_mismatch({"loaded": True, "version": "580.95.05", "flavour": "open"}, plan)
    ''
    >>> module_mismatch({"loaded": True, "version": "580.95.05", "flavour": "proprietary"}, plan)
    'loaded: 580.95.05 proprietary; installed: 580.95.05 open'
    """
    if module and module.get("loaded") and module.get("version") and same_version(module["version"], driver.version) \
            and module.get("flavour") in (None, driver.flavour):
        return ""
    return f"loaded: {module_text(module)}; installed: {driver.version} {driver.flavour}".rstrip()


def reboot_decision(driver, mismatch):
    """What deploy does, and why: ``(GO, "")`` when nothing is to wait for (no managed
    driver, or the loaded module is the plan's); ``(NEEDS_REBOOT, reason)`` when the host
    is left for the operator to reboot; ``(REBOOT, reason)`` when deploy reboots it.

    + driver: the DriverPlan
    + mismatch: ``module_mismatch``'s answer (at plan time: ``driver.reboot_for``)

    >>> from bringup.plan.model import DriverPlan
    >>> serving = DriverPlan(manage=True, reboot="if-needed", service_active=True)
    >>> reboot_decision(serving, "loaded: none; installed: 580.95.05 open")[0]
    'needs reboot'
    """
    if not driver.manage or not mismatch:
        return GO, ""
    if driver.reboot != "if-needed":
        return NEEDS_REBOOT, f"{mismatch} (driver_reboot: never: reboot the host, then run deploy again)"
    if driver.service_active and not driver.reboot_serving:
        return NEEDS_REBOOT, (f"{mismatch} (the service is active and driver_reboot_serving is false: reboot the "
                              "host when it may stop serving, then run deploy again)")
    return REBOOT, mismatch


def driver_ready(driver):
    """Whether the steps that need the loaded driver (the service, a pre-warm on the
    device) run in this deploy: not when the plan already says the host will need a
    reboot that deploy does not do.

    >>> from bringup.plan.model import DriverPlan
    >>> driver_ready(DriverPlan(manage=False)), driver_ready(DriverPlan(manage=True, reboot_for="loaded: none"))
    (True, False)
    >>> driver_ready(DriverPlan(manage=True, reboot_for="loaded: none", reboot="if-needed"))
    True
    """
    return reboot_decision(driver, driver.reboot_for)[0] != NEEDS_REBOOT


def driver_step_grown(ran, replanned):
    """What the plan made again after the reboot asks of the driver step beyond what this run
    did (``ran``, the first plan's DriverPlan): packages or units the loaded driver showed a
    need for, in words; ``""`` when nothing. A node with no driver shows no NVSwitch until its
    module is loaded, so Fabric Manager first appears in the plan made after that boot; the
    steps after the driver were planned before it (the unit's ordering after Fabric Manager
    among them), so the run stops there and the next one converges whole.

    >>> from bringup.plan.model import DriverPlan
    >>> ran = DriverPlan(manage=True, install=("nvidia-open=580.95.05-1",), units=("nvidia-persistenced",))
    >>> driver_step_grown(ran, ran)
    ''
    >>> driver_step_grown(ran, DriverPlan(manage=True, install=("nvidia-open=580.95.05-1",
    ...     "nvidia-fabricmanager=580.95.05-1"), units=("nvidia-persistenced", "nvidia-fabricmanager")))
    'installs nvidia-fabricmanager=580.95.05-1, starts nvidia-fabricmanager'
    """
    added = [pin for pin in replanned.install if pin not in ran.install]
    started = [unit for unit in replanned.units if unit not in ran.units]
    return ", ".join(part for part in (added and f"installs {' '.join(added)}",
                                        started and f"starts {' '.join(started)}") if part)
