"""The driver step (``driver_manage``): what deploy does to converge NVIDIA's
driver, and the driver layer's findings as the fixes deploy makes.

``driver_plan(context, repo)`` decides the ``DriverPlan`` from the facts (``gpus``, else
the GPUs on PCI; ``driver_layer``: docs/facts.md), the settings and the driver lock
(``files/locks/driver-<branch>-<distro>-<machine>.txt``, bringup/driver_locks.py).
``as_fixes(findings, driver)`` turns the findings of bringup/plan/driver.py (and the
driver's floors, bringup/plan/gpus.py) that the plan's driver step cures into ``fix``
findings naming what deploy will do; with ``driver_manage: false`` nothing changes.

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> driver_plan(PlanContext.of({}, Config(), None, print), None)
    DriverPlan(manage=False, branch='', version='', flavour='', lock='', install=(), remove=(), hold=(), \
headers=(), units=(), blacklist_file='', blacklist='', initramfs=(), unattended_file='', unattended='', \
reboot_for='', reboot='never', reboot_serving=False, reboot_timeout=900, service_active=False, changes=(), \
canonical='', canonical_packages=(), canonical_reason='')
"""

from dataclasses import replace

from bringup.canonical_driver import PREBUILT, adoption, canonical_driver, names
from bringup.driver_locks import driver_input_name, driver_lock_name, parse_driver_lock
from bringup.driver_reboot import REBOOT, next_boot_kernels, reboot_decision, same_version
from bringup.gpu_archs import FIRST_OPEN_MODULE_SM, NVLINK5_MAJORS, OPEN_ONLY_MAJORS
from bringup.gpu_ids import pci_gpus_sms
from bringup.findings import BLOCKER, FIX, WARNING, Finding
from bringup.locks import LockError
from bringup.plan.imex import IMEX_GUIDE, imex_node
from bringup.plan.model import DriverPlan
from bringup.versions import parse

NOUVEAU_FILE = "/etc/modprobe.d/gpu-bringup-nouveau.conf"
NOUVEAU_TEXT = "blacklist nouveau\noptions nouveau modeset=0\n"
UNATTENDED_FILE = "/etc/apt/apt.conf.d/51gpu-bringup-driver"
# NVIDIA's open kernel modules drive Turing and newer, older GPUs need the proprietary
# ones, Blackwell runs on the open ones only: the open-module column of the one table of
# GPU architectures (bringup/gpu_archs.py: FIRST_OPEN_MODULE_SM, OPEN_ONLY_MAJORS); mixed
# nodes keep the proprietary driver.
# The units deploy enables and starts once the module is loaded; Fabric Manager starts
# NVLSM itself on NVLink5 (Fabric Manager user guide, fourth-generation NVSwitches).
PERSISTENCED, FABRICMANAGER = "nvidia-persistenced", "nvidia-fabricmanager"
# A Grace-Blackwell compute tray (GB200, GB300) runs IMEX instead of Fabric Manager (NVIDIA
# IMEX user's guide, docs.nvidia.com/multi-node-nvlink-systems/imex-guide/): the lock's
# ``imex`` role, and its unit started, where the lock has it.
IMEX = "nvidia-imex"


def node_sms(facts):
    """The SMs of the node's GPUs: nvidia-smi's, else those of the GPUs on PCI (no driver
    loaded), as Versions.

    >>> node_sms({"gpus": [{"compute_cap": "12.0"}, {"compute_cap": "[N/A]"}]})
    (<Version('12.0')>,)
    """
    sms = {parse(gpu.get("compute_cap")) for gpu in facts.get("gpus") or []} - {None}
    return tuple(sorted(sms)) or pci_gpus_sms(facts)


def flavour_for(setting, sms):
    """The kernel module flavour: the setting's, else (``auto``) open unless a GPU is older
    than Turing; open when the GPUs are unknown (NVIDIA's default since 560).

    >>> from packaging.version import Version
    >>> flavour_for("auto", (Version("12.0"),)), flavour_for("auto", (Version("7.0"),)), flavour_for("auto", ())
    ('open', 'proprietary', 'open')
    """
    if setting != "auto":
        return setting
    return "proprietary" if any(sm < FIRST_OPEN_MODULE_SM for sm in sms) else "open"


