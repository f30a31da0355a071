"""NVIDIA's driver packages: the names deploy installs, holds and removes, per
distribution family and kernel module flavour, as NVIDIA's CUDA repository
(developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/) serves them.

Sources (NVIDIA Driver Installation Guide, docs.nvidia.com/datacenter/tesla/
driver-installation-guide/, read 2026-12-02):

- Debian page, "Compute-only (Headless) and Desktop-only (no Compute) Installation":
  open ``apt -V install nvidia-driver-cuda nvidia-kernel-open-dkms``, proprietary
  ``apt -V install nvidia-driver-cuda nvidia-kernel-dkms``; the names carry no branch.
- Ubuntu page, same section, branch 580: open ``libnvidia-compute-580
  nvidia-dkms-580-open``, proprietary ``libnvidia-compute-580 nvidia-dkms-580``.
  "Recent updates", table "Ubuntu 590 package renames": from 590 the branch leaves the
  names (``libnvidia-compute-580`` -> ``libnvidia-compute``, ``nvidia-dkms-580-open`` ->
  ``nvidia-dkms-open``, ``nvidia-dkms-580`` -> ``nvidia-dkms``); ``libnvidia-nscq`` and
  ``libnvsdm`` "no change" (they carry no branch in 580 already).
- Ubuntu's packaging splits what Debian's ``nvidia-driver-cuda`` pulls in:
  ``libnvidia-compute-<branch>`` holds libcuda and NVML only; ``nvidia-smi`` is in
  ``nvidia-utils-<branch>`` and ``nvidia-persistenced`` with its unit in
  ``nvidia-compute-utils-<branch>`` (packages.ubuntu.com file lists, e.g.
  questing/amd64/nvidia-compute-utils-580/filelist: /usr/bin/nvidia-persistenced,
  /usr/lib/systemd/system/nvidia-persistenced.service). The driver step runs both, so
  on Ubuntu they are roots too (the 590 rename drops their branch the same way).
- "Version locking" (APT) and "Recent updates", "Version locking packages for Ubuntu /
  Debian": ``nvidia-driver-pinning-<branch>`` ("APT driver pinning file for driver
  branch 580") and ``nvidia-driver-pinning-<version>`` ("... for driver version
  580.95.05"); "install the pinning package prior to installing the driver". The plan
  installs the version one: its lock holds one version.
- Fabric Manager user guide (docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/):
  ``nvidia-fabricmanager`` (unit ``nvidia-fabricmanager.service``) and ``libnvidia-nscq``
  at exactly the driver's version. In NVIDIA's repository both lose the branch from 580
  on, on Ubuntu as on Debian: NVIDIA's driver container installs, on ubuntu22.04 and
  ubuntu24.04 from the CUDA repository, ``nvidia-fabricmanager=${DRIVER_VERSION}-1`` and
  ``libnvidia-nscq=${DRIVER_VERSION}-1`` for branch 580, ``nvidia-fabricmanager-<branch>``
  and ``libnvidia-nscq-<branch>`` before it (github.com/NVIDIA/gpu-driver-container,
  ubuntu22.04/install.sh and ubuntu24.04/install.sh, ``fabricmanager_install`` and
  ``nscq_install``, commit 694891c; precompiled/nvidia-driver since dc7857e "Fix:
  precompiled R580 package install error"). ``nvidia-fabricmanager-580`` is the name in
  Canonical's archive (source fabric-manager-580, ``580.126.09-0ubuntu0.22.04.1``), not in
  NVIDIA's repository. "Systems using fourth-generation NVSwitches" (NVLink5): ``nvlsm``,
  versioned on its own (``nvlsm_2025.06.10-1``), started by Fabric Manager itself (no
  unit of its own to enable).
- NVIDIA IMEX user's guide (docs.nvidia.com/multi-node-nvlink-systems/imex-guide/) for the
  Grace-Blackwell compute trays (GB200, GB300): ``nvidia-imex`` (unit
  ``nvidia-imex.service``) at the driver's version; in NVIDIA's repository ``nvidia-imex``
  from 580 on and ``nvidia-imex-<branch>`` from 550 to 570 (NVIDIA's driver container,
  github.com/NVIDIA/gpu-driver-container ``imex_install``: ``nvidia-imex=${DRIVER_VERSION}-1``,
  ``nvidia-imex-${DRIVER_BRANCH}=${DRIVER_VERSION}-1``); ``nvidia-imex-<branch>`` is also
  the name in Canonical's archive (packages.ubuntu.com, source nvidia-imex-570).

Versions are the lock's business (bringup/driver_locks.py reads them from the index). In
NVIDIA's Ubuntu repository the 580 driver's packages up to 580.105.08 are revision
``0ubuntu1`` (``cuda-drivers-580_580.95.05-0ubuntu1``, ``..._580.105.08-0ubuntu1``), from
580.126.09 ``1ubuntu1``; Fabric Manager and NSCQ ``-1`` (the driver container above);
Canonical's archive ships the same driver names as ``580.142-0ubuntu0.24.04.1``.

The names of the toolkit-side packages are bringup/plan/driver.py's (TOOLKIT_SIDE).
"""

