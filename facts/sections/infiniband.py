"""The ``infiniband`` section: the node's RDMA devices and GPUDirect RDMA
(files/probe.d/infiniband.sh ``probe_infiniband``) -> the facts document's ``infiniband``
(docs/facts.md).

What a serving group's NCCL needs of a node (issue 38): its InfiniBand HCAs and RoCE NICs
(``NCCL_IB_HCA`` names them; both are devices of ``/sys/class/infiniband``, told apart by a
port's link layer), each port's state and rate, the net devices of the same function, and
whether ``nvidia_peermem`` is loaded. The files are the kernel's stable sysfs ABI
(torvalds/linux ``Documentation/ABI/stable/sysfs-class-infiniband`` at
031616c434db05ce766f76c62865f55698e0924f: ``ports/<port-num>/state``, ``phys_state``, ``rate``,
``link_layer``); the text each holds is ``drivers/infiniband/core/sysfs.c``'s: ``state_show``
``"%d: %s"`` (DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER), ``phys_state_show`` ``"5: LinkUp"``,
``rate_show`` ``"%d%s Gb/sec (%dX%s)"`` (``400 Gb/sec (4X NDR)``) and ``link_layer_show``
``InfiniBand``, ``Ethernet`` (RoCE) or ``Unknown``.

``nvidia_peermem`` is a field here, not a section of its own: GPUDirect RDMA means something
only with an RDMA device (the module is NVIDIA's peer-memory client for the HCA's driver), and
the planner reads both together (no HCA: the module says nothing; HCAs without it: NCCL's
net transport goes through host memory).

Pure functions over the probe's lines (``KIND|DEVICE|PORT|VALUE``); a line of another shape is
skipped, never an error: these facts inform the plan, they do not gate the probe.
"""

import re

from bringup.facts_kinds import BOOL, STR, Items, Optional
from facts.probe_framing import Key, ProbeSection

# "4: ACTIVE" -> ACTIVE; "5: LinkUp" -> LinkUp; "7: Phy Test" -> Phy Test.
NUMBERED = re.compile(r"^\d+:\s*(?P<name>.+?)\s*$")
PORT_FILES = ("state", "phys_state", "rate", "link_layer")


def numbered_name(value):
    """A numbered sysfs value (``state``, ``phys_state``) -> its name; another text as it is.

    >>> numbered_name("4: ACTIVE"), numbered_name("5: LinkUp"), numbered_name("7: Phy Test"), numbered_name("x")
    ('ACTIVE', 'LinkUp', 'Phy Test', 'x')
    """
    found = NUMBERED.match(value)
    return found["name"] if found else value.strip()


def devices(lines):
    """The ``infiniband`` section's lines -> one device per name, in name order: its ports (in
    port order: state, phys_state, rate, link_layer, each None where the probe read nothing)
    and its net devices.

    >>> devices(["device|mlx5_0||", "state|mlx5_0|1|4: ACTIVE", "link_layer|mlx5_0|1|InfiniBand",
    ...          "net|mlx5_0||ib0"])
    [{'name': 'mlx5_0', 'ports': [{'port': '1', 'state': 'ACTIVE', 'phys_state': None, 'rate': None, 'link_layer': 'InfiniBand'}], 'net_devices': ['ib0']}]
    >>> devices(["garbage", "state|mlx5_9|1|4: ACTIVE"])
    []
    """
    found = {}
    for line in lines:
        parts = line.split("|", 3)
        if len(parts) != 4:
            continue
        kind, device, port, value = parts
        if kind == "device" and device:
            found.setdefault(device, {"name": device, "ports": {}, "net_devices": []})
        elif device not in found:
            continue
        elif kind in PORT_FILES and port.isdigit():
            ports = found[device]["ports"]
            entry = ports.setdefault(port, {"port": port, **dict.fromkeys(PORT_FILES)})
            entry[kind] = numbered_name(value) if kind in ("state", "phys_state") else value.strip()
        elif kind == "net" and value.strip():
            found[device]["net_devices"].append(value.strip())
    return [{**device, "ports": [device["ports"][port] for port in sorted(device["ports"], key=int)],
             "net_devices": sorted(device["net_devices"])} for _, device in sorted(found.items())]


def infiniband(by_name):
    """The ``infiniband`` and ``nvidia-peermem`` sections -> ``infiniband``; None from a probe
    without them (an older release).

    >>> from facts.probe_framing import Section
    >>> infiniband({"infiniband": Section("infiniband", 0), "nvidia-peermem": Section("nvidia-peermem", 0, (),
    ...     ["loaded=no"])})
    {'devices': [], 'nvidia_peermem': False}
    >>> infiniband({}) is None
    True
    """
    section = by_name.get("infiniband")
    if section is None:
        return None
    peermem = by_name.get("nvidia-peermem")
    return {"devices": devices(section.lines) if section.rc == 0 else [],
            "nvidia_peermem": peermem is not None and "loaded=yes" in peermem.lines}


SECTION = ProbeSection(
    name="infiniband",
    # File reads only, beside the PCI bus's (the same root).
    group=1,
    raw=("infiniband", "nvidia-peermem"),
    keys={
        "infiniband": Key(
            parse=infiniband,
            schema=Optional({
                "devices": Items({
                    "name": STR,
                    "ports": Items({"port": STR, "state": Optional(STR), "phys_state": Optional(STR),
                                    "rate": Optional(STR), "link_layer": Optional(STR)}),
                    "net_devices": Items(STR),
                }),
                "nvidia_peermem": BOOL,
            }),
            meaning=(
                "the RDMA devices under `/sys/class/infiniband` (InfiniBand HCAs and RoCE NICs: a port's `link_layer` "
                "`InfiniBand` or `Ethernet`), each port's state (`ACTIVE`...), physical state (`LinkUp`...) and rate "
                "as the kernel prints them, the net devices of the same function, and whether `nvidia_peermem` "
                "(GPUDirect RDMA) is loaded: what a serving group's `NCCL_IB_HCA` is made of; `devices` is `[]` on "
                "a node without RDMA; null (or absent) from an older probe"
            ),
            example={"devices": [{"name": "mlx5_0", "ports": [{"port": "1", "state": "ACTIVE", "phys_state": "LinkUp",
                                                               "rate": "400 Gb/sec (4X NDR)",
                                                               "link_layer": "InfiniBand"}],
                                  "net_devices": ["ibp24s0"]}],
                     "nvidia_peermem": True},
        ),
    },
)
