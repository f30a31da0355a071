"""NVIDIA's driver packages: the names deploy installs, holds and removes, per
distribution family and kernel module flavour.

Sources (NVIDIA Driver Installation Guide, docs.nvidia.com/datacenter/tesla/
driver-installation-guide/, read 2026-12-02):

- Debian page, "Compute-only (Headless) and Desktop-only (no Compute) Installation":
  open ``apt -V install nvidia-driver-cuda nvidia-kernel-open-dkms``, proprietary
  ``apt -V install nvidia-driver-cuda nvidia-kernel-dkms``; the names carry no branch.
- Ubuntu page, same section, branch 580: open ``libnvidia-compute-580
  nvidia-dkms-580-open``, proprietary ``libnvidia-compute-580 nvidia-dkms-580``.
  "Recent updates", table "Ubuntu 590 package renames": from 590 the branch leaves the
  names (``libnvidia-compute``, ``nvidia-dkms-open``, ``nvidia-dkms``); ``libnvidia-nscq``
  "no change".
- "Version locking" (APT) and "Recent updates", "Version locking packages for Ubuntu /
  Debian": ``nvidia-driver-pinning-<branch>`` ("APT driver pinning file for driver
  branch 580") and ``nvidia-driver-pinning-<version>`` ("... for driver version
  580.95.05"); "install the pinning package prior to installing the driver". The plan
  installs the version one: its lock holds one version.
- Fabric Manager user guide (docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/):
  ``nvidia-fabricmanager`` (unit ``nvidia-fabricmanager.service``) and ``libnvidia-nscq``
  at exactly the driver's version; on Ubuntu the 580 branch's Fabric Manager is
  ``nvidia-fabricmanager-580`` (NVIDIA's ubuntu2404 repository: nvidia-fabricmanager-580
  580.105.08-1). "Systems using fourth-generation NVSwitches" (NVLink5): ``nvlsm``,
  versioned on its own (``nvlsm_2025.06.10-1``), started by Fabric Manager itself
  (no unit of its own to enable).

The names of the toolkit-side packages are bringup/plan/driver.py's (TOOLKIT_SIDE).
"""

from dataclasses import dataclass

FLAVOURS = ("open", "proprietary")


@dataclass(frozen=True)
class DriverNames:
    """One distribution family's names for a driver branch."""

    # The compute-only roots of each flavour (the user space and the DKMS module).
    roots: dict
    # The DKMS module package of each flavour: the one a flavour switch purges.
    module: dict
    fabric: tuple
    nvlink5: tuple
    pinning: str


def family(os_id):
    """The naming family of an os-release ID: ``debian`` or ``ubuntu`` (None otherwise).

    >>> family("ubuntu"), family("debian"), family("rhel")
    ('ubuntu', 'debian', None)
    """
    return os_id if os_id in ("debian", "ubuntu") else None


def names(os_family, branch, version):
    """The package names of ``branch`` (version ``version``) for a family.

    >>> names("debian", "580", "580.95.05").roots["open"]
    ('nvidia-driver-cuda', 'nvidia-kernel-open-dkms')
    >>> names("ubuntu", "580", "580.95.05").roots["proprietary"]
    ('libnvidia-compute-580', 'nvidia-dkms-580')
    >>> names("ubuntu", "590", "590.44.01").module["open"], names("ubuntu", "580", "580.95.05").pinning
    ('nvidia-dkms-open', 'nvidia-driver-pinning-580.95.05')
    """
    pinning = f"nvidia-driver-pinning-{version}"
    if os_family == "debian":
        module = {"open": "nvidia-kernel-open-dkms", "proprietary": "nvidia-kernel-dkms"}
        return DriverNames({flavour: ("nvidia-driver-cuda", module[flavour]) for flavour in FLAVOURS}, module,
                           ("nvidia-fabricmanager", "libnvidia-nscq"), ("nvlsm",), pinning)
    if os_family == "ubuntu":
        suffix = f"-{branch}" if int(branch) < 590 else ""
        module = {"open": f"nvidia-dkms{suffix}-open", "proprietary": f"nvidia-dkms{suffix}"}
        return DriverNames({flavour: (f"libnvidia-compute{suffix}", module[flavour]) for flavour in FLAVOURS},
                           module, (f"nvidia-fabricmanager{suffix}", "libnvidia-nscq"), ("nvlsm",), pinning)
    raise ValueError(f"no driver package names for {os_family!r}")


def lock_family(distro):
    """The naming family of a repository distro directory.

    >>> lock_family("ubuntu2404"), lock_family("debian13")
    ('ubuntu', 'debian')
    """
    return "ubuntu" if distro.startswith("ubuntu") else "debian"
