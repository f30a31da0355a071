"""Canonical's NVIDIA driver on Ubuntu (``ubuntu-drivers install``, ``ubuntu-drivers install
--gpgpu``): which of the probe's driver packages (``driver_layer.packages``, docs/facts.md) are
Canonical's, what they make (branch, open or proprietary, server or desktop series, prebuilt
signed modules or DKMS), and whether the driver step adopts them or replaces them with
NVIDIA's locked packages (bringup/plan/driver_step.py). Pure functions of the facts.

Sources (packages.ubuntu.com, read 2026-12-04):

- Source nvidia-graphics-drivers-580-server (resolute/all): binaries ``libnvidia-compute-580-server``,
  ``libnvidia-cfg1-580-server``, ``libnvidia-common-580-server``, ...; ``nvidia-driver-580-server``
  ("NVIDIA Server Driver metapackage") and ``nvidia-driver-580-server-open`` ("NVIDIA driver (open
  kernel) metapackage") depend on them at exactly their own version, e.g. ``libnvidia-compute-580-server
  (= 580.159.03-0ubuntu0.26.04.1)``; noble's are ``580.159.03-0ubuntu0.24.04.1`` and
  ``580.173.02-0ubuntu0.24.04.1`` (libnvidia-extra-580-server, noble and noble-updates), plucky's
  ``580.95.05-0ubuntu0.25.04.1``: Canonical's stable releases revise NVIDIA's version as
  ``0ubuntu0.<release>.<n>``, while NVIDIA's own repository uses ``0ubuntu1`` / ``1ubuntu1``
  (files/locks/driver-580-ubuntu2404-x86_64.txt, bringup/driver_packages.py).
- ``nvidia-utils-470-server`` (noble): "NVIDIA Server Driver support binaries", depends on
  ``libnvidia-compute-470-server``; ``nvidia-compute-utils-<branch>-server`` likewise.
- Virtual package ``nvidia-dkms-kernel`` (resolute, questing): provided by ``nvidia-dkms-580``,
  ``nvidia-dkms-580-open``, ``nvidia-dkms-580-server``, ``nvidia-dkms-580-server-open`` (and 595's):
  one DKMS ``nvidia`` module at a time; ``nvidia-dkms-580-server`` depends on ``dkms``,
  ``nvidia-kernel-common-580-server`` and ``nvidia-kernel-source-580-server`` at its version.
- Source linux-restricted-modules (Canonical Kernel Team): ``linux-modules-nvidia-580-open-generic``
  ("Extra drivers for nvidia-580-open for the generic flavour", version ``7.0.0-30.30``: the kernel's,
  not the driver's) depends on ``linux-modules-nvidia-580-open-7.0.0-30-generic (= 7.0.0-30.30)`` and
  ``nvidia-kernel-common-580 (>= 580.173.02)``; its siblings ``linux-modules-nvidia-580-server-open-generic``,
  ``-server-open-aws``, ``-azure``, ``-gcp``, ``-nvidia``, ``-oracle``, ``-generic-hwe-24.04``...:
  Canonical's prebuilt kernel modules, signed for Secure Boot, one package per kernel flavour and per
  kernel release, installed by ubuntu-drivers where the kernel flavour has them (DKMS otherwise).
- ``ubuntu-drivers list`` (github.com/mk-pmb/ubuntu-drivers-helper-pmb, docs/drivers_list_output_format.md):
  "nvidia-driver-470-server, (kernel modules provided by linux-modules-nvidia-470-server-generic-hwe-20.04)".
  Ubuntu Server's guide (ubuntu.com/server/docs/nvidia-drivers-installation) was not in the search
  index read here; a note citing it lists ``nvidia-driver-550-server-open`` beside the desktop series
  in ``ubuntu-drivers list``. The ``-server`` series is what ``ubuntu-drivers install --gpgpu`` installs.

The names without ``-server`` (``libnvidia-compute-580``, ``nvidia-dkms-580-open``,
``nvidia-driver-580-open``) are NVIDIA's Ubuntu names too: only the version's ``0ubuntu0.<release>``
says they came from Canonical's archive (the probe does not ask apt for origins: the version is enough).
"""

import re
from dataclasses import dataclass

from packaging.version import Version

from bringup.versions import UPSTREAM, upstream

# Canonical's stable-release revision: 580.95.05-0ubuntu0.24.04.2 (NVIDIA's repository: -0ubuntu1, -1ubuntu1).
CANONICAL_REVISION = re.compile(r"-\d+ubuntu0\.\d+\.\d+(\.\d+)*$")
# Canonical's prebuilt modules (linux-restricted-modules): modules, their objects and signatures.
PREBUILT = re.compile(r"^linux-(modules|objects|signatures)-nvidia-")
MODULES = re.compile(r"^linux-modules-nvidia-(?P<branch>\d+)(?P<server>-server)?(?P<open>-open)?-(?P<kernel>.+)$")
# The driver series' names: <stem>-<branch>[-server][-open] (the firmware's -<version> suffix too).
SERIES = re.compile(r"^(?P<stem>(lib)?nvidia-[a-z0-9-]*?)-(?P<branch>\d{3})(?P<server>-server)?(?P<open>-open)?"
                    r"(-\d+(\.\d+)+)?$")