def blacklist_pattern(name):
    r"""A package name as the regular expression unattended-upgrades matches: dpkg's
    names (facts: ``[a-z0-9+.-]``) hold one regex quantifier, ``+`` (a ``.`` matches
    itself among the rest).

    >>> blacklist_pattern("libstdc++6"), blacklist_pattern("nvidia-driver-pinning-580.95.05")
    ('libstdc\\+\\+6', 'nvidia-driver-pinning-580.95.05')
    """
    return name.replace("+", "\\+")


def unattended_text(names):
    """The apt.conf snippet keeping ``names`` out of unattended-upgrades (its
    ``Package-Blacklist`` takes regular expressions).

    >>> print(unattended_text(["nvlsm", "libstdc++6"]), end="")
    // gpu-bringup (driver_manage): NVIDIA's driver moves only when its lock does (make lock, deploy).
    Unattended-Upgrade::Package-Blacklist {
        "^nvlsm$";
        "^libstdc\\+\\+6$";
    };
    """
    lines = ["// gpu-bringup (driver_manage): NVIDIA's driver moves only when its lock does (make lock, deploy).",
             "Unattended-Upgrade::Package-Blacklist {", *(f'    "^{blacklist_pattern(name)}$";' for name in names), "};"]
    return "\n".join(lines) + "\n"


def kernel_headers(kernel):
    """The headers packages to install: the running kernel's and those of every installed
    kernel the next boot may start (``driver_layer.kernel``: the newer ones,
    ``next_boot_kernels``), where they are missing. An older kernel's headers are not asked
    for: it is a fallback picked by hand, and the archive has often dropped them.

    >>> kernel_headers({"release": "6.1.0-26-amd64", "headers": True, "installed": [
    ...     {"release": "6.1.0-26-amd64", "headers": True, "initramfs": "current"},
    ...     {"release": "6.1.0-28-amd64", "headers": False, "initramfs": "current"},
    ...     {"release": "6.1.0-9-amd64", "headers": False, "initramfs": "current"}]})
    ('linux-headers-6.1.0-28-amd64',)
    """
    release = kernel.get("release")
    missing = [release] if release and not kernel.get("headers") else []
    later = set(next_boot_kernels(kernel))
    missing += [entry["release"] for entry in kernel.get("installed") or []
                if entry.get("release") in later and not entry.get("headers")]
    return tuple(f"linux-headers-{name}" for name in dict.fromkeys(missing))


def initramfs_kernels(kernel, blacklisted):
    """The kernels whose initramfs deploy updates: with the blacklist written by this deploy
    (``blacklisted`` False) every installed kernel that has one, else those whose initramfs
    does not hold the blacklist (``stale``: an update-initramfs that never ran, or a deploy
    interrupted after it wrote the blacklist). Empty where the probe saw no kernel: the
    blacklist's write then updates the newest one's (``update-initramfs -u``).

    >>> installed = [{"release": "a", "headers": True, "initramfs": "current"},
    ...              {"release": "b", "headers": True, "initramfs": "stale"},
    ...              {"release": "c", "headers": True, "initramfs": "none"}]
    >>> initramfs_kernels({"installed": installed}, True), initramfs_kernels({"installed": installed}, False)
    (('b',), ('a', 'b'))
    """
    wanted = ("stale",) if blacklisted else ("stale", "current")
    return tuple(entry["release"] for entry in kernel.get("installed") or [] if entry.get("initramfs") in wanted)


def _unit_running(layer, name):
    unit = (layer.get("units") or {}).get(name) or {}
    return unit.get("active_state") == "active" and unit.get("unit_file_state") == "enabled"


