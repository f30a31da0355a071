"""The GPUs and what is built for them: the SMs (the GPUs' own, else ``target_sms``),
the driver's floors for torch's CUDA build and for each GPU, and FlashInfer's arch
target of each SM (the plan's ``arch_list``, FLASHINFER_CUDA_ARCH_LIST).

    >>> from dataclasses import replace
    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> context = PlanContext.of({"gpus": [{"index": 0, "name": "NVIDIA B200", "compute_cap": "10.0"}]}, Config(),
    ...                          None, found.append)
    >>> sms = target_sms(context)
    >>> arch_targets(replace(context, sms=sms)), found
    (('10.0a',), [])
"""

from packaging.version import Version

from bringup import cuda as cuda_table
from bringup import flashinfer as fi
from bringup import gpu_ids
from bringup.gpu_archs import OPEN_ONLY_MAJORS
from bringup.findings import BLOCKER, FIX, INFO, WARNING, Finding
from bringup.plan.driver_step import install_text
from bringup.torch_builds import arch_list_for_build, covers_sm
from bringup.versions import parse


def target_sms(context):
    """The SMs to build for, sorted: the GPUs' (SM_UNKNOWN for one that reports none,
    MIXED_GPUS for several); where nvidia-smi lists none but the PCI bus shows NVIDIA
    GPUs, theirs by the PCI table (DRIVER_NOT_LOADED naming them); else ``target_sms`` on
    a GPU-less image builder; none (NO_GPU, DRIVER_NOT_LOADED) otherwise. Facts without
    ``pci_gpus`` (an older probe, or sysfs unreadable) are judged by nvidia-smi alone."""
    facts, config, add = context.facts, context.config, context.add
    gpus = facts.get("gpus") or []
    smi = facts.get("nvidia_smi") or {}
    if gpus:
        for gpu in gpus:
            if parse(gpu["compute_cap"]) is None:
                add(Finding("SM_UNKNOWN", BLOCKER,
                            f"GPU {gpu['index']} ({gpu['name']}) reports compute capability {gpu['compute_cap']!r}",
                            "check the GPU with nvidia-smi -q (a GPU in a bad state or a driver too old to "
                            "know it reports [N/A]); nothing can be built for it until it reports X.Y"))
        sms = sorted({parse(gpu["compute_cap"]) for gpu in gpus if parse(gpu["compute_cap"])})
        if len(sms) > 1:
            add(Finding("MIXED_GPUS", WARNING,
                        f"GPUs of SMs {', '.join(str(sm) for sm in sms)} share this node",
                        "nothing to do: every SM is in the arch list"))
        return tuple(sms)
    on_bus = gpu_ids.bus_gpus(facts)
    if on_bus:
        return _gpus_without_driver(context, on_bus)
    if config.target_sms:
        sms = sorted({Version(sm) for sm in config.target_sms})
        add(Finding("TARGET_SMS_FROM_CONFIG", INFO,
                    f"no GPU visible; building for target_sms {' '.join(str(sm) for sm in sms)}",
                    "nothing to do on an image builder"))
        return tuple(sms)
    if smi.get("present") and smi.get("error"):
        add(Finding("DRIVER_NOT_LOADED", BLOCKER,
                    f"nvidia-smi fails: {smi['error']}",
                    "install or reload the NVIDIA driver (check dmesg, nvidia kernel module), or "
                    "set target_sms for a GPU-less image builder"))
    else:
        reason = smi.get("error") or "nvidia-smi lists no GPU"
        add(Finding("NO_GPU", BLOCKER, f"no NVIDIA GPU visible ({reason})",
                    "install the NVIDIA driver on a GPU node, or set target_sms (e.g. [\"12.0\"]) "
                    "to build for a GPU-less image builder"))
    return ()


def _gpus_without_driver(context, on_bus):
    """nvidia-smi lists no GPU, the PCI bus shows NVIDIA's (no driver, or a module that
    refused them: a proprietary one on Blackwell says "No devices were found"): the
    driver is what is missing, and the SMs to build for are the bus's (bringup/gpu_ids.py).

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> b200 = {"bus_id": "0000:18:00.0", "vendor": "10de", "device": "2901", "class": "0302"}
    >>> context = PlanContext.of({"gpus": [], "pci_gpus": [b200]}, Config(), None, found.append)
    >>> target_sms(context), [finding.code for finding in found]
    ((<Version('10.0')>,), ['DRIVER_NOT_LOADED'])
    """
    smi = context.facts.get("nvidia_smi") or {}
    sms = gpu_ids.pci_gpus_sms(context.facts)
    reason = smi.get("error") or "nvidia-smi lists no GPU"
    blackwell = any(sm.major in OPEN_ONLY_MAJORS for sm in sms)
    modules = ("NVIDIA's open kernel modules (Blackwell runs on no other: a proprietary module leaves "
               "\"No devices were found\")" if blackwell else "its kernel module")
    context.add(Finding("DRIVER_NOT_LOADED", BLOCKER,
                        f"nvidia-smi lists no GPU ({reason}), but the PCI bus shows {gpu_ids.bus_summary(on_bus)}: "
                        "no NVIDIA driver drives them",
                        f"install or load the NVIDIA driver with {modules}; `dmesg | grep -i nvrm` names why a "
                        "loaded module refused the GPUs"))
    return sms


