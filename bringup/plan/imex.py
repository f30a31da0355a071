"""IMEX on Grace-Blackwell NVL compute trays (GB200, GB300): the findings on the facts'
``imex`` (docs/facts.md; files/probe.d/imex.sh) and the GPUs, which bringup/plan/driver.py
adds beside the driver layer's, and the test for such a tray that keeps Fabric Manager's
findings off it. Pure functions of the facts.

A tray's NVLink reaches the rest of the rack through NVLink switch trays, which run the
fabric; the tray itself runs the ``nvidia-imex`` service and needs an IMEX channel for
CUDA's fabric-handle memory (NVIDIA IMEX user's guide, cited below).
"""



from bringup.driver_packages import names
from bringup.findings import BLOCKER, WARNING, Finding
from bringup.gpu_archs import needs_imex
from bringup.gpu_ids import bus_gpus
from bringup.versions import upstream

# NVIDIA IMEX Service for NVLink Networks user's guide,
# https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/ ("Overview", "Getting
# Started with IMEX", "IMEX Service Config Options", "IMEX Channels").
IMEX_GUIDE = "NVIDIA's IMEX user's guide, docs.nvidia.com/multi-node-nvlink-systems/imex-guide/"
IMEX_CHANNELS = "/dev/nvidia-caps-imex-channels"


def imex_node(facts):
    """Whether the node's GPUs are Grace-Blackwell NVL compute-tray parts (GB200, GB300),
    whose NVLink reaches the other trays through NVLink switch trays: they need IMEX, not
    Fabric Manager (bringup/gpu_archs.py ``needs_imex``); by nvidia-smi's names, else by
    the PCI bus (no driver yet).

    >>> imex_node({"gpus": [{"name": "NVIDIA GB200"}]}), imex_node({"gpus": [{"name": "NVIDIA B200"}]})
    (True, False)
    >>> imex_node({"gpus": [], "pci_gpus": [{"vendor": "10de", "device": "31c2"}]})
    True
    """
    return (any(needs_imex(name=gpu.get("name") or "") for gpu in facts.get("gpus") or [])
            or any(needs_imex(pci_id=gpu.get("device") or "") for gpu in bus_gpus(facts)))


def imex_package(version):
    """nvidia-imex's name in NVIDIA's repository for the driver's branch: ``nvidia-imex``
    from 580 on, ``nvidia-imex-<branch>`` before (NVIDIA's GPU driver container,
    github.com/NVIDIA/gpu-driver-container ``imex_install``: ``nvidia-imex=${DRIVER_VERSION}-1``
    for 580 and later, ``nvidia-imex-${DRIVER_BRANCH}=${DRIVER_VERSION}-1`` from 550).
    Canonical's archive names it ``nvidia-imex-<branch>`` (packages.ubuntu.com, source
    nvidia-imex-570 ``570.211.01-0ubuntu1.24.04.1``).

    >>> imex_package("580.95.05"), imex_package("570.172.08"), imex_package(None)
    ('nvidia-imex', 'nvidia-imex-570', 'nvidia-imex')
    """
    found = upstream(version)
    return names("debian", str(found.major), str(found)).imex[0] if found else "nvidia-imex"


def check_fabric_manager_on_tray(managers, unit, add):
    """FABRIC_MANAGER_NOT_ON_GB200: Fabric Manager installed or enabled on a compute tray,
    where it has no NVSwitch to drive (the switches are in the switch trays; leptonai/gpud#1106
    "GB200 to skip fabric-manager activeness in favor of fabric state")."""
    if not managers and (unit is None or (unit.get("active_state") != "active"
                                          and unit.get("unit_file_state") != "enabled")):
        return
    what = ", ".join([package["name"] for package in managers]
                     + ([f"nvidia-fabricmanager {unit.get('active_state')} ({unit.get('unit_file_state')})"]
                        if unit else []))
    add(Finding("FABRIC_MANAGER_NOT_ON_GB200", WARNING,
                f"Fabric Manager on a Grace-Blackwell compute tray ({what}): its NVLink fabric is set up from the "
                "NVLink switch trays, the tray needs IMEX instead (the IMEX_* findings); an enabled "
                "nvidia-fabricmanager finds no NVSwitch here and fails at every boot",
                "`systemctl disable --now nvidia-fabricmanager` (and `apt-get remove` its packages); run "
                f"nvidia-imex instead ({IMEX_GUIDE})"))


