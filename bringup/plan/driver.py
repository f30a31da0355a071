"""The driver layer's findings: what nvidia-smi does not say.

``driver_layer_findings(facts, config, add)`` reads the facts' ``driver_layer``
(docs/facts.md; absent or null in an older report: nothing is said) and ``add``s one
``Finding`` per trap, as the other checks of the planner (bringup/plan/) do. Every decision here is a
pure function of the facts and the settings; the public texts each rule answers are
cited beside it (repo#number), and ``python -m bringup.explain`` names the same causes
from their log lines (bringup/explain.py).
"""

import re
import shlex

from bringup.canonical_driver import canonical_driver
from bringup.driver_reboot import next_boot_kernels
from bringup.findings import BLOCKER, INFO, WARNING, Finding
from bringup.gpu_archs import NVLINK5_MAJORS, OPEN_ONLY_MAJORS
from bringup.gpu_ids import bus_gpus, pci_gpus_sms
from bringup.plan.imex import check_fabric_manager_on_tray, check_imex, imex_node
from bringup.versions import UPSTREAM, upstream

# Packages whose upstream version is the user-space driver's (NVML comes with them).
USER_SPACE = re.compile(r"^(libnvidia-(compute|ml|gl|cfg)|nvidia-(utils|driver|compute-utils|headless))")
# What a reboot-required list names that the driver layer cares about: the driver's
# packages, and a new kernel (the next boot needs a module built for it).
DRIVER_OR_KERNEL = re.compile(r"^(nvidia|libnvidia|cuda-drivers|.*fabricmanager|nvlsm|linux-(image|modules))")
# The distribution's CUDA toolkit, whose names the probe's driver patterns (nvidia-*,
# libnvidia-*) also match: binaries of Debian's and Ubuntu's source package
# nvidia-cuda-toolkit (packages.debian.org/source/bookworm/nvidia-cuda-toolkit), plus the
# JRE its profilers pull in. They follow the toolkit, not the kernel module: neither held
# with the driver nor read as its user-space version.
TOOLKIT_SIDE = re.compile(r"^(nvidia-cuda-(toolkit|toolkit-doc|dev|gdb)|nvidia-(visual-)?profiler|nvidia-opencl-dev"
                          r"|nvidia-openjdk-\d+-jre|nvidia-nsight|lib\S*-dev)$")
# Kernel arguments that turn DMA translation on for the GPUs' P2P path, and those that
# keep it off (passthrough): NVIDIA/nccl#631 "passing iommu=pt to the linux kernel command
# line ... usually help".
IOMMU_ON = {"intel_iommu=on", "amd_iommu=on", "amd_iommu=force_isolation", "iommu=force", "iommu=nopt"}
IOMMU_OFF = {"iommu=pt", "iommu=off", "intel_iommu=off", "amd_iommu=off"}
# SGLang's parallelism flags: the GPUs one server takes are their product.
TP_FLAGS = ("--tp", "--tp-size", "--tensor-parallel-size")
DP_FLAGS = ("--dp", "--dp-size", "--data-parallel-size")
# What the P2P fixes cost (NVIDIA/nccl#631: P2P off means "just reduced performance";
# NVIDIA/nccl#2079: ACS cleared with setpci at runtime, "pci=noacs ... or disable ACS in BIOS").
P2P_FIXES = ("either (1) let P2P go direct: disable ACS on the GPUs' bridges in the BIOS (or at each boot "
             "`setpci -s <bridge> ECAP_ACS+6.w=0000`), and put the IOMMU in passthrough (`iommu=pt` in "
             "GRUB_CMDLINE_LINUX of /etc/default/grub, then `update-grub` and a reboot); costs a reboot and "
             "weakens device isolation (matters for VMs and device passthrough); or (2) keep P2P off: "
             "NCCL_P2P_DISABLE=1 in service_env and `--disable-custom-all-reduce` in service_args; costs "
             "all-reduce bandwidth (NCCL goes through host memory), so tensor-parallel decoding is slower")


def branch(version):
    """The driver branch of a version: its first part.

    >>> branch("580.95.05"), branch(None)
    ('580', '<branch>')
    """
    found = upstream(version)
    return str(found.major) if found else "<branch>"