def reboot_reason(module, version, flavour):
    """Why the loaded module will not be the planned one until a boot ("" when it is).

    >>> reboot_reason({"loaded": False}, "580.95.05", "open")
    'loaded: none; installed after deploy: 580.95.05 open'
    >>> reboot_reason({"loaded": True, "version": "580.95.05", "flavour": "open"}, "580.95.05", "open")
    ''
    """
    if module.get("loaded") and module.get("version") and same_version(module["version"], version) \
            and module.get("flavour") == flavour:
        return ""
    loaded = (f"{module.get('version')} {module.get('flavour') or 'unknown flavour'}" if module.get("loaded")
              else "none")
    return f"loaded: {loaded}; installed after deploy: {version} {flavour}"


def driver_plan(context, repo):
    """The driver step's plan (``manage`` False with ``driver_manage: false``); a missing or
    unreadable lock is DRIVER_LOCK_MISSING, a proprietary flavour asked for Blackwell
    DRIVER_OPEN_MODULE_REQUIRED, the open one asked for pre-Turing GPUs
    DRIVER_PROPRIETARY_MODULE_REQUIRED (blockers: no flavour drives a node with both)."""
    config, facts, add = context.config, context.facts, context.add
    # deploy_steps without "driver" runs no driver step: validate must not promise its fixes.
    if not config.driver_manage or "driver" not in config.deploy_steps:
        return DriverPlan(manage=False)
    settings = dict(manage=True, branch=config.driver_branch, reboot=config.driver_reboot,
                    reboot_serving=config.driver_reboot_serving, reboot_timeout=config.driver_reboot_timeout,
                    service_active=(facts.get("service_unit") or {}).get("active_state") == "active")
    sms = node_sms(facts)
    flavour = flavour_for(config.driver_flavour, sms)
    if flavour == "proprietary" and any(sm.major in OPEN_ONLY_MAJORS for sm in sms):
        add(Finding("DRIVER_OPEN_MODULE_REQUIRED", BLOCKER,
                    f"driver_flavour: proprietary on Blackwell GPUs (compute capability "
                    f"{', '.join(str(sm) for sm in sms)}): they run only on NVIDIA's open kernel modules",
                    "set driver_flavour: open (or auto)"))
    older = [sm for sm in sms if sm < FIRST_OPEN_MODULE_SM]
    if flavour == "open" and older:
        add(Finding("DRIVER_PROPRIETARY_MODULE_REQUIRED", BLOCKER,
                    f"driver_flavour: open on GPUs older than Turing (compute capability "
                    f"{', '.join(str(sm) for sm in older)}): NVIDIA's open kernel modules do not drive them",
                    "set driver_flavour: proprietary (or auto)"))
    if repo is None:
        return DriverPlan(flavour=flavour, **settings)
    name = driver_lock_name(config.driver_branch, repo.distro, context.machine)
    lock = _read_lock(context, name, repo, flavour)
    if lock is None:
        return DriverPlan(flavour=flavour, **settings)
    layer = facts.get("driver_layer") or {}
    installed = {package["name"]: package for package in layer.get("packages") or []}
    switches = layer.get("nvswitch_count") or 0
    roles = [role for role in ("pinning", flavour) if role in lock.roles]
    tray = imex_node(facts)
    if tray:
        roles.append("imex")
    elif switches > 0:
        roles.append("fabric")
        if any(sm.major in NVLINK5_MAJORS for sm in sms):
            roles.append("nvlink5")
    pins = lock.pins(*roles)
    other = "proprietary" if flavour == "open" else "open"
    ours = set(pins)
    remove = tuple(sorted(package for package in lock.pins(other) if package not in ours and package in installed))
    # Canonical's driver (ubuntu-drivers): adopted as it is, or replaced in the same apt run
    # (bringup/canonical_driver.py: adoption says when, and why not).
    canonical = canonical_driver(layer.get("packages"))
    why = adoption(canonical, config.driver_branch, flavour, lock.version, layer.get("installed_module"),
                   switches) if canonical else ""
    hold_pins = pins
    if canonical and not why:
        # Adopted: nothing of the lock's driver installed; Canonical's packages held at their
        # versions (the prebuilt modules, never adopted, are not among them).
        hold_pins = {package: installed[package]["version"] for package in names(canonical)
                     if not PREBUILT.match(package)}
        pins = {}
        settings.update(canonical="adopt", canonical_packages=canonical.packages)
    elif canonical:
        # Replaced: every Canonical package the lock does not name is purged while NVIDIA's are
        # installed (those of one name, e.g. libnvidia-compute-580, move to the lock's version),
        # so apt never has both DKMS modules (nvidia-dkms-kernel) nor two libcuda owners.
        remove = tuple(sorted(set(remove) | {package for package in names(canonical) if package not in ours}))
        settings.update(canonical="replace", canonical_packages=canonical.packages, canonical_reason=why)
    headers = kernel_headers(layer.get("kernel") or {})
    # IMEX is started only once its nodes config lists the domain: the service does not start
    # without it (IMEX guide, "Deployment Models"); installed and held meanwhile.
    imex_peers = ((facts.get("imex") or {}).get("nodes_config") or {}).get("peers", 0)
    units = (PERSISTENCED,) + ((FABRICMANAGER,) if switches > 0 and not tray else ()) + (
        (IMEX,) if tray and imex_peers > 0 and any(name.startswith(IMEX) for name in pins) else ())
    # The IMEX unit's state is the imex section's (docs/facts.md ``imex``), not the driver layer's.
    imex_unit = (facts.get("imex") or {}).get("unit")
    if imex_unit:
        layer = {**layer, "units": {**(layer.get("units") or {}), IMEX: imex_unit}}
    blacklisted = (layer.get("nouveau") or {}).get("blacklisted")
    plan = DriverPlan(
        flavour=flavour, version=lock.version, lock=name,
        install=tuple(f"{package}={version}" for package, version in pins.items()),
        remove=remove, hold=tuple(hold_pins), headers=headers, units=units,
        blacklist_file="" if blacklisted else NOUVEAU_FILE, blacklist="" if blacklisted else NOUVEAU_TEXT,
        initramfs=initramfs_kernels(layer.get("kernel") or {}, blacklisted),
        unattended_file=UNATTENDED_FILE, unattended=unattended_text(hold_pins),
        reboot_for=reboot_reason(layer.get("module") or {}, lock.version, flavour), **settings)
    return replace(plan, changes=_changes(plan, hold_pins, installed, layer))


