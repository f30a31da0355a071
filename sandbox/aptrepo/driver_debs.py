"""SANDBOX STAND-IN packages of NVIDIA's driver, in the sandbox apt repository.

Names, versions and dependencies as NVIDIA's repository has them, branch 580, for each
distribution family (``FAMILIES``; bringup/driver_packages.py names what the driver step
installs and cites the sources):

* Debian (debian12, debian13): the driver installation guide's Debian page,
  "Compute-only (headless)" and "Version locking"
  (docs.nvidia.com/datacenter/tesla/driver-installation-guide/), revision ``-1``;
* Ubuntu (ubuntu2204, ubuntu2404): the guide's Ubuntu page (``libnvidia-compute-580``,
  ``nvidia-dkms-580-open`` / ``nvidia-dkms-580``, with ``nvidia-utils-580``,
  ``nvidia-compute-utils-580``, ``nvidia-kernel-common-580``, ``nvidia-firmware-580``,
  ``nvidia-modprobe``), revision ``0ubuntu1`` as NVIDIA's Ubuntu repository numbers the
  580 driver up to 580.105.08; Fabric Manager, NSCQ and IMEX ``nvidia-fabricmanager``,
  ``libnvidia-nscq`` and ``nvidia-imex`` at ``-1`` (NVIDIA's driver container installs them
  so: github.com/NVIDIA/gpu-driver-container ubuntu22.04/install.sh and
  ubuntu24.04/install.sh, ``imex_install``: ``nvidia-imex=${DRIVER_VERSION}-1`` for branch
  580 from commit 78fa4ac "add driver 580.65.06", until feb891d "add support for driver
  version 590.48.01" made it ``${DRIVER_VERSION}*``);

Fabric Manager's guide for ``nvidia-fabricmanager``, ``libnvidia-nscq`` and ``nvlsm``; NVIDIA's
IMEX user's guide (docs.nvidia.com/multi-node-nvlink-systems/imex-guide/, "Getting Started
with IMEX": x86_64 and aarch64) for ``nvidia-imex``, served in every directory, x86_64 and
sbsa alike (the driver container installs it on amd64 and arm64). Two
upstream versions: 580.95.05 (the GPU profiles' recorded driver, the one the sandbox's
locks take) and 580.105.08 (newer: what an unheld ``apt-get upgrade`` would move to).
Their contents are stand-ins, the same in every family (only names, relations and
versions differ: ``Family``), and each package's description says so:

* the GPU stand-in: ``nvidia-smi`` replaying the node's recordings
  (/usr/share/sandbox-gpu, sandbox/gpu_standin.py) while a module is loaded, NVIDIA's
  failure text otherwise; the libcuda stub; an empty ``libnvidia-ml.so.<version>`` (the
  name the probe reads); the nouveau blacklist;
* daemons whose units run under the node's systemd: ``nvidia-persistenced``, Fabric
  Manager (at exactly its version, refusing another loaded module as NVIDIA's does;
  it starts ``nvlsm``, versioned on its own, where that is installed), IMEX (likewise at
  exactly its version; it starts without a nodes config, a domain of this node alone);
* the kernel module: the DKMS package of each flavour (Debian's
  ``nvidia-kernel-open-dkms`` / ``nvidia-kernel-dkms``, Ubuntu's ``nvidia-dkms-580-open`` /
  ``nvidia-dkms-580``) ships a DKMS source tree that the node's real ``dkms`` builds for
  the running kernel (a few seconds, killable) into
  ``/lib/modules/<release>/updates/dkms/nvidia.ko``: an ELF whose ``.modinfo`` holds the
  version and the licence (``Dual MIT/GPL`` open, ``NVIDIA`` proprietary), which the
  node's boot "loads" (sandbox/files/node-init.sh);
* ``linux-headers-<release>`` of the host's kernel (nodes run the host's kernel, which
  no archive ships headers for): what dkms looks for at /lib/modules/<release>/build.

These are built here (``build_deb``), not from wheels: ``DriverPkg`` carries the control
relations (Conflicts, Replaces) the toolkit's packages do not need.

>>> sorted({p.name for p in packages("x86_64", "6.1.0-1-amd64")})[:4]
['cuda-drivers', 'firmware-nvidia-gsp', 'libcuda1', 'libnvidia-ml1']
>>> sorted({p.version for p in packages("x86_64", "6.1.0-1-amd64", "ubuntu") if p.name.startswith("libnvidia-")})
['580.105.08-0ubuntu1', '580.105.08-1', '580.95.05-0ubuntu1', '580.95.05-1']
"""

