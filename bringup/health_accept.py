"""The operator's acceptances of GPU health findings (the ``gpu_health_accept`` setting):
the form of an entry (``HealthAccept``) and what an entry accepts (``accepted``), in one
place, so the setting's check and the planner read an entry alike."""

import re

from bringup import setting_checks as checks
from bringup.findings import HEALTH_CODES


class HealthAccept(checks.Check):
    """A GPU health code, alone or on one GPU: ``CODE`` or ``CODE@<bus id>`` (the bus id as
    the finding names it, ``0000:18:00.0``; any case, the function optional); ``GPU_XID``
    may name one Xid (``GPU_XID:79``, ``GPU_XID:79@<bus id>``), so accepting one Xid a GPU
    logged does not accept the next, graver one.

    >>> HealthAccept().parse("GPU_XID@0000:3B:00"), HealthAccept().parse("GPU_ROW_REMAP_PENDING")
    ('GPU_XID@0000:3b:00', 'GPU_ROW_REMAP_PENDING')
    >>> HealthAccept().parse("GPU_XID:079@0000:3B:00.0"), HealthAccept().parse("GPU_XID:13")
    ('GPU_XID:79@0000:3b:00.0', 'GPU_XID:13')
    >>> HealthAccept().parse("GPU_XID@3b")
    Traceback (most recent call last):
    ...
    bringup.setting_checks.Invalid: use a GPU health code (GPU_RESET_REQUIRED, GPU_ECC_UNCORRECTABLE, \
GPU_PAGE_RETIREMENT_PENDING, GPU_ROW_REMAP_PENDING, GPU_ROW_REMAP_FAILED, GPU_PCIE_LINK_DEGRADED, GPU_SLOWDOWN, \
GPU_MISSING_FROM_DRIVER, GPU_XID, GPU_DIAG_FAILED), alone or as CODE@<bus id> such as GPU_XID@0000:18:00.0; GPU_XID:<Xid> for one Xid \
(GPU_XID:79@0000:18:00.0)
    """

    # sysfs's form: a 4-digit domain, or a wider one (an Intel VMD domain, 10000 on).
    BUS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}(\.[0-7])?$")
    XID = re.compile(r"^GPU_XID:(?P<xid>[0-9]{1,4})$")

    def parse(self, value):
        code, at, bus = checks.text(value).strip().partition("@")
        xid = self.XID.match(code)
        if (code not in HEALTH_CODES and not xid) or (at and not self.BUS.match(bus.lower())):
            raise checks.Invalid(f"use a GPU health code ({', '.join(HEALTH_CODES)}), alone or as CODE@<bus id> such "
                                 "as GPU_XID@0000:18:00.0; GPU_XID:<Xid> for one Xid (GPU_XID:79@0000:18:00.0)")
        code = f"GPU_XID:{int(xid['xid'])}" if xid else code
        return f"{code}@{bus.lower()}" if at else code


def same_gpu(a, b):
    """Whether two bus ids name one GPU: sysfs's (``0000:18:00.0``) and an Xid line's
    (``0000:18:00``, no function) alike.

    >>> same_gpu("0000:18:00.0", "0000:18:00"), same_gpu("0000:18:00.0", "0000:28:00.0")
    (True, False)
    """
    return a.lower().split(".")[0] == b.lower().split(".")[0]


def accepted(config, code, bus, xid=None):
    """The ``gpu_health_accept`` entry that accepts ``code`` on the GPU at ``bus`` (for
    ``GPU_XID``, the Xid ``xid``), or None.

    >>> from bringup.config import Config
    >>> accepted(Config.from_data({"gpu_health_accept": "GPU_XID@0000:18:00"}), "GPU_XID", "0000:18:00.0", 79)
    'GPU_XID@0000:18:00'
    >>> one_xid = Config.from_data({"gpu_health_accept": "GPU_XID:13@0000:18:00.0"})
    >>> accepted(one_xid, "GPU_XID", "0000:18:00.0", 13), accepted(one_xid, "GPU_XID", "0000:18:00.0", 79)
    ('GPU_XID:13@0000:18:00.0', None)
    >>> accepted(Config(), "GPU_XID", "0000:18:00.0") is None
    True
    """
    for entry in getattr(config, "gpu_health_accept", ()) or ():
        entry_code, _, entry_bus = entry.partition("@")
        entry_code, _, entry_xid = entry_code.partition(":")
        if entry_code == code and (not entry_xid or entry_xid == str(xid)) and (
                not entry_bus or (bus and same_gpu(entry_bus, bus))):
            return entry
    return None