def sm_major(gpu):
    """A GPU's compute capability major, or None ("[N/A]").

    >>> sm_major({"compute_cap": "12.0"}), sm_major({"compute_cap": "[N/A]"})
    (12, None)
    """
    match = re.match(r"^(\d+)\.\d+$", str(gpu.get("compute_cap") or ""))
    return int(match.group(1)) if match else None


def node_sm_majors(facts, config):
    """The compute capability majors of the node: its GPUs', else those on its PCI bus
    (bringup/gpu_ids.py), else the configured target_sms (a proprietary module on
    Blackwell lists no GPU: "No devices were found")."""
    majors = {sm_major(gpu) for gpu in facts.get("gpus") or []} - {None}
    if not majors:
        majors = {sm.major for sm in pci_gpus_sms(facts)}
    if not majors:
        majors = {int(sm.split(".")[0]) for sm in getattr(config, "target_sms", ()) or () if sm[:1].isdigit()}
    return majors


def requested_gpus(service_args):
    """The GPUs ``service_args`` ask one SGLang server for: tensor x data parallel (the last
    of each flag counts, as SGLang's argparse keeps it; a value that is not a number is the
    settings' check to refuse, not counted here).

    >>> requested_gpus("--tp 4 --dp=2"), requested_gpus(""), requested_gpus("--tp-size 8 --tp x")
    (8, 1, 8)
    """
    sizes = {"tp": 1, "dp": 1}
    words = shlex.split(service_args or "")
    for index, word in enumerate(words):
        flag, joined, value = word.partition("=")
        kind = "tp" if flag in TP_FLAGS else "dp" if flag in DP_FLAGS else None
        if kind is None:
            continue
        if not joined and index + 1 < len(words):
            value = words[index + 1]
        if value.isdigit() and int(value) > 0:
            sizes[kind] = int(value)
    return sizes["tp"] * sizes["dp"]


def _module_flavour(layer):
    """(flavour, where): the proprietary flavour where it is loaded or installed, else the loaded one's."""
    module, installed = layer.get("module") or {}, layer.get("installed_module") or {}
    if module.get("loaded") and module.get("flavour") == "proprietary":
        return "proprietary", "loaded"
    if installed.get("flavour") == "proprietary":
        return "proprietary", "installed for the running kernel"
    return module.get("flavour"), "loaded"


def _check_open_module(facts, config, layer, version, add):
    flavour, where = _module_flavour(layer)
    majors = node_sm_majors(facts, config) & OPEN_ONLY_MAJORS
    if flavour != "proprietary" or not majors:
        return
    sms = ", ".join(f"{major}.x" for major in sorted(majors))
    seen = ((layer.get("module") or {}).get("banner") or (layer.get("installed_module") or {}).get("license")
            or "proprietary")
    line = branch(version)
    # NVIDIA's driver installation guide, "Switching between Driver Module Flavors"
    # (docs.nvidia.com/datacenter/tesla/driver-installation-guide/advanced-options.html):
    # Debian "apt install --autoremove --purge nvidia-open", Ubuntu "... nvidia-open nvidia-driver-open".
    ubuntu = (facts.get("os") or {}).get("id") == "ubuntu"
    switch = f"apt-get install --autoremove --purge nvidia-open{' nvidia-driver-open' if ubuntu else ''}"
    add(Finding("DRIVER_OPEN_MODULE_REQUIRED", BLOCKER,
                f"the proprietary NVIDIA kernel module is {where} ({seen}) on a Blackwell GPU (compute capability "
                f"{sms}): Blackwell runs only on NVIDIA's open kernel modules; with the proprietary one nvidia-smi "
                "says \"No devices were found\" and the kernel log \"requires use of the NVIDIA open kernel modules\"",
                f"switch to the open modules of the {line} branch from NVIDIA's CUDA repository (NVIDIA's driver "
                f"installation guide, \"Switching between Driver Module Flavors\"): `{switch}`, then reboot; "
                "`modinfo -F license nvidia` then says Dual MIT/GPL"))