def _read_lock(context, name, repo, flavour):
    """The driver lock, or None after a DRIVER_LOCK_MISSING blocker."""
    regenerate = (f"make lock CUDA_REPO_URL=<NVIDIA's repos or your mirror> CUDA_PLATFORMS={repo.distro}-"
                  f"{context.machine} (the branch file is {driver_input_name(context.config.driver_branch)})")
    text = context.locks.read(name)
    problem = None if text is not None else f"no driver lock {name} for driver_branch {context.config.driver_branch}"
    lock = None
    if text is not None:
        try:
            lock = parse_driver_lock(text)
        except LockError as error:
            problem = f"{name} cannot be read: {error}"
    if lock is not None and flavour not in lock.roles:
        problem, lock = f"{name} holds no packages of the {flavour} kernel module flavour", None
    if problem:
        context.add(Finding("DRIVER_LOCK_MISSING", BLOCKER,
                            f"{problem}: deploy installs the driver only at a locked version", f"generate it: "
                            f"{regenerate}; or set driver_manage: false to leave the node's driver as it is"))
    return lock


def _changes(plan, pins, installed, layer):
    """What deploy will do, one line each (nothing for a node already converged)."""
    changes = []
    canonical = set(names_of(plan.canonical_packages))
    # Adopted once its packages are held: a converged node lists nothing.
    if plan.canonical == "adopt" and any(not (installed.get(name) or {}).get("held") for name in canonical):
        changes.append(f"adopt Canonical's NVIDIA driver as the lock's {plan.version} ({plan.flavour} kernel module, "
                       f"built by DKMS): no driver package installed or removed ({' '.join(plan.canonical_packages)})")
    if plan.canonical == "replace":
        changes.append(f"replace Canonical's NVIDIA driver ({plan.canonical_reason}): purge "
                       f"{' '.join(name for name in plan.remove if name in canonical)} in the same apt run")
    others = [name for name in plan.remove if name not in canonical]
    if others:
        changes.append(f"purge the other kernel module flavour's packages: {' '.join(others)}")
    if plan.headers:
        changes.append(f"install {' '.join(plan.headers)} (DKMS builds the module against them)")
    missing = [f"{name}={version}" for name, version in pins.items()
               if (installed.get(name) or {}).get("version") != version]
    if missing:
        changes.append(f"install NVIDIA driver {plan.version} ({plan.flavour} kernel module, built by DKMS) from "
                       f"{plan.lock}: {' '.join(missing)}")
    loose = [name for name in plan.hold
             if (installed.get(name) or {}).get("version") != pins[name] or not installed[name].get("held")]
    if loose:
        changes.append(f"hold {' '.join(loose)} (apt-mark hold) and keep them out of unattended-upgrades "
                       f"({plan.unattended_file})")
    if plan.blacklist_file:
        changes.append(f"blacklist nouveau ({plan.blacklist_file}) and update the initramfs")
    elif plan.initramfs:
        changes.append(f"update the initramfs of kernel {' '.join(plan.initramfs)} (it does not hold the nouveau "
                       "blacklist)")
    stopped = [unit for unit in plan.units if not _unit_running(layer, unit)]
    if stopped:
        changes.append(f"enable and start {' '.join(stopped)}")
    if plan.reboot_for:
        changes.append(f"reboot ({plan.reboot_for})" if will_reboot(plan) else
                       f"leave the host `needs reboot` ({plan.reboot_for})")
    return tuple(changes)


