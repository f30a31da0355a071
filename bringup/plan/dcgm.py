"""The DCGM step (``gpu_diag_install``): NVIDIA's DCGM, what ``dcgmi diag`` (the
``gpu_diag`` setting) needs, installed from the CUDA repository the repo step configures at
the versions of its lock (``files/locks/dcgm-4-<distro>-<machine>.txt``,
bringup/dcgm_locks.py), its host engine's unit enabled and started.

NVIDIA's DCGM installation guide (docs.nvidia.com/datacenter/dcgm/latest/installation.html)
installs ``datacenter-gpu-manager-4-cuda<major>`` (CUDA 13 here: the toolkit and driver
this project installs) from that repository and starts the host engine with
``systemctl --now enable nvidia-dcgm``; the lock names every package at one version
(``datacenter-gpu-manager-4-core`` and the cuda13 plugins), so apt takes nothing newer.

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> dcgm_plan(PlanContext.of({}, Config(), None, print), None)
    DcgmPlan(install=False, lock='', pins=(), unit='', restart=False)
"""

from bringup.dcgm_locks import DCGM_UNIT, dcgm_input_name, dcgm_lock_name
from bringup.deb_index import upstream_version
from bringup.findings import BLOCKER, FIX, Finding
from bringup.locks import LockError
from bringup.plan.model import DcgmPlan
from bringup.toolkit_locks import parse_toolkit_input, parse_toolkit_lock

# The package the guide installs for CUDA 13: a lock without it installs no diagnostic.
DCGM_ROOT = "datacenter-gpu-manager-4-cuda13"


def lock_problem(name, pins, wanted):
    """Why a DCGM lock's pins cannot be installed ("" when they can).

    + name: the lock's path, for messages
    + pins: ``parse_toolkit_lock`` of it
    + wanted: ``parse_toolkit_input`` of the release (dcgm-4.in), or None when it is not there
      (then nothing tells which packages the lock may hold: it is not installed)

    >>> lock_problem("l", {DCGM_ROOT: "1:4.4.1-1", "nvidia-driver": "580.1-1"}, None)
    'there is no files/locks/dcgm-4.in, the release l must hold'
    >>> lock_problem("l", {DCGM_ROOT: "4.4.1-1", "nvidia-driver": "580.1-1"}, {DCGM_ROOT: "4.4.1"})
    'l holds nvidia-driver, which files/locks/dcgm-4.in does not list'
    """
    if DCGM_ROOT not in pins:
        return f"{name} holds no version of {DCGM_ROOT}"
    if wanted is None:
        return f"there is no {dcgm_input_name()}, the release {name} must hold"
    extra = sorted(set(pins) - set(wanted))
    if extra:
        return f"{name} holds {', '.join(extra)}, which {dcgm_input_name()} does not list"
    lacking = sorted(set(wanted) - set(pins))
    if lacking:
        return f"{name} lacks {', '.join(lacking)} of {dcgm_input_name()}"
    other = sorted(f"{package} {pins[package]} (the release: {version})" for package, version in wanted.items()
                   if upstream_version(pins[package]) != version)
    if other:
        return f"{name} is not {dcgm_input_name()}'s release: {', '.join(other)}"
    return ""


def dcgm_plan(context, repo):
    """The DCGM step's plan (``install`` False without ``gpu_diag_install``, or when deploy
    runs no ``dcgm`` step); a lock that is missing, unreadable or without DCGM's CUDA 13
    package is DCGM_LOCK_MISSING (a blocker naming ``make lock-dcgm``).

    + context: the PlanContext (``config``, ``facts``, ``locks``, ``machine``, ``add``)
    + repo: the RepoPlan (None on an unsupported OS: its own blocker says so)
    """
    config, add = context.config, context.add
    if not config.gpu_diag_install or "dcgm" not in config.deploy_steps or repo is None:
        return DcgmPlan(install=False)
    name = dcgm_lock_name(repo.distro, context.machine)
    regenerate = (f"make lock-dcgm CUDA_REPO_URL=<NVIDIA's repos or your mirror> CUDA_PLATFORMS={repo.distro}-"
                  f"{context.machine} (the release is {dcgm_input_name()})")
    text = context.locks.read(name)
    problem = None if text is not None else f"there is no DCGM lock {name}"
    if problem is None:
        try:
            pins = parse_toolkit_lock(text)
        except LockError as error:
            problem = f"{name} cannot be read: {error}"
        else:
            release = context.locks.read(dcgm_input_name())
            try:
                wanted = None if release is None else parse_toolkit_input(release, dcgm_input_name())
            except LockError as error:
                problem = f"{dcgm_input_name()} cannot be read: {error}"
            else:
                problem = lock_problem(name, pins, wanted) or None
    if problem:
        add(Finding("DCGM_LOCK_MISSING", BLOCKER, f"gpu_diag_install: {problem}: nothing of DCGM is installed",
                    f"generate it: {regenerate}, or set gpu_diag_install: false"))
        return DcgmPlan(install=False, lock=name)
    engine = context.facts.get("dcgm") or {}
    unit = engine.get("unit")
    restart = bool(engine.get("engine_predates_packages")) and (unit or {}).get("active_state") == "active"
    plan = DcgmPlan(install=True, lock=name, pins=tuple(f"{package}={version}" for package, version in pins.items()),
                    unit=DCGM_UNIT, restart=restart)
    installed = context.facts.get("cuda_packages")
    if installed is not None:
        # The probe lists NVIDIA's repository packages (DCGM's too): validate names every
        # install deploy makes, whether or not the diagnostic was asked for.
        drift = [f"{package} {installed[package]}" if package in installed else f"{package} not installed"
                 for package, version in pins.items() if installed.get(package) != version]
        if drift:
            add(Finding("DCGM_INSTALL", FIX, f"DCGM's packages differ from {name} ({', '.join(drift)}): deploy "
                                             f"installs {', '.join(plan.pins)} and starts {DCGM_UNIT}", "deploy"))
            return plan
    elif (context.facts.get("gpu_diag") or {}).get("installed") is False:
        add(Finding("DCGM_INSTALL", FIX, f"DCGM's dcgmi is not on the node: deploy installs {', '.join(plan.pins)} "
                                         f"({name}) and starts {DCGM_UNIT}", "deploy"))
        return plan
    # The packages are at the lock: what deploy still does to the host engine (the probe's
    # dcgm section; None where systemd does not run, or from an older probe).
    if unit is not None and unit.get("load_state") == "loaded":
        off = [state for state, wanted in (("active_state", "active"), ("unit_file_state", "enabled"))
               if unit.get(state) != wanted]
        if off:
            add(Finding("DCGM_INSTALL", FIX, f"{DCGM_UNIT} is {', '.join(unit.get(state) or '?' for state in off)}: "
                                             f"deploy enables and starts it", "deploy"))
        elif restart:
            add(Finding("DCGM_INSTALL", FIX, f"{DCGM_UNIT}'s host engine started before DCGM's packages were last "
                                             "installed, so it runs the replaced ones: deploy restarts it", "deploy"))
    return plan