def driver_packages(layer):
    """The driver's own packages among those the probe listed (not the toolkit's).

    >>> [p["name"] for p in driver_packages({"packages": [{"name": "libnvidia-ml1"}, {"name": "libnvidia-ml-dev"},
    ...                                                   {"name": "nvidia-cuda-toolkit"}, {"name": "nvidia-open"}]})]
    ['libnvidia-ml1', 'nvidia-open']
    """
    return [package for package in layer.get("packages") or [] if not TOOLKIT_SIDE.match(package["name"])]


def _user_space_versions(layer):
    """The user-space driver versions the node has, as {Version: the text seen}: its
    libnvidia-ml.so.<version> files, else the upstream versions of its user-space packages."""
    found = {upstream(text): text for text in layer.get("nvml_libraries") or []}
    if not found:
        found = {upstream(package["version"]): UPSTREAM.match(package["version"]).group(1)
                 for package in driver_packages(layer)
                 if USER_SPACE.match(package["name"]) and upstream(package["version"])}
    found.pop(None, None)
    return found


def _check_library_mismatch(layer, add):
    module = layer.get("module") or {}
    loaded = upstream(module.get("version")) if module.get("loaded") else None
    libraries = _user_space_versions(layer)
    if loaded is None or not libraries or loaded in libraries:
        return
    # NVIDIA/ubuntu-packaging-nvidia-driver#3: "Failed to initialize NVML: Driver/library version mismatch".
    shown = ", ".join(libraries[version] for version in sorted(libraries))
    add(Finding("DRIVER_LIBRARY_MISMATCH", BLOCKER,
                f"the loaded kernel module is {module.get('version')} but the user-space driver (libnvidia-ml) is "
                f"{shown}: NVML and CUDA refuse a module of another version (\"Failed to initialize NVML: "
                "Driver/library version mismatch\"); user space was upgraded (unattended-upgrades) under a "
                "running module",
                _mismatch_fix(layer, loaded, libraries, shown)))


def _mismatch_fix(layer, loaded, libraries, shown):
    """A reboot loads the installed module: that cures the mismatch only when the installed
    module is the user space's version (modinfo's; unknown counts as the usual case, the
    whole driver upgraded under a running module)."""
    installed = upstream((layer.get("installed_module") or {}).get("version"))
    if installed is not None and installed not in libraries:
        return (f"the installed module ({installed}) is not the user space's version either: install the driver's "
                f"packages at one version (`apt-get install` its kernel module package at {shown}, or the user "
                f"space back at {loaded}), then reboot")
    return (f"reboot, which loads the installed module ({shown}); or, when no process uses the GPUs "
            "(`nvidia-smi` lists none), reload the modules without a reboot: `systemctl stop sglang "
            "nvidia-persistenced nvidia-fabricmanager; modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia "
            "&& modprobe nvidia nvidia_uvm`; then hold the driver's packages (DRIVER_NOT_HELD) so it does not "
            "happen again")


def _package(layer, pattern):
    return [package for package in layer.get("packages") or [] if re.search(pattern, package["name"])]


def _unit(layer, name):
    """A driver daemon's unit state, None when the node has no such unit."""
    unit = (layer.get("units") or {}).get(name)
    return unit if unit and unit.get("load_state") not in (None, "not-found") else None