from __future__ import annotations

import hashlib
import math
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bringup.driver_packages import lock_family
from sandbox import cpus
from sandbox.aptrepo import debs

FILES = Path(__file__).resolve().parent / "driver"
# The node's copy of the replaying nvidia-smi (the preinstalled stand-in's script).
REPLAY = Path(__file__).resolve().parents[1] / "files" / "nvidia-smi"
BRANCH = "580"
# Upstream versions served: the locked one first (the GPU profiles' recorded driver).
VERSIONS = ("580.95.05", "580.105.08")
DEBIAN_REVISION = "1"
# NVLSM's own version (nvlsm_2025.06.10-1: it is not versioned with the driver).
NVLSM_VERSION = "2025.06.10-1"
# How long the stand-in module build takes (s): long enough to kill it half-way.
DKMS_SECONDS = 5
MAINTAINER = "gpu-bringup sandbox (NVIDIA driver stand-ins) <sandbox@localhost>"
STANDIN = ("SANDBOX STAND-IN for NVIDIA's {name}: built by the gpu-bringup sandbox\n"
           "(sandbox/aptrepo/driver_debs.py) under NVIDIA's name, version and\n"
           "dependencies; its files are stand-ins, not NVIDIA's driver.")
# The module flavours' licences in .modinfo (the open module's is "Dual MIT/GPL", the
# proprietary one's "NVIDIA", as `modinfo nvidia` shows them).
LICENCES = {"open": "Dual MIT/GPL", "proprietary": "NVIDIA"}
# nvidia-imex: Grace-Blackwell NVL compute trays (GB200, GB300), both families.
IMEX_SUMMARY = "NVIDIA IMEX service for NVLink networks (Grace-Blackwell compute trays)"


@dataclass(frozen=True)
class Row:
    """One stand-in package of a family: its name, summary, the stand-in contents it
    carries (``parts``: keys of ``_parts``) and its Depends, in order: ``=name`` is that
    package at this one's upstream version, ``{module}`` either flavour's DKMS package at
    it, anything else as written (``dkms``: the distribution's)."""

    name: str
    summary: str
    parts: tuple[str, ...] = ()
    depends: tuple[str, ...] = ()


@dataclass(frozen=True)
class Family:
    """One distribution family's stand-in driver: its packages (``rows``; the DKMS
    packages of each flavour are ``modules``), the Debian revision of the driver's
    packages and that of the packages beside it (``extras``: Fabric Manager's, NSCQ's and
    IMEX's, at ``-1`` in both families), the archive component."""

    name: str
    revision: str
    modules: dict
    rows: tuple[Row, ...]
    extras: tuple[str, ...] = ("nvidia-fabricmanager", "libnvidia-nscq", "nvidia-imex")
    extras_revision: str = "1"
    component: str = "non-free"

    def deb_version(self, name: str, version: str) -> str:
        """The Debian version of package *name* at upstream *version*.

        >>> FAMILIES["ubuntu"].deb_version("libnvidia-compute-580", "580.95.05")
        '580.95.05-0ubuntu1'
        >>> FAMILIES["ubuntu"].deb_version("nvidia-fabricmanager", "580.95.05")
        '580.95.05-1'
        >>> FAMILIES["ubuntu"].deb_version("nvidia-imex", "580.105.08")
        '580.105.08-1'
        """
        return f"{version}-{self.extras_revision if name in self.extras else self.revision}"

    def pinned(self) -> tuple[str, ...]:
        """What the pinning packages pin: every package of the driver's, Fabric Manager's and IMEX's too."""
        return tuple(row.name for row in self.rows)