def names_of(pins):
    """The names of ``name=version`` pins.

    >>> names_of(("a=1", "b=2"))
    ['a', 'b']
    """
    return [pin.split("=", 1)[0] for pin in pins]


def service_after(service, plan):
    """The service's plan with the units the driver step starts among those it is ordered
    after (a node probed before Fabric Manager was installed has no such unit yet).

    >>> from bringup.plan.model import ServicePlan
    >>> unit = ServicePlan("u", "/h", "/e", {}, "s", (), "", "", True, after_units=("nvidia-persistenced.service",))
    >>> service_after(unit, DriverPlan(manage=True, units=("nvidia-persistenced", "nvidia-fabricmanager"))).after_units
    ('nvidia-persistenced.service', 'nvidia-fabricmanager.service')
    """
    if service is None or not plan.manage:
        return service
    units = tuple(dict.fromkeys(service.after_units + tuple(f"{unit}.service" for unit in plan.units)))
    return replace(service, after_units=units)


def will_reboot(plan):
    """Whether deploy reboots the host for the module: ``driver_reboot: if-needed``, and
    the service not active unless ``driver_reboot_serving``.

    >>> will_reboot(DriverPlan(manage=True, reboot_for="x", reboot="if-needed", service_active=True))
    False
    """
    return reboot_decision(plan, plan.reboot_for)[0] == REBOOT


# The findings the driver step cures, and which part of it does: the driver itself
# (then the module changes at a boot), Fabric Manager, NVLSM, nouveau, the holds,
# the persistence daemon, the kernel headers.
CURES = {
    "DRIVER_NOT_LOADED": "driver", "DRIVER_OPEN_MODULE_REQUIRED": "driver", "DRIVER_LIBRARY_MISMATCH": "driver",
    "DKMS_NOT_BUILT": "driver", "KERNEL_HEADERS_MISSING": "headers", "KERNEL_HEADERS_PENDING": "headers",
    "NOUVEAU_INITRAMFS_STALE": "initramfs", "FABRIC_MANAGER_MISSING": "fabric",
    "FABRIC_MANAGER_VERSION": "fabric", "FABRIC_MANAGER_INACTIVE": "fabric", "NVLSM_MISSING": "nvlsm",
    "NOUVEAU_LOADED": "nouveau", "NOUVEAU_NOT_BLACKLISTED": "nouveau", "DRIVER_NOT_HELD": "holds",
    "PERSISTENCE_OFF": "persistence",
}
# Cured by the driver step only where the plan installs nvidia-imex (a lock with the imex role).
IMEX_CURES = {"IMEX_MISSING": "imex", "IMEX_VERSION": "imex", "IMEX_INACTIVE": "imex"}
FABRIC_MANAGER_CODES = ("FABRIC_MANAGER_MISSING", "FABRIC_MANAGER_VERSION", "FABRIC_MANAGER_INACTIVE")


