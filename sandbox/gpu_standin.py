"""Hardware and toolkit stand-ins written into a sandbox node before it starts.

These are the only fakes in the sandbox (docs/contributing.md, "The sandbox"):

* the GPU driver: ``/usr/bin/nvidia-smi`` replaying an output recorded on a
  real machine (tests/fixtures/gpus/<profile>/), its ``-q`` and ``topo -m``
  assembled in NVIDIA's format (sandbox/driver_texts.py), an empty
  ``libcuda.so.1`` link stub, the loaded module's banner (node-init.sh shows it
  at /proc/driver/nvidia/version) and the driver package's nouveau blacklist;
  the driver states (sandbox/field_states.py) change these, and ``no-driver`` leaves
  only the recordings (the sandbox apt repository's driver packages replay them); the
  GPU health states (sandbox/gpu_health_states.py) are answers of their own, switched
  on a running node (``python -m sandbox health NAME STATE``);
* the PCI bus: ``/sys/bus/pci/devices/<bus id>`` per GPU of the profile (ids from
  tests/fixtures/gpus/<profile>/pci.txt) and per root port above one, links into a
  device tree as sysfs has them, each with ``vendor``, ``device``, ``class`` and its PCI
  config space (sandbox/pci_config.py: the bridges' ACS control, set by the state
  acs-redirect), on a tmpfs node-init.sh mounts (the host's devices never show), there
  with or without a driver;
* the incident's old CUDA 12.8 toolkit (``--toolkit incident``): an ``nvcc``
  that only reports its version (the one the apt repository's
  ``cuda-nvcc-12-8`` ships, ``sandbox/aptrepo/nvcc-12.8``), ``version.json``,
  the ``/usr/local/cuda`` symlink and an ``/etc/profile.d`` PATH snippet.

Everything is written into the node's overlay upper directory (the node is
not running yet), so the node never reads the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from sandbox import cpus
from sandbox.driver_texts import driver_texts
from sandbox.gpu_health_states import health_texts
from sandbox.fsutil import write_file
from sandbox.pci_config import (ACS_CTRL_REDIRECT, BRIDGE_CLASS, BRIDGE_DEVICE, BRIDGE_VENDOR,
                                 config_space)

FILES = Path(__file__).resolve().parent / "files"
# The incident's nvcc 12.8: the same stand-in the apt repository's cuda-nvcc-12-8 ships.
NVCC_12_8 = Path(__file__).resolve().parent / "aptrepo" / "nvcc-12.8"
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gpus"

NO_GPU = "none"  # pseudo-profile: no driver at all
NO_LIBCUDA = {NO_GPU, "driver-failed"}  # profiles without the libcuda stub
TOOLKITS = ("incident", "none")

# Where the recorded outputs land inside the node.
NODE_GPU_DATA = "usr/share/sandbox-gpu"
# The blacklist Debian's driver (nvidia-kernel-support) installs: a node with a driver
# has nouveau blacklisted, as it should (NOUVEAU_NOT_BLACKLISTED otherwise).
NOUVEAU_BLACKLIST = ("etc/modprobe.d", "nvidia-blacklists-nouveau.conf",
                     "# SANDBOX STAND-IN for the NVIDIA driver package's file (Debian's nvidia-kernel-support).\n"
                     "blacklist nouveau\n")


def libdir(machine: str) -> str:
    """Where Debian keeps *machine*'s shared libraries, as the driver package installs libcuda.

    >>> libdir("aarch64")
    'usr/lib/aarch64-linux-gnu'
    """
    return f"usr/lib/{cpus.TRIPLETS[machine]}"


CUDA_OLD = "usr/local/cuda-12.8"


def profiles() -> list[str]:
    """GPU profiles available to ``up --gpu`` (recorded ones plus ``none``)."""
    recorded = sorted(p.name for p in FIXTURES.iterdir() if (p / "smi.txt").is_file())
    return recorded + [NO_GPU]


def ensure_dir(upper: Path, lower: Path | list[Path], rel: str) -> Path:
    """Create ``upper/rel`` with each component's mode and owner taken from the lower layers.

    In an overlay a directory present in the upper layer shows the upper
    layer's attributes, so a careless 0700 /usr or 0755 /root would change
    the node. *lower* is the base, or the lower layers top first (state
    layers, then the base): the topmost that has a component decides.
    Components missing from all of them get 0755 root:root.
    """
    lowers = [lower] if isinstance(lower, Path) else list(lower)
    cur_up = upper
    for depth, part in enumerate(Path(rel).parts, start=1):
        cur_up = cur_up / part
        if cur_up.is_dir():
            continue
        sub = Path(*Path(rel).parts[:depth])
        st = next((os.lstat(low / sub) for low in lowers if (low / sub).is_dir()), None)
        cur_up.mkdir()
        os.chmod(cur_up, (st.st_mode & 0o7777) if st else 0o755)
        os.chown(cur_up, st.st_uid if st else 0, st.st_gid if st else 0)
    return cur_up


def install_driver(upper: Path, lower: Path, profile: str, machine: str = "x86_64", driver: bool = True) -> None:
    """Install the driver stand-in for *profile* (nothing for ``none``) on a node of *machine*'s CPU.

    *driver* False (the ``no-driver`` state): the GPUs' recordings only, which the sandbox
    apt repository's driver packages replay once installed (sandbox/aptrepo/driver_debs.py);
    no nvidia-smi, libcuda, module or nouveau blacklist.
    """
    if profile not in profiles():
        raise ValueError(f"unknown GPU profile {profile!r}; known: {', '.join(profiles())}")
    if profile == NO_GPU:
        return
    src = FIXTURES / profile
    data = ensure_dir(upper, lower, NODE_GPU_DATA)
    for name in ("query.csv", "smi.txt", "exit_code"):
        if (src / name).is_file():
            write_file(data / name, (src / name).read_bytes(), 0o644)
    texts = driver_texts(src, machine)
    for name, text in texts.items():
        write_file(data / name, text, 0o644)
    # The health states' answers (sandbox/gpu_health_states.py): health.csv, and what each
    # state changes under health/<state>/.
    recorded = {name: (src / name).read_text() for name in ("query.csv", "smi.txt") if (src / name).is_file()}
    for name, text in (health_texts(src, {**recorded, **texts}) if "smi-q.txt" in texts else {}).items():
        target = data / name
        if target.parent != data:
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        write_file(target, text, 0o644)
    write_file(data / "PROFILE", profile + "\n", 0o644)
    write_file(
        data / "README",
        "SANDBOX STAND-IN: recorded nvidia-smi outputs replayed by /usr/bin/nvidia-smi.\n"
        "smi-q.txt and topo.txt (nvidia-smi -q, topo -m) are ASSEMBLED in NVIDIA's format, not recorded;\n"
        "proc-version-* are recorded banners with this profile's driver version put in.\n"
        "This machine is a sandbox node and has no NVIDIA GPU or driver.\n",
        0o644,
    )
    if not driver:
        return
    if (data / "driver-version").is_file():
        # node-init.sh loads this module at boot unless a packaged one is installed.
        write_file(data / "module-preinstalled",
                   "SANDBOX STAND-IN: the preinstalled driver's module (driver-version), loaded at boot\n"
                   "unless a driver package's module is installed for the running kernel.\n", 0o644)
    conf_dir, conf_name, conf_text = NOUVEAU_BLACKLIST
    write_file(ensure_dir(upper, lower, conf_dir) / conf_name, conf_text, 0o644)
    _install_user_space(upper, lower, machine, data / "driver-version")
    bindir = ensure_dir(upper, lower, "usr/bin")
    write_file(bindir / "nvidia-smi", (FILES / "nvidia-smi").read_bytes(), 0o755)
    if profile not in NO_LIBCUDA:
        libs = ensure_dir(upper, lower, libdir(machine))
        write_file(libs / "libcuda.so.1", _libcuda_stub(machine), 0o644)
        os.symlink("libcuda.so.1", libs / "libcuda.so")


def _install_user_space(upper: Path, lower: Path | list[Path], machine: str, version_file: Path) -> None:
    """The driver's user space at the loaded module's version: an (empty) libnvidia-ml.so.<version>,
    the name the probe reads. Not where a state's package put another (library-mismatch):
    the node's own file would sit above it and hide the trap. Without it, a distribution
    package's libnvidia-ml (Debian's nvidia-cuda-toolkit pulls libnvidia-ml1 535) would be
    the node's user space and every node a DRIVER_LIBRARY_MISMATCH."""
    if not version_file.is_file():
        return
    lowers = [lower] if isinstance(lower, Path) else list(lower)
    if any(any((low / libdir(machine)).glob("libnvidia-ml.so.*.*")) for low in lowers):
        return
    name = f"libnvidia-ml.so.{version_file.read_text().strip()}"
    write_file(ensure_dir(upper, lower, libdir(machine)) / name, b"", 0o644)


