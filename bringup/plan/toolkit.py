"""The CUDA toolkit: the one of torch's CUDA build (its packages at the versions of the
toolkit lock), and how the node resolves CUDA today: other toolkits, the service's
CUDA_HOME, FlashInfer's arch trap, a login shell's nvcc and the ``/usr/local/cuda`` link.

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> check_toolkits(PlanContext.of({"toolkits": []}, Config(), None, found.append))
    >>> [finding.code for finding in found], "(installed: none)" in found[0].message
    (['TOOLKIT_MISSING'], True)
"""

from dataclasses import replace

from bringup import flashinfer as fi
from bringup.findings import BLOCKER, FIX, INFO, WARNING, Finding
from bringup.locks import LockError
from bringup.plan.model import ToolkitPlan, toolkit_packages
from bringup.toolkit_locks import parse_toolkit_lock, toolkit_input_name, toolkit_lock_name
from bringup.versions import major_minor, parse, same_major_minor


def toolkit(context, repo):
    """The toolkit deploy installs from ``repo`` (the RepoPlan, None on an unsupported
    OS), and which of its pins the node lacks (``missing``)."""
    planned = _locked_toolkit(context, repo)
    return replace(planned, missing=_missing_pins(planned.pins, context.facts.get("cuda_packages")))


def _locked_toolkit(context, repo):
    """The toolkit's packages, at the versions of its lock: ``cuda_toolkit_lock`` when
    set, else the one for this repository distro and CPU."""
    torch_cuda, home, machine, add = context.torch_cuda, context.home, context.machine, context.add
    planned = toolkit_packages(torch_cuda)
    if repo is None:
        return ToolkitPlan(str(torch_cuda), home, planned, pins=planned)
    name = context.config.cuda_toolkit_lock or toolkit_lock_name(str(torch_cuda), repo.distro, machine)
    release = toolkit_input_name(str(torch_cuda))
    regenerate = (f"make lock CUDA_REPO_URL=<NVIDIA's repos or your mirror> CUDA_PLATFORMS={repo.distro}-{machine} "
                  f"(the release is {release})")
    text = context.locks.read(name)
    if text is None:
        add(Finding("TOOLKIT_UNLOCKED", WARNING,
                    f"no toolkit lock {name}: deploy would install whichever CUDA {torch_cuda} release "
                    f"{repo.url} offers (its newest)", f"generate it: {regenerate}"))
        return ToolkitPlan(str(torch_cuda), home, planned, pins=planned)
    try:
        locked = parse_toolkit_lock(text)
    except LockError as error:
        add(Finding("TOOLKIT_UNLOCKED", BLOCKER, f"{name} cannot be read: {error}", f"regenerate it: {regenerate}"))
        return ToolkitPlan(str(torch_cuda), home, planned, lock=name, pins=planned)
    unlocked = [package for package in planned if package not in locked]
    if unlocked:
        add(Finding("TOOLKIT_UNLOCKED", WARNING,
                    f"{name} holds no version of {', '.join(unlocked)}: deploy would install the repository's newest",
                    f"add them to {release} and regenerate: {regenerate}"))
    packages = planned + tuple(package for package in locked if package not in planned)
    pins = tuple(f"{package}={locked[package]}" if package in locked else package for package in packages)
    return ToolkitPlan(str(torch_cuda), home, packages, lock=name, pins=pins)


def _missing_pins(pins, installed):
    """The pins (``name`` or ``name=version``) the probe's ``cuda_packages`` lacks, or None
    when the probe could not list packages.

    >>> _missing_pins(("a=1-1", "b=2-1", "c"), {"a": "1-1", "b": "1-1"})
    ('b=2-1', 'c')
    >>> _missing_pins(("a=1-1",), None) is None
    True
    """
    if installed is None:
        return None
    missing = []
    for pin in pins:
        name, _, version = pin.partition("=")
        if name not in installed or (version and installed[name] != version):
            missing.append(pin)
    return tuple(missing)


def check_toolkit_lock(context, toolkit):
    """Installed toolkit packages at other versions than the lock's (deploy moves them)."""
    installed = context.facts.get("cuda_packages")
    locked = dict(pin.split("=", 1) for pin in toolkit.pins if "=" in pin)
    if installed is None or not locked or not any(package in installed for package in locked):
        return
    drift = [f"{package} {installed[package]} (lock {version})" if package in installed
             else f"{package} not installed (lock {version})"
             for package, version in locked.items() if installed.get(package) != version]
    if drift:
        context.add(Finding("TOOLKIT_LOCK_DRIFT", FIX,
                            f"the CUDA {toolkit.version} packages differ from {toolkit.lock}: {', '.join(drift)}",
                            "deploy installs the lock's versions (downgrades included); to move to another release on "
                            f"purpose, edit {toolkit_input_name(toolkit.version)} and run make lock"))