def install_text(plan):
    """How a fix says the driver install, with the reboot it needs.

    >>> install_text(DriverPlan(manage=True, version="580.95.05", flavour="open", lock="L", reboot_for="x"))
    'deploy installs NVIDIA driver 580.95.05 (open kernel module, built by DKMS; L), then a reboot'
    """
    text = f"deploy installs NVIDIA driver {plan.version} ({plan.flavour} kernel module, built by DKMS; {plan.lock})"
    return text + (", then a reboot" if plan.reboot_for else "")


def _fix_text(part, plan):
    pinned = dict(pin.split("=", 1) for pin in plan.install)
    after = " after the reboot" if plan.reboot_for else ""
    # An adopted Canonical driver is held at its own versions (Canonical's revision), not the lock's.
    held_at = "their versions (Canonical's driver, adopted)" if plan.canonical == "adopt" else "the lock's versions"
    texts = {
        "driver": install_text(plan),
        "headers": f"deploy installs {' '.join(plan.headers) or 'the missing kernel headers'} before the DKMS build",
        "fabric": f"deploy installs Fabric Manager at the driver's version ("
                  f"{' '.join(f'{n}={v}' for n, v in pinned.items() if 'fabricmanager' in n or 'nscq' in n)}), holds "
                  f"it and enables and starts nvidia-fabricmanager{after}",
        "nvlsm": f"deploy installs {' '.join(f'{n}={v}' for n, v in pinned.items() if n.startswith('nvlsm'))} and "
                 f"holds it (Fabric Manager starts it{after})",
        "nouveau": f"deploy writes {plan.blacklist_file or 'the nouveau blacklist'} and updates the initramfs"
                   + (", then a reboot" if plan.reboot_for else ""),
        "initramfs": f"deploy updates the initramfs of kernel {' '.join(plan.initramfs)} "
                     f"({' && '.join(f'update-initramfs -u -k {release}' for release in plan.initramfs)})",
        "holds": f"deploy holds {' '.join(plan.hold)} at {held_at} and keeps them out of unattended-upgrades "
                 f"({plan.unattended_file})",
        "persistence": f"deploy enables and starts nvidia-persistenced{after}",
        "imex": f"deploy installs IMEX at the driver's version ("
                f"{' '.join(f'{n}={v}' for n, v in pinned.items() if n.startswith(IMEX))}), holds it and "
                + (f"enables and starts nvidia-imex{after}" if IMEX in plan.units else
                   "starts nvidia-imex once its nodes config lists the domain")
                + " (the nodes config and the channel stay the administrator's: IMEX_NODES_CONFIG_EMPTY, "
                f"IMEX_NO_CHANNEL; {IMEX_GUIDE})",
    }
    return texts[part]


def as_fixes(findings, plan):
    """The findings with those the driver step cures as ``fix`` findings naming what deploy
    will do, and DRIVER_REBOOT_NEEDED where the module changes only at a boot. Unchanged
    without a driver step that can act (``manage`` False, or no lock).

    >>> found = [Finding("PERSISTENCE_OFF", WARNING, "off", "enable it")]
    >>> as_fixes(found, DriverPlan(manage=False)) == found
    True
    >>> [(f.code, f.severity) for f in as_fixes(found, DriverPlan(manage=True, lock="L", install=("a=1",)))]
    [('PERSISTENCE_OFF', 'fix')]
    """
    if not plan.manage or not plan.lock:
        return list(findings)
    cures = dict(CURES)
    # The fabric waits for Fabric Manager: when deploy installs, moves or starts it, the
    # fabric's state is its consequence, not a problem of its own.
    if any(finding.code in FABRIC_MANAGER_CODES for finding in findings):
        cures["FABRIC_NOT_READY"] = "fabric"
    if any(pin.startswith(IMEX) for pin in plan.install):
        cures.update(IMEX_CURES)
    cured = [replace(finding, severity=FIX, fix=_fix_text(cures[finding.code], plan))
             if finding.code in cures and (finding.code != "DRIVER_OPEN_MODULE_REQUIRED" or plan.flavour == "open")
             else canonical_finding(finding, plan) if finding.code == "DRIVER_CANONICAL"
             else finding for finding in findings]
    if plan.reboot_for:
        cured.append(reboot_finding(plan))
    return cured