def _libcuda_stub(machine: str) -> bytes:
    """Build the empty libcuda.so.1 (SANDBOX STAND-IN) for *machine* (the host's gcc, or
    Debian's cross compiler); it needs no C library, so none is linked."""
    with tempfile.TemporaryDirectory(prefix="sandbox-libcuda-") as tmp:
        out = Path(tmp) / "libcuda.so.1"
        cmd = [cpus.gcc(machine), "-shared", "-fPIC", "-nostdlib", "-Wl,-soname,libcuda.so.1", "-o", str(out),
               str(FILES / "libcuda-stub.c")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building the libcuda stub failed: {proc.stderr.strip()}")
        return out.read_bytes()


# ---- The PCI stand-in (the pci_gpus fact): kept apart from the driver's, which a driver
# state may take away; the GPUs stay on the bus with or without a driver. ----

# Where the profile's PCI devices land inside the node; node-init.sh copies them onto the
# tmpfs it mounts over /sys/bus/pci/devices. The bridges' config spaces with ACS redirect
# on (the acs-redirect state) lie beside them, one file per bridge, named by its address.
NODE_PCI_DATA = "usr/share/sandbox-pci/devices"
NODE_PCI_ACS_REDIRECT = "usr/share/sandbox-pci/acs-redirect"
# sysfs's device tree (/sys/devices/pci<domain>:<bus>/...) on the same tmpfs, under a
# name lspci (pciutils lib/sysfs.c sysfs_scan) and the probe's globs skip: a dot first.
PCI_TREE = ".devices"


def pci_devices(profile_dir: Path) -> list[tuple[str, str, str, str]]:
    """The profile's PCI devices (its ``pci.txt``): ``(bus id, vendor, device, class)`` as
    sysfs prints them; [] for a profile without one (``none``, ``driver-failed``).

    >>> pci_devices(FIXTURES / "mixed-b200-rtxpro")[1]
    ('0000:28:00.0', '0x10de', '0x2bb5', '0x030200')
    """
    source = profile_dir / "pci.txt"
    if not source.is_file():
        return []
    devices = []
    for line in source.read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            if len(fields) != 4:
                raise ValueError(f"{source}: expected '<bus id> <vendor> <device> <class>', got {line!r}")
            devices.append((fields[0], fields[1], fields[2], fields[3]))
    return devices


def bridge_of(bus_id: str) -> tuple[str, str]:
    """The host bridge and root port above the GPU at *bus_id*: each GPU on a host bridge
    of its own, as ``nvidia-smi topo -m``'s NODE between the GPUs of one CPU says
    ("traversing ... the interconnect between PCIe Host Bridges", sandbox/driver_texts.py).

    >>> bridge_of("0000:18:00.0")
    ('pci0000:17', '0000:17:01.1')
    """
    domain, bus = bus_id.split(":")[:2]
    upstream = f"{int(bus, 16) - 1:02x}"
    return f"pci{domain}:{upstream}", f"{domain}:{upstream}:01.1"


def _write_pci_function(directory: Path, vendor: int, device: int, class_: int, config: bytes) -> None:
    """One device's sysfs files: the ids lspci and the probe read (read-only, as sysfs has
    them), the ``irq`` and ``resource`` lspci requires (pciutils lib/sysfs.c: mandatory; no
    interrupt, no BARs) and ``config``, writable by root as sysfs's is."""
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    for name, value in (("vendor", f"0x{vendor:04x}"), ("device", f"0x{device:04x}"), ("class", f"0x{class_:06x}"),
                        ("irq", "0")):
        write_file(directory / name, value + "\n", 0o444)
    write_file(directory / "resource", "", 0o444)
    write_file(directory / "config", config, 0o644)


def write_pci_devices(target: Path, devices: list[tuple[str, str, str, str]], acs_target: Path | None = None) -> None:
    """sysfs's view of *devices* under *target*: each GPU below a root port of its own in
    the device tree (PCI_TREE), and ``<bus id>`` links to both, as /sys/bus/pci/devices
    links into /sys/devices; each bridge's config with ACS redirect on under *acs_target*."""
    for bus_id, vendor, device, class_ in devices:
        host, port = bridge_of(bus_id)
        primary, secondary = int(port.split(":")[1], 16), int(bus_id.split(":")[1], 16)
        port_dir = target / PCI_TREE / host / port
        _write_pci_function(port_dir, BRIDGE_VENDOR, BRIDGE_DEVICE, BRIDGE_CLASS,
                            config_space(BRIDGE_VENDOR, BRIDGE_DEVICE, BRIDGE_CLASS, (primary, secondary)))
        ids = int(vendor, 16), int(device, 16), int(class_, 16)
        _write_pci_function(port_dir / bus_id, *ids, config_space(*ids))
        for name, path in ((port, f"{PCI_TREE}/{host}/{port}"), (bus_id, f"{PCI_TREE}/{host}/{port}/{bus_id}")):
            (target / name).unlink(missing_ok=True)
            (target / name).symlink_to(path)
        if acs_target is not None:
            acs_target.mkdir(mode=0o755, parents=True, exist_ok=True)
            write_file(acs_target / port, config_space(BRIDGE_VENDOR, BRIDGE_DEVICE, BRIDGE_CLASS,
                                                       (primary, secondary), ACS_CTRL_REDIRECT), 0o644)


def install_pci(upper: Path, lower: Path | list[Path], profile: str) -> None:
    """SANDBOX STAND-IN for the node's PCI bus: *profile*'s GPUs (tests/fixtures/gpus/<profile>/pci.txt)
    and their bridges where node-init.sh finds them; nothing for a profile without GPUs on
    record (its bus is empty)."""
    if profile not in profiles():
        raise ValueError(f"unknown GPU profile {profile!r}; known: {', '.join(profiles())}")
    devices = pci_devices(FIXTURES / profile)
    if devices:
        write_pci_devices(ensure_dir(upper, lower, NODE_PCI_DATA), devices,
                          ensure_dir(upper, lower, NODE_PCI_ACS_REDIRECT))

# ---- end of the PCI stand-in ----


def install_toolkit(upper: Path, lower: Path, toolkit: str) -> None:
    """Install the toolkit state *toolkit* (``incident`` or ``none``)."""
    if toolkit not in TOOLKITS:
        raise ValueError(f"unknown toolkit state {toolkit!r}; known: {', '.join(TOOLKITS)}")
    if toolkit == "none":
        return
    # SANDBOX STAND-IN for the CUDA 12.8 toolkit found on the incident node.
    home = ensure_dir(upper, lower, CUDA_OLD)
    bindir = ensure_dir(upper, lower, CUDA_OLD + "/bin")
    write_file(bindir / "nvcc", NVCC_12_8.read_bytes(), 0o755)
    version = {"cuda": {"name": "CUDA SDK", "version": "12.8.1"}}
    write_file(home / "version.json", json.dumps(version, indent=3) + "\n", 0o644)
    # As NVIDIA's packages leave it: /usr/local/cuda -> the only toolkit.
    os.symlink("/" + CUDA_OLD, ensure_dir(upper, lower, "usr/local") / "cuda")
    # The way operators usually do it: login shells get 12.8 first on PATH.
    profile_d = ensure_dir(upper, lower, "etc/profile.d")
    write_file(
        profile_d / "cuda-12.8.sh",
        "# CUDA 12.8 (added by hand after the toolkit install)\n"
        'export PATH="/usr/local/cuda-12.8/bin${PATH:+:$PATH}"\n',
        0o644,
    )