from dataclasses import dataclass

FLAVOURS = ("open", "proprietary")


@dataclass(frozen=True)
class DriverNames:
    """One distribution family's names for a driver branch."""

    # The compute-only roots of each flavour (the user space, its tools and the DKMS module).
    roots: dict
    # The DKMS module package of each flavour: the one a flavour switch purges.
    module: dict
    fabric: tuple
    nvlink5: tuple
    pinning: str
    imex: tuple = ()


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
    ('libnvidia-compute-580', 'nvidia-utils-580', 'nvidia-compute-utils-580', 'nvidia-dkms-580')
    >>> names("ubuntu", "590", "590.44.01").module["open"], names("ubuntu", "580", "580.95.05").pinning
    ('nvidia-dkms-open', 'nvidia-driver-pinning-580.95.05')
    >>> names("ubuntu", "580", "580.95.05").fabric, names("ubuntu", "570", "570.195.03").fabric
    (('nvidia-fabricmanager', 'libnvidia-nscq'), ('nvidia-fabricmanager-570', 'libnvidia-nscq-570'))
    >>> names("debian", "580", "580.95.05").imex, names("ubuntu", "570", "570.195.03").imex
    (('nvidia-imex',), ('nvidia-imex-570',))
    """
    pinning = f"nvidia-driver-pinning-{version}"
    # Fabric Manager and NSCQ carry the branch in their names before 580 only (both families).
    fabric = (("nvidia-fabricmanager", "libnvidia-nscq") if int(branch) >= 580
              else (f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}"))
    imex = ("nvidia-imex",) if int(branch) >= 580 else (f"nvidia-imex-{branch}",)
    if os_family == "debian":
        module = {"open": "nvidia-kernel-open-dkms", "proprietary": "nvidia-kernel-dkms"}
        return DriverNames({flavour: ("nvidia-driver-cuda", module[flavour]) for flavour in FLAVOURS}, module,
                           fabric, ("nvlsm",), pinning, imex)
    if os_family == "ubuntu":
        suffix = f"-{branch}" if int(branch) < 590 else ""
        module = {"open": f"nvidia-dkms{suffix}-open", "proprietary": f"nvidia-dkms{suffix}"}
        user_space = (f"libnvidia-compute{suffix}", f"nvidia-utils{suffix}", f"nvidia-compute-utils{suffix}")
        return DriverNames({flavour: (*user_space, module[flavour]) for flavour in FLAVOURS}, module,
                           fabric, ("nvlsm",), pinning, imex)
    raise ValueError(f"no driver package names for {os_family!r}")


def lock_family(distro):
    """The naming family of a repository distro directory.

    >>> lock_family("ubuntu2404"), lock_family("debian13")
    ('ubuntu', 'debian')
    """
    return "ubuntu" if distro.startswith("ubuntu") else "debian"
