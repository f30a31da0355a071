"""The sandbox's PCI stand-in (sandbox/gpu_standin.py install_pci, sandbox/pci_config.py):
the bridges' config space in pciutils' layout, read back at lib/header.h's offsets, the
real probe finding each GPU's root port in the stand-in's tree, and the real ``lspci``
printing the ACS control from those bytes where this machine has pciutils (the sandbox
test tests/sandbox/test_driver_states.py runs the node's own lspci on them in any case)."""

import shutil
import struct
import subprocess

import pytest

from sandbox import gpu_standin
from sandbox.pci_config import ACS_CTRL_OFFSET, ACS_CTRL_REDIRECT, ACS_OFFSET, CONFIG_SIZE
from tests.unit.test_probe_driver import run_driver_probe
from tests.unit.test_probe_pci import sandbox_bus

PROFILE = "rtx-pro-6000-x8"
GPUS = [f"0000:{0x18 + 0x10 * index:02x}:00.0" for index in range(8)]


def word(space, offset):
    return struct.unpack_from("<H", space, offset)[0]


def acs_bus(tmp_path, redirect):
    """The node's bus as node-init.sh leaves it, with the acs-redirect state or without."""
    root = sandbox_bus(tmp_path, PROFILE)
    bus = root / "sys/bus/pci/devices"
    if redirect:
        for bridge in (tmp_path / "upper" / gpu_standin.NODE_PCI_ACS_REDIRECT).iterdir():
            shutil.copyfile(bridge, bus / bridge.name / "config")
    return root, bus


@pytest.mark.parametrize("redirect, control", [(False, 0), (True, ACS_CTRL_REDIRECT)])
def test_each_bridge_has_pcie_and_acs_capabilities_at_pciutils_offsets(tmp_path, redirect, control):
    _, bus = acs_bus(tmp_path, redirect)
    for gpu in GPUS:
        port = gpu_standin.bridge_of(gpu)[1]
        space = (bus / port / "config").read_bytes()
        assert len(space) == CONFIG_SIZE
        # PCI_VENDOR_ID, PCI_STATUS_CAP_LIST, PCI_CLASS_DEVICE (bridge, PCI-to-PCI), PCI_HEADER_TYPE_BRIDGE.
        assert (word(space, 0x00), word(space, 0x06) & 0x10, word(space, 0x0a), space[0x0e]) == (0x1022, 0x10,
                                                                                                  0x0604, 1)
        # PCI_PRIMARY_BUS / PCI_SECONDARY_BUS: the GPU's bus is the bridge's secondary one.
        assert space[0x19] == int(gpu.split(":")[1], 16) and space[0x18] == int(port.split(":")[1], 16)
        # PCI_CAPABILITY_LIST -> PCI_CAP_ID_EXP, a root port (PCI_EXP_TYPE_ROOT_PORT in PCI_EXP_FLAGS_TYPE).
        cap = space[0x34]
        assert space[cap] == 0x10 and (word(space, cap + 2) & 0xf0) >> 4 == 0x4
        # The extended capability list's first entry: PCI_EXT_CAP_ID_ACS, version 1, the last.
        header = struct.unpack_from("<I", space, ACS_OFFSET)[0]
        assert (header & 0xffff, header >> 16 & 0xf, header >> 20) == (0x0d, 1, 0)
        assert word(space, ACS_CTRL_OFFSET) == control
        # ReqRedir (PCI_ACS_CTRL_REQ_RED) and CmpltRedir (PCI_ACS_CTRL_CMPLT_RED): the ones that redirect.
        assert bool(word(space, ACS_CTRL_OFFSET) & 0x0c) is redirect
        assert (bus / gpu / "config").read_bytes()[:4] == b"\xde\x10\xb5\x2b"


def test_the_probe_finds_each_gpus_root_port_in_the_tree(tmp_path):
    """files/probe.d/driver_layer.sh's driver_pci_gpus follows the links as on a real node: each GPU
    below its own root port (no lspci here: the ACS control is unknown, not "none")."""
    acs_bus(tmp_path, redirect=True)
    raw, layer = run_driver_probe(tmp_path)
    body = raw.split("@@ driver-pci-paths rc=0\n", 1)[1].split("@@", 1)[0]
    paths = [line.removeprefix("|") for line in body.splitlines()]
    assert paths == [f"{gpu} {gpu_standin.bridge_of(gpu)[1]}" for gpu in GPUS]
    assert layer["acs"] is None


@pytest.mark.parametrize("redirect, flags", [(True, "ReqRedir+ CmpltRedir+"), (False, "ReqRedir- CmpltRedir-")])
def test_the_real_lspci_reads_the_acs_control(tmp_path, redirect, flags):
    lspci = shutil.which("lspci", path="/usr/bin:/bin:/usr/sbin:/sbin")
    assert lspci, "no lspci on this machine: `make sandbox-deps` installs pciutils (sandbox/host-packages.txt)"
    root, _ = acs_bus(tmp_path, redirect)
    out = subprocess.run([lspci, "-A", "linux-sysfs", "-O", f"sysfs.path={root}/sys/bus/pci", "-D", "-vvv",
                          "-d", "::0604"], capture_output=True, text=True, timeout=30, check=True).stdout
    controls = [line.split("ACSCtl:", 1)[1].split() for line in out.splitlines() if "ACSCtl:" in line]
    assert len(controls) == len(GPUS)
    assert all(set(flags.split()) <= set(control) for control in controls), out