def _check_fabric(facts, layer, version, add):
    """NVSwitch nodes: Fabric Manager at exactly the module's version, running; NVLSM on
    NVLink5; every GPU's fabric Completed. CUDA otherwise fails with "Error 802: system not
    yet initialized" while nvidia-smi looks healthy (dstackai/dstack#2348, NVIDIA/nvtrust#55)."""
    switches = layer.get("nvswitch_count") or 0
    if imex_node(facts):
        # A Grace-Blackwell compute tray: Fabric Manager runs on the NVLink switch trays,
        # the tray runs IMEX (bringup/plan/imex.py); it is never told to install Fabric Manager.
        check_fabric_manager_on_tray(_package(layer, r"fabricmanager"), _unit(layer, "nvidia-fabricmanager"), add)
        return
    if switches <= 0:
        return
    line, loaded = branch(version), upstream(version)
    pin = f"nvidia-fabricmanager={version}*" if version else "nvidia-fabricmanager=<driver version>*"
    install = (f"`apt-get install '{pin}'` (before the 580 branch: nvidia-fabricmanager-{line}) and "
               "`apt-mark hold nvidia-fabricmanager`, then `systemctl enable --now nvidia-fabricmanager`")
    managers = _package(layer, r"fabricmanager")
    unit = _unit(layer, "nvidia-fabricmanager")
    if not managers and unit is None:
        add(Finding("FABRIC_MANAGER_MISSING", BLOCKER,
                    f"{switches} NVSwitch(es) and no Fabric Manager (no package, no nvidia-fabricmanager unit): the "
                    "GPUs' fabric is never set up and CUDA fails with \"Error 802: system not yet initialized\" "
                    "although nvidia-smi lists the GPUs",
                    f"install Fabric Manager at the driver's version {version or '(the loaded module)'}: {install}"))
    other = [package for package in managers if loaded and upstream(package["version"]) not in (None, loaded)]
    if other:
        names = ", ".join(f"{package['name']} {package['version']}" for package in other)
        # NVIDIA/nvtrust#55, NVIDIA/gpu-operator#544: "fabric manager NVIDIA GPU driver interface
        # version ... don't match with driver version ...".
        add(Finding("FABRIC_MANAGER_VERSION", BLOCKER,
                    f"Fabric Manager is {names} but the loaded driver is {version}: it refuses to start (\"fabric "
                    "manager NVIDIA GPU driver interface version ... don't match with driver version ...\") and CUDA "
                    "fails with \"Error 802: system not yet initialized\"",
                    f"install Fabric Manager at exactly the driver's version: {install}; or, when the driver is the "
                    "one that moved, reboot into the installed driver (DRIVER_LIBRARY_MISMATCH)"))
    if unit is not None and unit.get("active_state") != "active" and not other:
        add(Finding("FABRIC_MANAGER_INACTIVE", BLOCKER,
                    f"nvidia-fabricmanager is {unit.get('active_state')} ({unit.get('unit_file_state')}) on a node "
                    f"with {switches} NVSwitch(es): CUDA fails with \"Error 802: system not yet initialized\"",
                    "`systemctl enable --now nvidia-fabricmanager`; if it fails, `journalctl -u nvidia-fabricmanager` "
                    "says why (`python -m bringup.explain` names a version mismatch)"))
    nvlink5 = any(sm_major(gpu) in NVLINK5_MAJORS for gpu in facts.get("gpus") or [])
    if nvlink5 and not _package(layer, r"^nvlsm") and _unit(layer, "nvlsm") is None:
        add(Finding("NVLSM_MISSING", BLOCKER,
                    f"an NVLink5 node ({switches} NVSwitch(es), compute capability 10.x) without NVLSM: Fabric "
                    "Manager cannot bring up the NVLink5 fabric without NVLSM (and its InfiniBand modules)",
                    "`apt-get install nvlsm` (NVIDIA's CUDA repository) and load the InfiniBand modules "
                    "(`modprobe ib_umad`), then `systemctl restart nvidia-fabricmanager`"))
    # "N/A": a GPU that does not report a fabric state (A100 under NVSwitch gen 2 has none
    # in nvidia-smi -q; Fabric Manager's own state is the unit's then).
    waiting = [gpu for gpu in layer.get("gpus") or [] if gpu.get("fabric_state") not in (None, "N/A", "Completed")]
    if waiting:
        states = ", ".join(f"GPU {gpu['index']} {gpu['fabric_state']}"
                           + (f" ({gpu['fabric_status']})" if gpu.get("fabric_status") else "") for gpu in waiting)
        add(Finding("FABRIC_NOT_READY", BLOCKER,
                    f"the NVSwitch fabric is not set up: {states} (`nvidia-smi -q` Fabric State, expected "
                    "Completed); CUDA fails with \"Error 802: system not yet initialized\" until it is",
                    "get Fabric Manager running at the driver's version (the FABRIC_MANAGER_* findings), then wait "
                    "for `nvidia-smi -q | grep -A2 Fabric` to say Completed on every GPU; "
                    "`journalctl -u nvidia-fabricmanager` says what it is waiting for"))


def _has_nvidia(facts, layer):
    """The node has NVIDIA's GPUs or driver: a GPU listed or on the PCI bus, a module loaded
    or installed, or a driver package (a node with none has no use for a nouveau blacklist)."""
    installed = layer.get("installed_module") or {}
    return bool(facts.get("gpus") or bus_gpus(facts) or (layer.get("module") or {}).get("loaded")
                or installed.get("version") or driver_packages(layer))