def _debian() -> Family:
    modules = {"open": "nvidia-kernel-open-dkms", "proprietary": "nvidia-kernel-dkms"}
    base = ("dkms", "=nvidia-kernel-support", "=firmware-nvidia-gsp")
    return Family("debian", DEBIAN_REVISION, modules, (
        Row(modules["open"], "NVIDIA kernel module (open), DKMS source", ("dkms-open",), base),
        Row(modules["proprietary"], "NVIDIA kernel module (proprietary), DKMS source", ("dkms-proprietary",), base),
        Row("nvidia-kernel-support", "NVIDIA kernel module support files", ("blacklist",)),
        Row("firmware-nvidia-gsp", "NVIDIA GSP firmware", ("firmware",)),
        Row("libcuda1", "NVIDIA CUDA Driver Library", ("libcuda",)),
        Row("libnvidia-ml1", "NVIDIA Management Library (NVML) runtime library", ("nvml",)),
        Row("nvidia-smi", "NVIDIA System Management Interface", ("smi",), ("=libnvidia-ml1",)),
        Row("nvidia-persistenced", "daemon to maintain persistent software state in the NVIDIA driver",
            ("persistenced",)),
        Row("nvidia-modprobe", "utility to load NVIDIA kernel modules and create device nodes", ("modprobe",)),
        Row("nvidia-driver-cuda", "NVIDIA driver CUDA integration components", (),
            ("=nvidia-kernel-support", "=libcuda1", "=libnvidia-ml1", "=nvidia-smi", "=nvidia-persistenced",
             "=nvidia-modprobe", "=firmware-nvidia-gsp", "{module}")),
        Row("nvidia-driver", "NVIDIA metapackage", (), ("=nvidia-driver-cuda",)),
        Row("nvidia-open", "NVIDIA driver with the open kernel module (metapackage)", (),
            ("=nvidia-driver", "=" + modules["open"])),
        Row("cuda-drivers", "CUDA Driver meta-package, branch-agnostic", (), ("=nvidia-driver", "{module}")),
        Row("nvidia-fabricmanager", "NVIDIA Fabric Manager (NVSwitch systems)", ("fabricmanager",)),
        Row("libnvidia-nscq", "NVSwitch Configuration and Query library", ("nscq",)),
        Row("nvidia-imex", IMEX_SUMMARY, ("imex",)),
    ))


def _ubuntu(branch: str = BRANCH) -> Family:
    """NVIDIA's Ubuntu names of a branch before 590 (the branch in each name;
    bringup/driver_packages.py): the user space split as Ubuntu packages it."""
    b = branch
    modules = {"open": f"nvidia-dkms-{b}-open", "proprietary": f"nvidia-dkms-{b}"}
    user_space = (f"libnvidia-compute-{b}", f"nvidia-utils-{b}", f"nvidia-compute-utils-{b}")
    return Family("ubuntu", "0ubuntu1", modules, (
        Row(modules["open"], "NVIDIA DKMS package (open kernel module)", ("dkms-open",),
            ("dkms", f"=nvidia-kernel-common-{b}")),
        Row(modules["proprietary"], "NVIDIA DKMS package", ("dkms-proprietary",),
            ("dkms", f"=nvidia-kernel-common-{b}")),
        Row(f"nvidia-kernel-common-{b}", "Shared files used with the kernel module", ("blacklist",),
            (f"=nvidia-firmware-{b}", "=nvidia-modprobe")),
        Row(f"nvidia-firmware-{b}", "Firmware files used by the kernel module", ("firmware",)),
        Row("nvidia-modprobe", "Load the NVIDIA kernel driver and create device files", ("modprobe",)),
        Row(f"libnvidia-compute-{b}", "NVIDIA libcompute package", ("libcuda", "nvml"),
            (f"=nvidia-kernel-common-{b}",)),
        Row(f"nvidia-utils-{b}", "NVIDIA driver support binaries", ("smi",), (f"=libnvidia-compute-{b}",)),
        Row(f"nvidia-compute-utils-{b}", "NVIDIA compute utilities", ("persistenced",), (f"=libnvidia-compute-{b}",)),
        Row(f"nvidia-driver-{b}-open", "NVIDIA driver metapackage (open kernel module)", (),
            tuple(f"={name}" for name in (*user_space, modules["open"]))),
        Row(f"nvidia-driver-{b}", "NVIDIA driver metapackage", (),
            tuple(f"={name}" for name in (*user_space, modules["proprietary"]))),
        Row("nvidia-fabricmanager", "NVIDIA Fabric Manager (NVSwitch systems)", ("fabricmanager",)),
        Row("libnvidia-nscq", "NVSwitch Configuration and Query library", ("nscq",)),
        Row("nvidia-imex", IMEX_SUMMARY, ("imex",)),
    ), component="restricted")