def check_standin(context):
    """The sandbox's declaration (``gpu_standin``) in every report: its GPUs are stand-ins,
    so no report of such a node passes for a real GPU's."""
    if context.config.gpu_standin:
        context.add(Finding("GPU_STANDIN", INFO,
                            "gpu_standin is set: this node's GPU driver is a declared stand-in (a recorded "
                            "nvidia-smi, no CUDA device); the pre-warm compiles without a device and the node "
                            "suite's CUDA checks say STAND-IN, not PASS",
                            "nothing to do on a test bed; never set gpu_standin on a real node"))


def check_driver(context, planned=None):
    """The driver against torch's CUDA build and each GPU's floor (bringup/cuda.py): the
    node's, and the one the driver step installs (``planned``, a DriverPlan with a lock)
    where ``driver_manage`` is set. A node's driver below a floor the planned one meets
    is a fix (deploy replaces it); a planned one below a floor is a blocker."""
    facts, add = context.facts, context.add
    driver, gpus = facts.get("driver"), facts.get("gpus") or []
    target = planned.version if planned is not None and planned.manage and planned.version else ""
    if target:
        lock_fix = (f"lock a newer driver: another driver_branch, or a newer version in "
                    f"files/locks/driver-{planned.branch}.in (then make lock)")
        low = _floors(target, context.torch_cuda, gpus, f"the locked driver {target} ({planned.lock})", lock_fix)
        for finding in low:
            add(finding)
        if driver and not low:
            for finding in _floors(driver["version"], context.torch_cuda, gpus, f"driver {driver['version']}", ""):
                add(Finding(finding.code, FIX, finding.message, install_text(planned)))
        return
    if not driver:
        return
    for finding in _floors(driver["version"], context.torch_cuda, gpus, f"driver {driver['version']}", None):
        add(finding)
    driver_cuda = parse(driver.get("cuda_version"))
    torch_cuda = context.torch_cuda
    if driver_cuda and driver_cuda < torch_cuda and cuda_table.driver_runs_cuda(driver["version"], torch_cuda):
        add(Finding("DRIVER_CUDA_BELOW_TOOLKIT", WARNING,
                    f"driver {driver['version']} supports CUDA {driver_cuda}, toolkit is {torch_cuda}: "
                    "runs under minor-version compatibility, without PTX JIT of newer code",
                    f"upgrade the driver to {cuda_table.GA_DRIVER_FOR_CUDA.get(torch_cuda, 'the toolkit GA driver')} "
                    "for full support"))


def _floors(version, torch_cuda, gpus, shown, fix):
    """DRIVER_TOO_OLD blockers of a driver ``version`` (named ``shown``) for torch's CUDA
    build and the ``gpus``; ``fix`` overrides the upgrade advice when given."""
    found = []
    if not cuda_table.driver_runs_cuda(version, torch_cuda):
        floor = cuda_table.driver_floor_for_cuda(torch_cuda)
        found.append(Finding("DRIVER_TOO_OLD", BLOCKER, f"{shown} cannot run CUDA {torch_cuda} code (needs >= {floor})",
                             fix or f"upgrade the NVIDIA driver to {floor} or newer, or use a torch build "
                                    "for an older CUDA (stack_torch_cuda)"))
    for name in sorted({gpu["name"] for gpu in gpus}):
        floor = cuda_table.driver_floor_for_gpu(name)
        if floor and parse(version) and parse(version) < floor:
            found.append(Finding("DRIVER_TOO_OLD", BLOCKER, f"{shown} is below the {name} floor {floor}",
                                 fix or f"upgrade the NVIDIA driver to {floor} or newer"))
    return found


def arch_targets(context):
    """FlashInfer's arch target of each of ``context.sms`` that torch's CUDA build (and
    an external venv's torch) can serve; the SMs it cannot are blockers."""
    config, torch_cuda, add = context.config, context.torch_cuda, context.add
    targets = []
    arch_list = _torch_arch_list(context)
    for sm in context.sms:
        if sm not in cuda_table.FIRST_CUDA_FOR_SM:
            add(Finding("SM_UNKNOWN", BLOCKER, f"compute capability {sm} is not in this release's tables",
                        "upgrade this tool, or report the GPU model"))
            continue
        if not cuda_table.cuda_supports_sm(torch_cuda, sm):
            first = cuda_table.FIRST_CUDA_FOR_SM[sm]
            add(Finding("SM_NEEDS_NEWER_CUDA", BLOCKER,
                        f"SM {sm} needs CUDA >= {first}; torch is built for CUDA {torch_cuda}",
                        f"use a torch build for CUDA {first} or newer (stack_torch_cuda)"))
            continue
        if arch_list is not None and not covers_sm(arch_list, sm):
            add(Finding("TORCH_LACKS_SM", BLOCKER,
                        f"torch (CUDA {torch_cuda}) carries {' '.join(arch_list)}, nothing for SM {sm}",
                        "use a torch build whose arch list covers this GPU"))
        try:
            targets.append(fi.normalize_arch(config.flashinfer, torch_cuda, sm))
        except fi.ArchError as error:
            add(Finding("SM_NEEDS_NEWER_CUDA", BLOCKER, f"FlashInfer {config.flashinfer}: {error}",
                        "use a torch build (and so a toolkit) for CUDA 12.9 or newer"))
    return tuple(targets)


def _torch_arch_list(context):
    """The SMs torch carries: an external venv's own, as probed; the build's otherwise."""
    torch = context.facts.get("torch") or {}
    if not context.config.venv_managed and torch.get("arch_list"):
        return torch["arch_list"]
    return arch_list_for_build(context.torch_cuda)