def _check_nouveau(facts, layer, add):
    nouveau = layer.get("nouveau") or {}
    blacklist = ("`printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' > "
                 "/etc/modprobe.d/blacklist-nouveau.conf && update-initramfs -u`")
    if nouveau.get("loaded"):
        add(Finding("NOUVEAU_LOADED", BLOCKER,
                    "the nouveau module is loaded: it holds the GPUs and the NVIDIA module cannot bind them",
                    f"blacklist it ({blacklist}) and reboot"))
    # A warning, not a fix: no deploy step writes the blacklist yet (the driver step will).
    if not nouveau.get("blacklisted") and _has_nvidia(facts, layer):
        add(Finding("NOUVEAU_NOT_BLACKLISTED", WARNING,
                    "nouveau is not blacklisted (no \"blacklist nouveau\" in /etc/modprobe.d, /lib/modprobe.d, "
                    "/usr/lib/modprobe.d): a boot that loads it before the NVIDIA module leaves no GPU",
                    f"{blacklist}"))
    stale = [kernel["release"] for kernel in (layer.get("kernel") or {}).get("installed") or []
             if kernel.get("initramfs") == "stale"]
    if stale and nouveau.get("blacklisted"):
        add(Finding("NOUVEAU_INITRAMFS_STALE", WARNING,
                    f"the initramfs of kernel {', '.join(stale)} (/boot/initrd.img-<release>) does not hold the nouveau "
                    "blacklist (older than the blacklist file, or lsinitramfs does not list it): a boot of it loads "
                    "nouveau from the initramfs before the NVIDIA module",
                    " && ".join(f"`update-initramfs -u -k {release}`" for release in stale)))


def _check_holds(layer, add):
    loose = [package["name"] for package in driver_packages(layer) if not package.get("held")]
    if loose:
        # pando85/homelab#4110, NVIDIA/gpu-driver-container#735: an unheld driver moves under
        # the running module.
        add(Finding("DRIVER_NOT_HELD", WARNING,
                    f"the driver's packages are not held ({', '.join(loose)}): the next unattended upgrade moves "
                    "user space past the loaded module (DRIVER_LIBRARY_MISMATCH, Fabric Manager at another version) "
                    "until a reboot",
                    f"`apt-mark hold {' '.join(loose)}` (`apt-mark unhold` them to upgrade the driver on purpose, "
                    "then reboot)"))


# What deploy does with Canonical's driver, said by validate before the plan's driver step
# rewrites it (bringup/plan/driver_step.py: as_fixes names the plan's own choice).
CANONICAL_FIX = ("driver_manage: false (the default) leaves it as it is: deploy touches no driver package. With "
                 "driver_manage: true deploy adopts it when it is driver_branch's branch, the planned flavour and "
                 "built by DKMS at the lock's upstream version (then holds it and keeps it out of "
                 "unattended-upgrades), and otherwise replaces it with NVIDIA's locked packages in one apt run "
                 "(Canonical's purged), then a reboot")


def _check_canonical(layer, add):
    """Canonical's driver (``ubuntu-drivers install [--gpgpu]``, bringup/canonical_driver.py): named, an info."""
    found = canonical_driver(layer.get("packages"))
    if not found:
        return
    add(Finding("DRIVER_CANONICAL", INFO,
                f"Canonical's NVIDIA driver from Ubuntu's archive (ubuntu-drivers) is installed: {found.summary()}; "
                f"driver {', '.join(found.versions) or 'version unknown'}: {' '.join(found.packages)}",
                CANONICAL_FIX))


def _check_persistence(layer, add):
    off = [gpu["index"] for gpu in layer.get("gpus") or [] if gpu.get("persistence_mode") == "Disabled"]
    if off:
        add(Finding("PERSISTENCE_OFF", WARNING,
                    f"persistence mode is off on GPU {', '.join(str(index) for index in off)}: the driver tears the "
                    "GPUs down when the last client exits, so every CUDA start pays seconds of initialisation",
                    "`systemctl enable --now nvidia-persistenced` (the driver's daemon; `nvidia-smi -pm 1` lasts "
                    "until the next boot only)"))