# The module packages (DKMS sources) and metapackages whose -open says the flavour.
FLAVOURED = ("nvidia-dkms", "nvidia-kernel-source", "nvidia-driver", "nvidia-headless", "nvidia-headless-no-dkms")
# The distribution's CUDA toolkit (nvidia-cuda-toolkit...) is Ubuntu's but not the driver's.
TOOLKIT_SIDE = re.compile(r"^(nvidia-cuda-|nvidia-(visual-)?profiler|nvidia-opencl-dev|nvidia-openjdk-|nvidia-nsight"
                          r"|lib\S*-dev$)")


@dataclass(frozen=True)
class CanonicalDriver:
    """What Canonical's packages on a node make; ``packages`` empty when it has none."""

    packages: tuple = ()      # "name=version", by name
    branches: tuple = ()      # "580"
    flavours: tuple = ()      # "open", "proprietary" (from the module packages and metapackages)
    server: bool = False      # the -server (ERD, `ubuntu-drivers install --gpgpu`) series
    prebuilt: tuple = ()      # linux-modules-nvidia-* (Canonical's signed modules)
    dkms: tuple = ()          # nvidia-dkms-*
    versions: tuple = ()      # the driver's upstream versions (not the prebuilt modules' kernel versions)

    def __bool__(self):
        return bool(self.packages)

    def module_source(self):
        """How the module is made, in words.

        >>> CanonicalDriver(("a=1",), prebuilt=("linux-modules-nvidia-580-server-open-generic",)).module_source()
        "Canonical's prebuilt, signed modules (linux-modules-nvidia-580-server-open-generic)"
        """
        parts = []
        if self.prebuilt:
            parts.append(f"Canonical's prebuilt, signed modules ({', '.join(self.prebuilt)})")
        if self.dkms:
            parts.append(f"built by DKMS ({', '.join(self.dkms)})")
        return " and ".join(parts) or "no kernel module package"

    def summary(self):
        """One phrase: series, branch, flavour and module source.

        >>> CanonicalDriver(("a=1",), ("580",), ("open",), True, dkms=("nvidia-dkms-580-server-open",)).summary()
        'the 580-server series (ubuntu-drivers --gpgpu), open kernel module, built by DKMS (nvidia-dkms-580-server-open)'
        """
        series = "/".join(self.branches) or "<branch>"
        kind = f"the {series}-server series (ubuntu-drivers --gpgpu)" if self.server else f"the {series} series"
        flavour = "/".join(self.flavours) or "unknown"
        return f"{kind}, {flavour} kernel module, {self.module_source()}"


def is_canonical(name, version):
    """Whether a driver package is Canonical's: a prebuilt module package, a ``-server``
    series name, or an NVIDIA name at Canonical's ``0ubuntu0.<release>`` revision.

    >>> [is_canonical(n, v) for n, v in [("nvidia-dkms-580-server-open", "580.95.05-0ubuntu0.24.04.2"),
    ...     ("linux-modules-nvidia-580-server-open-generic", "6.8.0-84.84"),
    ...     ("libnvidia-compute-580", "580.95.05-0ubuntu0.24.04.2"), ("libnvidia-compute-580", "580.95.05-0ubuntu1"),
    ...     ("nvidia-fabricmanager", "580.95.05-1"), ("nvidia-cuda-toolkit", "12.0.140~12.0.1-4build4"),
    ...     ("nvidia-container-toolkit", "1.17.8-0ubuntu0.24.04.1")]]
    [True, True, True, False, False, False, False]
    """
    if TOOLKIT_SIDE.match(name) or not name.startswith(("nvidia-", "libnvidia-", "linux-")):
        return False
    if PREBUILT.match(name):
        return True
    series = SERIES.match(name)
    if series and series["server"]:
        return True
    # Only the driver series' own names: nvidia-container-toolkit, nvidia-settings or
    # libnvidia-egl-wayland1 at such a revision are not the driver.
    return bool(series) and bool(CANONICAL_REVISION.search(str(version or "")))