def canonical_finding(finding, plan):
    """DRIVER_CANONICAL with what this plan does: adopted (info, nothing installed), or replaced
    (a fix: Canonical's packages purged in the apt run that installs NVIDIA's locked ones).

    >>> found = Finding("DRIVER_CANONICAL", "info", "seen", "either")
    >>> canonical_finding(found, DriverPlan(manage=True, canonical="replace", canonical_reason="why", version="5",
    ...                   flavour="open", lock="L", remove=("nvidia-dkms-580-server-open",),
    ...                   canonical_packages=("nvidia-dkms-580-server-open=5-0ubuntu0.24.04.2",))).severity
    'fix'
    """
    if plan.canonical == "adopt":
        held = " ".join(plan.hold)
        return replace(finding, fix=f"deploy adopts it as the lock's {plan.version} ({plan.lock}): no driver package "
                                    f"installed or removed; it holds {held} at their versions and keeps them out of "
                                    f"unattended-upgrades ({plan.unattended_file}); driver_manage: false leaves it "
                                    "untouched")
    if plan.canonical == "replace":
        canonical = set(names_of(plan.canonical_packages))
        signed = sorted(name for name in canonical if PREBUILT.match(name))
        if signed:
            # Canonical signs its prebuilt modules for Secure Boot; the DKMS module that
            # would replace them is signed with the node's own key (MOK), which no apt run
            # enrolls: on a Secure Boot node the next boot would load no driver at all.
            return replace(finding, severity=BLOCKER, fix=(
                f"its modules are Canonical's prebuilt, signed ones ({' '.join(signed)}): deploy does not replace "
                "them (on a Secure Boot node NVIDIA's DKMS-built module loads only once the DKMS key is enrolled, "
                "`mokutil --import /var/lib/dkms/mok.pub` and a confirmation at the console); set driver_manage: "
                "false to keep Canonical's driver, or enroll the key, purge Canonical's packages yourself and "
                "deploy again"))
        purged = " ".join(name for name in plan.remove if name in canonical)
        moved = " ".join(pin for pin in plan.install if pin.split("=", 1)[0] in canonical)
        return replace(finding, severity=FIX, fix=(
            f"deploy replaces it ({plan.canonical_reason}): one apt run purges {purged or 'nothing'}"
            + (f", moves {moved} (the same names in NVIDIA's repository)" if moved else "")
            + f" and {install_text(plan).removeprefix('deploy ')}"))
    return finding


def reboot_finding(plan):
    """DRIVER_REBOOT_NEEDED: a fix when deploy reboots the host, else a warning that its
    verdict will be ``needs reboot``."""
    what = install_text(replace(plan, reboot_for=""))
    if will_reboot(plan):
        return Finding("DRIVER_REBOOT_NEEDED", FIX, f"the kernel module changes only at a boot ({plan.reboot_for})",
                       f"{what}, then reboots the host (driver_reboot: if-needed), waits for it (at most "
                       f"{plan.reboot_timeout} s) and validates again")
    why = ("the service is active and driver_reboot_serving is false" if plan.reboot == "if-needed"
           else "driver_reboot: never")
    return Finding("DRIVER_REBOOT_NEEDED", WARNING,
                   f"{what}; the module changes at the next boot ({plan.reboot_for}): the host's verdict will be "
                   f"`needs reboot` ({why})",
                   "reboot the host when it may go down (`systemctl reboot`), then deploy again; or set "
                   "driver_reboot: if-needed" + (" and driver_reboot_serving: true" if plan.service_active else ""))