def _check_kernel_build(layer, add):
    """The module for the running kernel: built by DKMS, with that kernel's headers. A
    blocker when no module is loaded (nothing to run on), else for the next boot."""
    kernel = layer.get("kernel") or {}
    release = kernel.get("release") or "$(uname -r)"
    entries = [entry for entry in layer.get("dkms") or [] if entry["module"].startswith("nvidia")]
    dkms_managed = bool(entries) or bool(_package(layer, r"dkms"))
    severity = WARNING if (layer.get("module") or {}).get("loaded") else BLOCKER
    built = [entry for entry in entries if entry["kernel"] == release and entry["status"] == "installed"]
    if entries and not built:
        states = ", ".join(f"{entry['module']}/{entry['version']} {entry['status']} for {entry['kernel']}"
                           for entry in entries)
        add(Finding("DKMS_NOT_BUILT", severity,
                    f"DKMS has not built the NVIDIA module for the running kernel {release} ({states})"
                    + ("" if severity == BLOCKER else ": the module in memory works until the next boot"),
                    f"`apt-get install linux-headers-{release}` if missing, then `dkms autoinstall -k {release}` "
                    "(`dkms status` then says installed), and reboot or `modprobe nvidia`"))
    if dkms_managed and kernel and not kernel.get("headers"):
        add(Finding("KERNEL_HEADERS_MISSING", severity,
                    f"no headers for the running kernel {release} (/lib/modules/{release}/build): DKMS cannot "
                    "build the NVIDIA module for it"
                    + ("" if severity == BLOCKER else ", so the next boot after a kernel change has no driver"),
                    f"`apt-get install linux-headers-{release}` (and the headers metapackage, e.g. linux-headers-amd64 "
                    "or linux-headers-generic, so later kernels get theirs), then `dkms autoinstall`"))
    later = set(next_boot_kernels(kernel or {}))
    pending = [entry["release"] for entry in (kernel or {}).get("installed") or []
               if entry.get("release") in later and not entry.get("headers")]
    if dkms_managed and pending:
        add(Finding("KERNEL_HEADERS_PENDING", WARNING,
                    f"kernel {', '.join(pending)} is installed (newer than the running one: the next boot starts it) without its headers "
                    "(/lib/modules/<release>/build): DKMS cannot build the NVIDIA module for it, so the next boot "
                    "has no driver",
                    f"`apt-get install {' '.join(f'linux-headers-{release}' for release in pending)}`, then "
                    + " && ".join(f"`dkms autoinstall -k {release}`" for release in pending)))


def _check_reboot(layer, add):
    pending = layer.get("reboot_required") or {}
    if not pending.get("required"):
        return
    listed = pending.get("packages") or []
    named = [name for name in listed if DRIVER_OR_KERNEL.match(name)]
    if listed and not named:
        return
    add(Finding("REBOOT_PENDING", WARNING,
                f"a reboot is pending for {', '.join(named) if named else 'packages not named (/run/reboot-required)'}"
                ": the running driver is not the installed one until then",
                "reboot when the node may go down (`systemctl reboot`), then validate again"))


def _pcie_only(facts, layer):
    """Whether the GPUs are several and linked by PCIe only (no NVLink in `nvidia-smi topo -m`)."""
    if len(facts.get("gpus") or []) < 2:
        return False
    topology = layer.get("topology")
    if topology is None:
        return not layer.get("nvswitch_count")
    return bool(topology) and not any(pair["link"].startswith("NV") for pair in topology)