FAMILIES = {"debian": _debian(), "ubuntu": _ubuntu()}
# Debian's module packages by flavour, with their licence (the tests' and closure()'s default family).
FLAVOURS = {flavour: (name, LICENCES[flavour]) for flavour, name in FAMILIES["debian"].modules.items()}
# What Debian's pinning packages pin.
PINNED = FAMILIES["debian"].pinned()


def family_of(distro: str) -> str:
    """The stand-in family of a repository distro directory (bringup/driver_packages.py's).

    >>> family_of("ubuntu2204"), family_of("debian13")
    ('ubuntu', 'debian')
    """
    return lock_family(distro)


@dataclass(frozen=True)
class DriverPkg(debs.Pkg):
    """A stand-in driver package: a Pkg with the control relations apt resolves by."""
    section: str = "non-free/libs"
    conflicts: tuple[str, ...] = ()
    replaces: tuple[str, ...] = ()
    # This file's digest: a changed builder makes new packages (debs.package_digest hashes repr).
    builder: str = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _text(name: str, **subst: str) -> str:
    """A stand-in file of sandbox/aptrepo/driver/ with its @KEY@ placeholders filled."""
    text = (FILES / name).read_text()
    for key, value in subst.items():
        text = text.replace(f"@{key}@", value)
    return text


def deb_version(version: str, family: str = "debian") -> str:
    """The Debian version of the driver's packages at upstream *version* in *family*.

    >>> deb_version("580.95.05"), deb_version("580.95.05", "ubuntu")
    ('580.95.05-1', '580.95.05-0ubuntu1')
    """
    return f"{version}-{FAMILIES[family].revision}"


def headers_package(release: str, arch: str) -> DriverPkg:
    """The stand-in ``linux-headers-<release>`` of the host's kernel: /lib/modules/<release>/build.

    >>> headers_package("6.1.0-18-amd64", "amd64").name, headers_package("6.1.0-18-amd64", "amd64").version
    ('linux-headers-6.1.0-18-amd64', '6.1.0-18-amd64-1')
    """
    src = f"usr/src/linux-headers-{release}"
    version = f"{release}-1" if release[:1].isdigit() else "0-1"
    return DriverPkg(
        name=f"linux-headers-{release}", version=version, arch=arch, section="kernel",
        description=f"SANDBOX STAND-IN: header files of Linux {release}\n"
                    "Sandbox nodes run the host's kernel, which no archive ships headers for:\n"
                    "this package only gives dkms the build directory it looks for.",
        # dkms takes a headers tree as there when it has include/ (its _check_kernel_dir).
        texts=((f"{src}/README", f"SANDBOX STAND-IN: no kernel headers here (Linux {release}).\n", 0o644),
               (f"{src}/include/README", "SANDBOX STAND-IN: no header here.\n", 0o644)),
        links=((f"lib/modules/{release}/build", f"/{src}"),),
    )


