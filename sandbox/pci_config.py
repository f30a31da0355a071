"""SANDBOX STAND-IN: PCI configuration space of the GPUs and of the bridge above each,
as the ``config`` files of sysfs hold it, for the real ``lspci`` (pciutils) to read.

The layout is pciutils' (lib/header.h, pciutils/pciutils): the standard header (vendor
0x00, device 0x02, status 0x06 with PCI_STATUS_CAP_LIST, class 0x09-0x0b, header type
0x0e, a bridge's bus numbers 0x18-0x1a, the capability pointer 0x34), one PCI Express
capability (PCI_CAP_ID_EXP 0x10: what makes lspci read the extended ones, ls-caps.c
show_caps) and, on a bridge, the Access Control Services extended capability at 0x100
(PCI_EXT_CAP_ID_ACS 0x0d: PCI_ACS_CAP at +4, PCI_ACS_CTRL at +6; ls-ecaps.c cap_acs
prints them as ``ACSCap:`` and ``ACSCtl:``). 4096 bytes: PCI Express's extended space.

The bridge is an AMD Starship/Matisse GPP bridge (1022:1483, pci.ids), the root-complex
bridge NVIDIA/nccl issue #2079 found ACS redirect on; its ACSCap is that report's.
"""

from __future__ import annotations

import struct

CONFIG_SIZE = 4096
ACS_OFFSET = 0x100
# Where the ACS control word sits: what the state acs-redirect sets and NCCL's
# troubleshooting guide clears (``setpci -v -s ${BDF} ECAP_ACS+0x6.w=0000``, docs.nvidia.com/deeplearning/nccl
# user-guide troubleshooting, "PCI Access Control Services (ACS)").
ACS_CTRL_OFFSET = ACS_OFFSET + 6
BRIDGE_VENDOR, BRIDGE_DEVICE, BRIDGE_CLASS = 0x1022, 0x1483, 0x060400
# ACSCap of nccl#2079's bridge: SrcValid TransBlk ReqRedir CmpltRedir UpstreamFwd DirectTrans.
ACS_CAP = 0x0001 | 0x0002 | 0x0004 | 0x0008 | 0x0010 | 0x0040
# ACSCtl of that bridge: SrcValid ReqRedir CmpltRedir UpstreamFwd (PCI_ACS_CTRL_*).
ACS_CTRL_REDIRECT = 0x0001 | 0x0004 | 0x0008 | 0x0010
_EXP_CAP = 0x40
# PCI_EXP_FLAGS: capability version 2, the port type in bits 4-7.
_EXP_TYPE_ENDPOINT, _EXP_TYPE_ROOT_PORT = 0x0, 0x4


def config_space(vendor: int, device: int, class_: int, bridge_buses: tuple[int, int] | None = None,
                 acs_ctrl: int = 0) -> bytes:
    """The config space of an endpoint, or of a bridge (*bridge_buses*: its primary and
    secondary bus) with an ACS capability whose control word is *acs_ctrl*.

    >>> space = config_space(BRIDGE_VENDOR, BRIDGE_DEVICE, BRIDGE_CLASS, (0x17, 0x18), ACS_CTRL_REDIRECT)
    >>> len(space), space[0x0e], hex(struct.unpack_from("<H", space, ACS_CTRL_OFFSET)[0])
    (4096, 1, '0x1d')
    """
    space = bytearray(CONFIG_SIZE)
    struct.pack_into("<HHHH", space, 0x00, vendor, device, 0x0006, 0x0010)
    struct.pack_into("<I", space, 0x08, class_ << 8)
    space[0x34] = _EXP_CAP
    port_type = _EXP_TYPE_ENDPOINT
    if bridge_buses is not None:
        space[0x0e] = 0x01
        primary, secondary = bridge_buses
        space[0x18:0x1b] = bytes((primary, secondary, secondary))
        port_type = _EXP_TYPE_ROOT_PORT
        struct.pack_into("<IHH", space, ACS_OFFSET, 0x000d | 1 << 16, ACS_CAP, acs_ctrl)
    struct.pack_into("<BBH", space, _EXP_CAP, 0x10, 0x00, 0x0002 | port_type << 4)
    return bytes(space)