def _check_p2p(facts, layer, add):
    """ACS redirect or IOMMU translation on the P2P path of a multi-GPU PCIe node: NCCL
    hangs at init or the first all-reduce (NVIDIA/nccl#2079, #631, #606), SGLang's custom
    all-reduce misbehaves without NVLink (sgl-project/sglang#25649)."""
    if not _pcie_only(facts, layer):
        return
    redirecting = [entry for entry in layer.get("acs") or [] if entry.get("redirect")]
    if redirecting:
        bridges = sorted({entry["bridge"] for entry in redirecting})
        shown = ", ".join(f"{entry['bridge']} above GPU {entry['gpu_bus_id']} ({entry['ctl']})"
                          for entry in redirecting[:4])
        more = f" and {len(redirecting) - 4} more" if len(redirecting) > 4 else ""
        add(Finding("P2P_ACS_REDIRECT", WARNING,
                    f"ACS redirects peer-to-peer traffic to the root complex on {len(bridges)} bridge(s) between the "
                    f"GPUs ({shown}{more}): NCCL may hang at init or at the first all-reduce with tensor parallelism",
                    P2P_FIXES.replace("<bridge>", bridges[0] if len(bridges) == 1 else "<bridge>")))
    arguments = set(layer.get("iommu_args") or [])
    translating = sorted(arguments & IOMMU_ON)
    if translating and not arguments & IOMMU_OFF:
        add(Finding("P2P_IOMMU", WARNING,
                    f"the kernel translates the GPUs' DMA through the IOMMU ({' '.join(translating)} on /proc/cmdline, "
                    "no iommu=pt): peer-to-peer traffic between the GPUs goes through it and NCCL may hang or crawl",
                    P2P_FIXES))


def _check_mig(layer, config, add):
    gpus = layer.get("gpus") or []
    sliced = [gpu["index"] for gpu in gpus if gpu.get("mig_mode") == "Enabled"]
    if not sliced:
        return
    whole = len(gpus) - len(sliced)
    wanted = requested_gpus(getattr(config, "service_args", ""))
    listed = ", ".join(str(index) for index in sliced)
    disable = f"`nvidia-smi -i {listed} -mig 0` (then reset the GPUs or reboot)"
    # sgl-project/sglang#25670; NVIDIA/nccl#1716: "MIG doesn't support P2P from CUDA using
    # either PCIE or NVLINK".
    if wanted > whole:
        add(Finding("MIG_ENABLED", BLOCKER,
                    f"MIG is on for GPU {listed}: service_args ask for {wanted} GPU(s) (tensor x data parallel) and "
                    f"the node has {whole} whole one(s); SGLang's NCCL fails on MIG slices (no P2P between them)",
                    f"turn MIG off on the GPUs the service uses: {disable}; or ask for at most {whole} GPU(s) in "
                    "service_args (--tp-size x --dp-size)"))
        return
    add(Finding("MIG_ENABLED", WARNING,
                f"MIG is on for GPU {listed}: the service asks for {wanted} GPU(s) and has {whole} whole one(s); a "
                "MIG GPU in CUDA_VISIBLE_DEVICES gives SGLang slices it cannot use for tensor parallelism",
                f"keep the service on the whole GPUs, or turn MIG off: {disable}"))


def driver_layer_findings(facts, config, add):
    """The driver layer's findings for a node.

    + facts: the facts document (docs/facts.md); ``driver_layer`` absent or null says nothing
    + config: the settings (``service_args``, ``target_sms``)
    + add: called with each ``Finding``

    >>> found = []
    >>> layer = {"module": {"loaded": True, "version": "580.95.05", "flavour": "open", "banner": None},
    ...          "nvml_libraries": ["580.105.08"], "packages": [], "nouveau": {"loaded": False,
    ...          "blacklisted": True}, "nvswitch_count": 0, "units": {}, "gpus": []}
    >>> driver_layer_findings({"gpus": [], "driver_layer": layer}, None, found.append)
    >>> [(finding.code, finding.severity) for finding in found]
    [('DRIVER_LIBRARY_MISMATCH', 'blocker')]
    """
    layer = facts.get("driver_layer")
    if not layer:
        # The imex section is a section of its own: read without the driver layer too.
        check_imex(facts, (facts.get("driver") or {}).get("version"), add)
        return
    module = layer.get("module") or {}
    version = (module.get("version") if module.get("loaded") else None) or (facts.get("driver") or {}).get("version")
    _check_open_module(facts, config, layer, version, add)
    _check_library_mismatch(layer, add)
    _check_fabric(facts, layer, version, add)
    check_imex(facts, version, add)
    _check_nouveau(facts, layer, add)
    _check_canonical(layer, add)
    _check_holds(layer, add)
    _check_persistence(layer, add)
    _check_kernel_build(layer, add)
    _check_reboot(layer, add)
    _check_p2p(facts, layer, add)
    _check_mig(layer, config, add)