def _parts(version: str, machine: str) -> dict[str, dict]:
    """The stand-in contents at upstream *version* for *machine*, by what they are (the
    same in every family): DriverPkg fields of each part."""
    lib = f"usr/lib/{cpus.TRIPLETS[machine]}"

    def dkms(flavour: str) -> dict:
        return dict(texts=((f"usr/src/nvidia-{version}/dkms.conf", _text("dkms.conf", VERSION=version), 0o644),
                           (f"usr/src/nvidia-{version}/dkms-build.sh",
                            _text("dkms-build.sh", VERSION=version, LICENSE=LICENCES[flavour], FLAVOUR=flavour,
                                  SECONDS=str(DKMS_SECONDS)), 0o755)),
                    scripts=(("postinst", _text("dkms.postinst", VERSION=version)),
                             ("prerm", _text("dkms.prerm", VERSION=version))))

    return {
        "dkms-open": dkms("open"),
        "dkms-proprietary": dkms("proprietary"),
        "blacklist": dict(texts=(("etc/modprobe.d/nvidia-blacklists-nouveau.conf",
                                  "# SANDBOX STAND-IN for the NVIDIA driver package's file.\nblacklist nouveau\n",
                                  0o644),),
                          conffiles=("/etc/modprobe.d/nvidia-blacklists-nouveau.conf",)),
        "firmware": dict(texts=((f"lib/firmware/nvidia/{version}/gsp_ga10x.bin", "", 0o644),
                                (f"lib/firmware/nvidia/{version}/gsp_tu10x.bin", "", 0o644))),
        "libcuda": dict(generated=((f"{lib}/libcuda.so.{version}", debs.libcuda_stub_kind(machine)),),
                        links=((f"{lib}/libcuda.so.1", f"libcuda.so.{version}"),)),
        "nvml": dict(texts=((f"{lib}/libnvidia-ml.so.{version}", "", 0o644),),
                     links=((f"{lib}/libnvidia-ml.so.1", f"libnvidia-ml.so.{version}"),)),
        "smi": dict(texts=(("usr/bin/nvidia-smi", _text("nvidia-smi", VERSION=version), 0o755),
                           ("usr/lib/sandbox-gpu/sandbox-gpu-replay", REPLAY.read_text(), 0o755))),
        "persistenced": dict(texts=(("usr/bin/nvidia-persistenced", _text("nvidia-persistenced"), 0o755),
                                    ("lib/systemd/system/nvidia-persistenced.service",
                                     _text("nvidia-persistenced.service"), 0o644))),
        "modprobe": dict(texts=(("usr/bin/nvidia-modprobe", _text("nvidia-modprobe"), 0o755),)),
        "fabricmanager": dict(texts=(("usr/bin/nv-fabricmanager", _text("nv-fabricmanager", VERSION=version), 0o755),
                                     ("usr/share/nvidia/nvswitch/fabricmanager.cfg",
                                      "# SANDBOX STAND-IN: nothing reads this file.\n", 0o644),
                                     ("lib/systemd/system/nvidia-fabricmanager.service",
                                      _text("nvidia-fabricmanager.service"), 0o644)),
                              conffiles=("/usr/share/nvidia/nvswitch/fabricmanager.cfg",)),
        "nscq": dict(texts=((f"{lib}/libnvidia-nscq.so.{version}", "", 0o644),)),
        # No nodes config: the administrator writes the domain's addresses (IMEX_NODES_CONFIG_EMPTY).
        "imex": dict(texts=(("usr/bin/nvidia-imex", _text("nvidia-imex", VERSION=version), 0o755),
                            ("etc/nvidia-imex/config.cfg", _text("imex-config.cfg"), 0o644),
                            ("lib/systemd/system/nvidia-imex.service", _text("nvidia-imex.service"), 0o644)),
                     conffiles=("/etc/nvidia-imex/config.cfg",)),
    }


def _joined(parts: list[dict]) -> dict:
    """The fields of several parts in one package (their tuples end to end)."""
    fields: dict = {}
    for part in parts:
        for key, value in part.items():
            fields[key] = fields.get(key, ()) + value
    return fields