def check_toolkits(context):
    """The toolkit of torch's CUDA build at its home (TOOLKIT_MISSING), and the others."""
    home, torch_cuda, add = context.home, context.torch_cuda, context.add
    toolkits = context.facts.get("toolkits") or []
    chosen = [tk for tk in toolkits if tk.get("home") == home and same_major_minor(tk.get("version"), str(torch_cuda))]
    if not chosen:
        seen = ", ".join(f"{tk['home']} ({tk.get('version') or 'broken nvcc'})" for tk in toolkits) or "none"
        add(Finding("TOOLKIT_MISSING", FIX,
                    f"no CUDA {torch_cuda} toolkit at {home} (installed: {seen})",
                    f"deploy installs cuda-nvcc-{torch_cuda.major}-{torch_cuda.minor} and the JIT headers "
                    "from NVIDIA's repository"))
    others = [tk["home"] for tk in toolkits if tk.get("home") != home]
    if others:
        add(Finding("OTHER_TOOLKITS", INFO, f"also installed: {', '.join(others)}",
                    "nothing to do: they stay installed and stop resolving after deploy"))


def check_resolution(context):
    """The CUDA the service's environment resolves today, and what FlashInfer would build
    with it (the arch trap) against the planned ``context.targets``."""
    facts, config, home, torch_cuda, add = context.facts, context.config, context.home, context.torch_cuda, context.add
    resolved = facts.get("resolution") or {}
    resolved_home, via = resolved.get("cuda_home"), resolved.get("via", "none")
    detected = major_minor(resolved.get("version"))
    where = f"{resolved_home or 'nothing'} (via {via})"
    if resolved.get("nvcc_ok") and detected != torch_cuda:
        add(Finding("TOOLKIT_TORCH_MISMATCH", FIX,
                    f"the service environment resolves CUDA {detected} at {where}; "
                    f"torch is built for CUDA {torch_cuda}",
                    f"deploy sets CUDA_HOME={home} and its bin first on PATH for the service and login shells"))
    elif resolved_home != home or via != "CUDA_HOME":
        add(Finding("CUDA_HOME_NOT_EXPLICIT", FIX,
                    f"the service environment resolves {where}, not CUDA_HOME={home}",
                    f"deploy writes CUDA_HOME={home} into {config.service_env_file}"))
    if not context.sms:
        return
    # What runs now: the venv's FlashInfer when there is one, else the stack's.
    installed = parse((facts.get("flashinfer") or {}).get("version"))
    flashinfer_now = installed or config.flashinfer
    prediction = fi.predict(flashinfer_now, detected or torch_cuda, context.sms,
                            resolved.get("arch_list_env"), bool(resolved.get("nvcc_ok")))
    wanted = tuple(context.targets)
    if prediction.outcome == "ok" and prediction.targets == wanted:
        return
    add(Finding("FLASHINFER_ARCH_TRAP", FIX, _trap_message(prediction, flashinfer_now, detected, wanted, where,
                                                           bool(resolved_home)),
                f"deploy installs CUDA {torch_cuda}, sets CUDA_HOME={home} and "
                f"FLASHINFER_CUDA_ARCH_LIST=\"{' '.join(wanted)}\" for the service"))


def _trap_message(prediction, flashinfer_now, detected, wanted, where, found_home):
    if detected:
        head = f"FlashInfer {flashinfer_now} with CUDA {detected} from {where}"
    elif found_home:  # a home without a working nvcc: no version to say, but the place
        head = f"FlashInfer {flashinfer_now} with {where}"
    else:
        head = f"FlashInfer {flashinfer_now} finds no CUDA toolkit"
    if prediction.outcome == "empty_arch_set":
        return (f"{head} raises \"{prediction.detail}\" during arch detection and swallows it: the "
                "target set stays empty and every JIT build fails with \"FlashInfer requires GPUs "
                "with sm75 or higher\"")
    if prediction.outcome == "ptxas_failure":
        return f"{head}: {prediction.detail}; ptxas fails"
    if prediction.outcome == "import_failure":
        return f"{head}: FLASHINFER_CUDA_ARCH_LIST makes the import fail: {prediction.detail}"
    if prediction.outcome == "no_nvcc":
        return f"{head}: no nvcc runs there, so no JIT module can build"
    return (f"{head} builds {' '.join(prediction.targets)} instead of {' '.join(wanted)}"
            " (works, but not the planned build)")


def check_login_path(context):
    """A login shell's first nvcc is the planned toolkit's (deploy's profile script)."""
    home, path_nvcc = context.home, context.facts.get("path_nvcc")
    if path_nvcc and path_nvcc.get("path") != f"{home}/bin/nvcc":
        context.add(Finding("PATH_SHADOWS_CUDA_HOME", FIX,
                            f"a login shell's first nvcc is {path_nvcc['path']} "
                            f"(CUDA {path_nvcc.get('version') or 'unknown'}), not {home}/bin/nvcc",
                            f"deploy puts {home}/bin first on PATH in /etc/profile.d"))


def check_symlink(context):
    """The ``/usr/local/cuda`` link points at the planned toolkit."""
    config, home, link = context.config, context.home, context.facts.get("cuda_symlink")
    if link and link != home:
        severity = FIX if config.cuda_manage_alternative else WARNING
        fix = ("deploy points the cuda alternative at it" if config.cuda_manage_alternative
               else "nothing resolves through it after deploy; set cuda_manage_alternative to move it")
        context.add(Finding("CUDA_SYMLINK_DRIFT", severity, f"/usr/local/cuda points at {link}, not {home}", fix))
