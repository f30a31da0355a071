"""The ``pci`` section: the ``pci-gpus`` raw section (files/probe.d/pci.sh ``probe_pci``) ->
the facts document's ``pci_gpus``
(docs/facts.md): the NVIDIA GPUs on the PCI bus, whether or not a driver drives them.

Pure functions over the lines the probe writes, one per GPU: the device's sysfs name
(its bus id), its ``vendor``, ``device`` and ``class`` files as sysfs prints them and the
driver bound to it (``0000:17:00.0 0x10de 0x2bb5 0x030200 nvidia``; an older probe's
line has no driver). A line these parsers do not recognise is skipped, never an error:
the bus informs the plan, it does not gate the probe.
"""

import re

from bringup.facts_kinds import STR, Items, Optional
from facts.probe_framing import Key, ProbeSection

BUS_ID = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
HEX_ID = re.compile(r"^0x(?P<id>[0-9a-f]{4})$")
# The PCI class code: base class and subclass (0300 VGA, 0302 3D controller), then the
# programming interface, which says nothing here.
CLASS = re.compile(r"^0x(?P<class>[0-9a-f]{4})[0-9a-f]{2}$")
# The drivers files/probe.d/pci.sh names (``other``: a driver bound but none of these;
# ``none``: no driver bound).
DRIVERS = ("nvidia", "vfio-pci", "nouveau", "other", "none")


def pci_gpu(line):
    """One probe line -> ``{"bus_id", "vendor", "device", "class", "driver"}`` (lower-case
    hex, no ``0x``; the class as base class and subclass; the driver bound, None from an
    older probe), or None for a line that is not one.

    >>> pci_gpu("0000:17:00.0 0x10de 0x2bb5 0x030200 vfio-pci")
    {'bus_id': '0000:17:00.0', 'vendor': '10de', 'device': '2bb5', 'class': '0302', 'driver': 'vfio-pci'}
    >>> pci_gpu("0000:17:00.0 0x10de 0x2bb5 0x030200")["driver"] is None
    True
    >>> pci_gpu("0000:17:00.0 0x10de none 0x030200") is None, pci_gpu("0000:17:00.0 0x10de 0x2bb5 0x030200 x") is None
    (True, True)
    """
    fields = line.strip().lower().split()
    if len(fields) not in (4, 5) or not BUS_ID.match(fields[0]) or (len(fields) == 5 and fields[4] not in DRIVERS):
        return None
    vendor, device, class_ = HEX_ID.match(fields[1]), HEX_ID.match(fields[2]), CLASS.match(fields[3])
    if not (vendor and device and class_):
        return None
    return {"bus_id": fields[0], "vendor": vendor["id"], "device": device["id"], "class": class_["class"],
            "driver": fields[4] if len(fields) == 5 else None}


def pci_gpus(by_name):
    """The ``pci-gpus`` section -> the GPUs on the bus, in bus order; ``[]`` when sysfs
    shows none, None when it could not be read or from a probe without the section (an
    older release).

    >>> from facts.probe_framing import Section
    >>> pci_gpus({"pci-gpus": Section("pci-gpus", 0, (), ["0000:18:00.0 0x10de 0x2901 0x030200"])})[0]["device"]
    '2901'
    >>> pci_gpus({"pci-gpus": Section("pci-gpus", 1)}), pci_gpus({})
    (None, None)
    """
    section = by_name.get("pci-gpus")
    if section is None or section.rc != 0:
        return None
    found = [gpu for gpu in map(pci_gpu, section.lines) if gpu]
    return sorted(found, key=lambda gpu: gpu["bus_id"])


SECTION = ProbeSection(
    name="pci",
    group=1,
    raw=("pci-gpus",),
    keys={
        # Absent in an older report, null where sysfs could not be read.
        "pci_gpus": Key(
            parse=pci_gpus,
            schema=Optional(Items({"bus_id": STR, "vendor": STR, "device": STR, "class": STR})),
            meaning=(
                "every NVIDIA (vendor `10de`) display or 3D controller (PCI class `0300`/`0302`) under "
                "`/sys/bus/pci/devices`, whatever driver holds it (one bound to `vfio-pci` is a virtual machine's, not "
                "counted among this host's GPUs): what names the GPUs of a node whose "
                "nvidia-smi lists none (no driver, or a module that refused them; `bringup/gpu_ids.py` maps its "
                "device id to the product and compute capability); `[]` when the bus has none, null when sysfs "
                "cannot be read (or absent, from an older probe: the plan then judges by nvidia-smi alone)"
            ),
        ),
    },
)