def version_packages(version: str, machine: str, family: str = "debian") -> list[DriverPkg]:
    """The driver's packages of *family* at upstream *version* for *machine*'s CPU (``uname -m``)."""
    fam, arch, parts = FAMILIES[family], cpus.dpkg_arch(machine), _parts(version, machine)
    modules = tuple(fam.modules.values())
    either_module = " | ".join(f"{name} (= {fam.deb_version(name, version)})" for name in modules)

    def relation(entry: str) -> str:
        if entry == "{module}":
            return either_module
        return f"{entry[1:]} (= {fam.deb_version(entry[1:], version)})" if entry[:1] == "=" else entry

    def pkg(row: Row) -> DriverPkg:
        others = tuple(name for name in modules if row.name in modules and name != row.name)
        return DriverPkg(name=row.name, version=fam.deb_version(row.name, version), arch=arch,
                         section=f"{fam.component}/libs",
                         description=f"{row.summary} (SANDBOX STAND-IN)\n" + STANDIN.format(name=row.name),
                         depends=tuple(relation(entry) for entry in row.depends),
                         conflicts=others, replaces=others, **_joined([parts[p] for p in row.parts]))

    # The pinning packages pin every package of the driver; where Fabric Manager's and IMEX's
    # revision is not the driver's (Ubuntu), by the upstream version.
    pin = deb_version(version, family) if fam.extras_revision == fam.revision else f"{version}-*"
    pinning = [DriverPkg(name=f"nvidia-driver-pinning-{pinned}", version=deb_version(version, family), arch="all",
                         section=f"{fam.component}/admin",
                         description=f"APT driver pinning file for driver {what} (SANDBOX STAND-IN)\n"
                                     + STANDIN.format(name=f"nvidia-driver-pinning-{pinned}"),
                         # apt reads preferences.d files without an extension or with .pref only.
                         texts=((f"etc/apt/preferences.d/nvidia-driver-pinning-{pinned}.pref",
                                 f"# SANDBOX STAND-IN for NVIDIA's pinning package.\n"
                                 f"Package: {' '.join(fam.pinned())}\nPin: version {pins}\nPin-Priority: 1000\n",
                                 0o644),),
                         conffiles=(f"/etc/apt/preferences.d/nvidia-driver-pinning-{pinned}.pref",))
               for pinned, what, pins in ((BRANCH, f"branch {BRANCH}", f"{BRANCH}.*"),
                                          (version, f"version {version}", pin))]
    rows = [pkg(row) for row in fam.rows]
    extras = [p for p in rows if p.name in fam.extras]
    return [*(p for p in rows if p.name not in fam.extras), *pinning, *extras]


def nvlsm_package(machine: str) -> DriverPkg:
    """NVLSM, versioned on its own; no unit of its own in R580: Fabric Manager starts it on
    NVLink5 systems (Fabric Manager's guide, fourth-generation NVSwitch systems)."""
    return DriverPkg(name="nvlsm", version=NVLSM_VERSION, arch=cpus.dpkg_arch(machine),
                     description="NVIDIA NVLink Subnet Manager (SANDBOX STAND-IN)\n" + STANDIN.format(name="nvlsm"),
                     texts=(("opt/nvidia/nvlsm/sbin/nvlsm", _text("nvlsm"), 0o755),))


def packages(machine: str = "x86_64", kernel_release: str | None = None, family: str = "debian") -> list[DriverPkg]:
    """Every stand-in driver package of one repository directory (*machine*'s CPU, *family*'s
    names), and the headers of *kernel_release* (default: the host's, which the nodes run)."""
    pkgs = [pkg for version in VERSIONS for pkg in version_packages(version, machine, family)]
    return [*pkgs, nvlsm_package(machine), headers_package(kernel_release or platform.release(), cpus.dpkg_arch(machine))]


def control(pkg: DriverPkg, installed_kib: int) -> str:
    """The control file of *pkg*.

    >>> print(control(headers_package("6.1.0-18-amd64", "amd64"), 2).splitlines()[0:2])
    ['Package: linux-headers-6.1.0-18-amd64', 'Version: 6.1.0-18-amd64-1']
    """
    fields = [("Package", pkg.name), ("Version", pkg.version), ("Architecture", pkg.arch),
              ("Maintainer", MAINTAINER), ("Installed-Size", str(installed_kib))]
    for key, values in (("Depends", pkg.depends), ("Conflicts", pkg.conflicts), ("Replaces", pkg.replaces)):
        if values:
            fields.append((key, ", ".join(values)))
    fields += [("Section", pkg.section), ("Priority", "optional")]
    summary, _, body = pkg.description.partition("\n")
    return "".join(f"{key}: {value}\n" for key, value in fields) + f"Description: {summary}\n" + "".join(
        f" {line}\n" if line.strip() else " .\n" for line in body.splitlines())