def check_imex(facts, version, add):
    """A Grace-Blackwell NVL compute tray (GB200, GB300): nvidia-imex installed at the
    driver's version, running, with a nodes config and the IMEX channel the CUDA
    processes share. Without a channel, CUDA's fabric-handle allocations
    (``cuMemCreate`` with CU_MEM_HANDLE_TYPE_FABRIC: NCCL's multi-node NVLink, symmetric
    memory) fail with CUDA_ERROR_NOT_PERMITTED (NVIDIA/nvbandwidth#39, microsoft/mscclpp#467;
    the guide's "IMEX Channels": "Failure to do so will result in dependent CUDA APIs
    failing with an insufficient permission error"). Nothing is said without the probe's
    ``imex`` (an older probe) or on other GPUs."""
    imex = facts.get("imex")
    if not imex or not imex_node(facts):
        return
    name, loaded = imex_package(version), upstream(version)
    pin = f"{name}={version}*" if version else f"{name}=<driver version>*"
    install = (f"`apt-get install '{pin}'` and `apt-mark hold {name}`, list the domain's trays in "
               "/etc/nvidia-imex/nodes_config.cfg, then `systemctl enable --now nvidia-imex`")
    packages = [package for package in imex.get("packages") or [] if package["name"].startswith("nvidia-imex")]
    unit = imex.get("unit")
    unit = unit if unit and unit.get("load_state") not in (None, "not-found") else None
    if not packages and unit is None:
        add(Finding("IMEX_MISSING", BLOCKER,
                    "a Grace-Blackwell compute tray (GB200/GB300) without NVIDIA IMEX (no nvidia-imex package, no "
                    "nvidia-imex unit): GPU memory is not shared across the NVLink domain, and CUDA's fabric-handle "
                    "allocations fail (CUDA_ERROR_NOT_PERMITTED) without its channels",
                    f"install IMEX at the driver's version {version or '(the loaded module)'}: {install} ({IMEX_GUIDE}, "
                    "\"Getting Started with IMEX\")"))
    other = [package for package in packages if loaded and upstream(package["version"]) not in (None, loaded)]
    if other:
        names = ", ".join(f"{package['name']} {package['version']}" for package in other)
        # NVIDIA ships IMEX with the driver, at its version (the driver container pins
        # nvidia-imex=${DRIVER_VERSION}; Canonical's nvidia-imex-<branch> follows the driver's).
        add(Finding("IMEX_VERSION", WARNING,
                    f"nvidia-imex is {names} but the loaded driver is {version}: IMEX is released with the driver, "
                    "at its version, and a different one is untested against it",
                    f"install IMEX at exactly the driver's version: {install}; or, when the driver is the one that "
                    "moved, reboot into the installed driver (DRIVER_LIBRARY_MISMATCH)"))
    config = imex.get("nodes_config") or {}
    # Without a nodes config listing the domain the service does not start (IMEX_NODES_CONFIG_EMPTY
    # says so): it is inactive for that reason, the administrator's, not for one of its own.
    if unit is not None and unit.get("active_state") != "active" and not other and config.get("peers", 0) > 0:
        add(Finding("IMEX_INACTIVE", BLOCKER,
                    f"nvidia-imex is {unit.get('active_state')} ({unit.get('unit_file_state')}) on a Grace-Blackwell "
                    "compute tray: memory exported over the NVLink fabric cannot be imported by the other trays",
                    "`systemctl enable --now nvidia-imex`; if it fails, `journalctl -u nvidia-imex` says why (a nodes "
                    f"config without this tray's address, a peer unreachable on its port) ({IMEX_GUIDE}, \"IMEX "
                    "Service Config Options\")"))
    if (packages or unit is not None) and config.get("peers", 0) <= 0:
        where = ("is missing" if not config.get("present") else "is not readable" if not config.get("readable")
                 else "lists no address")
        add(Finding("IMEX_NODES_CONFIG_EMPTY", WARNING,
                    f"the IMEX nodes config (config.cfg's IMEX_NODE_CONFIG_FILE, by default "
                    f"/etc/nvidia-imex/nodes_config.cfg) {where}: nvidia-imex does not start without the domain's "
                    "addresses (it finds its own among them), so no memory is shared with the rack's other trays; "
                    "deploy installs IMEX but leaves it stopped until the file lists them",
                    "write the IP address of every compute tray of the NVLink domain, one a line, the same file on "
                    f"each, then `systemctl enable --now nvidia-imex` (or deploy again) ({IMEX_GUIDE}, "
                    "\"Deployment Models\": populate nodes_config.cfg before starting the service; \"IMEX Service "
                    "Config Options\", IMEX_NODE_CONFIG_FILE)"))
    if not imex.get("channels"):
        registered = imex.get("channels_registered")
        # Channels come with a loaded driver: on a tray found without one the driver step (or the
        # operator) loads it first, and the plan made then (after the reboot) blocks if still none.
        add(Finding("IMEX_NO_CHANNEL", BLOCKER if loaded or registered else WARNING,
                    f"no IMEX channel ({IMEX_CHANNELS}/ has no channelN"
                    + ("" if registered else "; /proc/devices lists no nvidia-caps-imex-channels: the driver is not "
                       "loaded or predates IMEX channels") + "): CUDA's fabric-handle allocations (cuMemCreate with "
                    "CU_MEM_HANDLE_TYPE_FABRIC: NCCL's NVLink across trays, symmetric memory) fail with "
                    "CUDA_ERROR_NOT_PERMITTED; the driver creates none by default and none survives a reboot",
                    "have the driver create channel0 at every load: `echo 'options nvidia NVreg_CreateImexChannel0=1' "
                    "> /etc/modprobe.d/nvidia-imex-channel.conf && update-initramfs -u`, then reload the module or "
                    "reboot; for this boot only: `mkdir -p /dev/nvidia-caps-imex-channels && mknod -m 666 "
                    "/dev/nvidia-caps-imex-channels/channel0 c $(awk '$2==\"nvidia-caps-imex-channels\"{print $1}' "
                    f"/proc/devices) 0` ({IMEX_GUIDE}, \"IMEX Channels\": the administrator creates channelN with "
                    "mknod, or NVreg_CreateImexChannel0 has the open kernel module create channel0 when it loads)"))