def canonical_driver(packages):
    """Canonical's driver among the probe's packages (``[{"name", "version", "held"}]``).

    >>> found = canonical_driver([
    ...     {"name": "nvidia-driver-580-server-open", "version": "580.95.05-0ubuntu0.24.04.2", "held": False},
    ...     {"name": "libnvidia-compute-580-server", "version": "580.95.05-0ubuntu0.24.04.2", "held": False},
    ...     {"name": "linux-modules-nvidia-580-server-open-generic", "version": "6.8.0-84.84", "held": False},
    ...     {"name": "nvidia-fabricmanager", "version": "580.95.05-1", "held": True}])
    >>> found.branches, found.flavours, found.server, found.prebuilt, found.versions
    (('580',), ('open',), True, ('linux-modules-nvidia-580-server-open-generic',), ('580.95.05',))
    >>> bool(canonical_driver([{"name": "nvidia-open", "version": "580.95.05-1", "held": True}]))
    False
    """
    ours = sorted((package for package in packages or [] if is_canonical(package["name"], package["version"])),
                  key=lambda package: package["name"])
    branches, flavours, versions = set(), set(), set()
    server, prebuilt, dkms = False, [], []
    for package in ours:
        name = package["name"]
        modules = MODULES.match(name)
        series = SERIES.match(name)
        if modules:
            branches.add(modules["branch"])
            server = server or bool(modules["server"])
            flavours.add("open" if modules["open"] else "proprietary")
            prebuilt.append(name)
            continue
        if PREBUILT.match(name):
            continue  # objects and signatures: the modules' own parts
        if series:
            branches.add(series["branch"])
            server = server or bool(series["server"])
            if series["stem"] in FLAVOURED:
                flavours.add("open" if series["open"] else "proprietary")
            if series["stem"] == "nvidia-dkms":
                dkms.append(name)
        found = UPSTREAM.match(package["version"])
        if found and series:
            versions.add(found.group(1))
    return CanonicalDriver(
        packages=tuple(f"{package['name']}={package['version']}" for package in ours),
        branches=tuple(sorted(branches)), flavours=tuple(sorted(flavours)), server=server,
        prebuilt=tuple(prebuilt), dkms=tuple(dkms),
        versions=tuple(sorted(versions, key=lambda text: upstream(text) or Version("0"))))


def names(found):
    """The package names of ``found``.

    >>> names(CanonicalDriver(("a=1", "b=2:3")))
    ('a', 'b')
    """
    return tuple(pin.split("=", 1)[0] for pin in found.packages)


def adoption(found, branch, flavour, version, installed_module=None, nvswitches=0):
    """Whether the driver step adopts Canonical's driver (``""``) or why it replaces it.

    Adopted: one branch, the locked one; one flavour, the planned one; every driver package at
    the lock's upstream version (``580.95.05``, whatever the revision: Canonical's
    ``0ubuntu0.24.04.2`` repackages the same NVIDIA release as NVIDIA's ``0ubuntu1``); the
    user space (``libnvidia-compute-*``) and its DKMS module package there (``nvidia-dkms-*``: DKMS
    builds the held version for every later kernel, as it does NVIDIA's), the installed module
    (modinfo) at that version where it is known; and no NVSwitch (Fabric Manager and NSCQ must be
    NVIDIA's, at the lock's exact version, and are not mixed with Canonical's driver here).
    Canonical's prebuilt modules (``linux-modules-nvidia-*``) are never adopted: they follow the
    kernel, one package per kernel release built at the archive's driver version of its day, so a
    held user space and the next kernel's module would part (DRIVER_LIBRARY_MISMATCH after that
    boot, or apt keeping the kernel's modules back). Anything else is replaced by NVIDIA's locked
    packages.

    >>> server_open = CanonicalDriver(("libnvidia-compute-580-server=580.95.05-0ubuntu0.24.04.2",
    ...     "nvidia-dkms-580-server-open=580.95.05-0ubuntu0.24.04.2"), ("580",), ("open",), True,
    ...     dkms=("nvidia-dkms-580-server-open",), versions=("580.95.05",))
    >>> adoption(server_open, "580", "open", "580.95.05")
    ''
    >>> from dataclasses import replace
    >>> adoption(replace(server_open, prebuilt=("linux-modules-nvidia-580-server-open-generic",)), "580", "open",
    ...          "580.95.05").split(" (")[0]
    "its modules are Canonical's prebuilt ones"
    >>> adoption(server_open, "580", "open", "580.105.08")
    "its version 580.95.05 is not the lock's 580.105.08"
    >>> adoption(server_open, "580", "proprietary", "580.95.05")
    'its open kernel module is not the planned proprietary one'
    """
    if found.branches != (branch,):
        return f"its branch {'/'.join(found.branches) or 'unknown'} is not driver_branch {branch}"
    if found.flavours != (flavour,):
        return (f"its {'/'.join(found.flavours) or 'unknown'} kernel module is not the planned {flavour} one")
    wanted = upstream(version)
    if [upstream(text) for text in found.versions] != [wanted]:
        return f"its version {', '.join(found.versions) or 'unknown'} is not the lock's {version}"
    if not any(pin.startswith("libnvidia-compute-") for pin in found.packages):
        return "its user space (libnvidia-compute) is not installed"
    if found.prebuilt:
        return (f"its modules are Canonical's prebuilt ones ({', '.join(found.prebuilt)}), which follow the kernel at "
                "the archive's driver version, not a held one")
    if not found.dkms:
        return "it has no kernel module package"
    module_version = upstream((installed_module or {}).get("version"))
    if module_version is not None and module_version != wanted:
        return f"its installed module is {(installed_module or {}).get('version')}, not the lock's {version}"
    if nvswitches:
        return (f"the node has {nvswitches} NVSwitch(es): Fabric Manager and NSCQ come from NVIDIA's repository at "
                "the lock's exact version, with NVIDIA's driver")
    return ""