def build_deb(pkg: DriverPkg, ctx: debs.Context, _wheels, out_dir: Path, workdir: Path) -> Path:
    """Stage *pkg* and run dpkg-deb (debs.build_deb's signature); returns the .deb path."""
    stage, scratch = workdir / f"{pkg.name}_{pkg.version}", workdir / f"{pkg.name}_{pkg.version}.scratch"
    for directory in (stage, scratch):
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    for path, text, mode in pkg.texts:
        (stage / path).parent.mkdir(parents=True, exist_ok=True)
        (stage / path).write_text(text)
        os.chmod(stage / path, mode)
    for path, kind in pkg.generated:
        debs._generate(kind, stage / path, ctx, scratch)
    for path, target in pkg.links:
        (stage / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, stage / path)
    sizes = [max(1, math.ceil(p.stat().st_size / 1024)) for p in stage.rglob("*") if p.is_file()]
    meta = stage / "DEBIAN"
    meta.mkdir()
    (meta / "control").write_text(control(pkg, sum(sizes) + 1))
    for name, text in pkg.scripts:
        (meta / name).write_text(text)
        os.chmod(meta / name, 0o755)
    if pkg.conffiles:
        (meta / "conffiles").write_text("".join(f"{path}\n" for path in pkg.conffiles))
    for directory in [stage, *(p for p in stage.rglob("*") if p.is_dir() and not p.is_symlink())]:
        os.chmod(directory, 0o755)
    for path in [stage, *stage.rglob("*")]:
        os.utime(path, (debs.EPOCH, debs.EPOCH), follow_symlinks=False)
    out = out_dir / debs.deb_filename(pkg)
    comp, level = debs.COMPRESSION
    proc = subprocess.run(["dpkg-deb", "--root-owner-group", f"-Z{comp}", f"-z{level}", "--build", str(stage), str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, SOURCE_DATE_EPOCH=str(debs.EPOCH)))
    if proc.returncode != 0:
        raise RuntimeError(f"dpkg-deb failed for {pkg.name}:\n{proc.stdout}")
    shutil.rmtree(stage)
    shutil.rmtree(scratch)
    return out


def builder_of(pkg: debs.Pkg):
    """The function that builds *pkg*: this module's for a stand-in driver package."""
    return build_deb if isinstance(pkg, DriverPkg) else debs.build_deb


def without_driver(pkgs) -> list:
    """The packages made from wheels (debs.check_layout's: the two flavours ship one path).

    >>> without_driver([headers_package("6.1.0-18-amd64", "amd64")])
    []
    """
    return [pkg for pkg in pkgs if not isinstance(pkg, DriverPkg)]



def closure(roots: tuple[str, ...], version: str, flavour: str, machine: str = "x86_64",
            family: str = "debian") -> list[str]:
    """``name=version`` of *roots* and everything they depend on at upstream *version*, the
    module of *flavour* where either would do: what ``apt-get install`` needs named when the
    repository holds a newer driver (apt takes each package's newest, which the roots'
    exact Depends then refuse; NVIDIA's guide pins the version for the same reason).

    >>> closure(("nvidia-open",), "580.95.05", "open")[:3]
    ['firmware-nvidia-gsp=580.95.05-1', 'libcuda1=580.95.05-1', 'libnvidia-ml1=580.95.05-1']
    >>> "nvidia-kernel-dkms=580.95.05-1" in closure(("nvidia-driver-cuda",), "580.95.05", "proprietary")
    True
    >>> closure(("nvidia-driver-580-open",), "580.95.05", "open", family="ubuntu")[:2]
    ['libnvidia-compute-580=580.95.05-0ubuntu1', 'nvidia-compute-utils-580=580.95.05-0ubuntu1']
    """
    table = {pkg.name: pkg for pkg in version_packages(version, machine, family)}
    module = FAMILIES[family].modules[flavour]
    wanted, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in wanted or name not in table:  # dkms: the distribution's own
            continue
        wanted.add(name)
        for dependency in table[name].depends:
            choices = [alt.split()[0] for alt in dependency.split("|")]
            todo.append(module if module in choices else choices[0])
    return [f"{name}={table[name].version}" for name in sorted(wanted)]
