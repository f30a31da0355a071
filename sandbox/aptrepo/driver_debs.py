"""SANDBOX STAND-IN packages of NVIDIA's driver, in the sandbox apt repository.

Names, versions and dependencies as NVIDIA's repository has them for Debian, branch 580
(the driver installation guide's Debian page, "Compute-only (headless)" and "Version
locking", docs.nvidia.com/datacenter/tesla/driver-installation-guide/; Fabric Manager's
guide for ``nvidia-fabricmanager``, ``libnvidia-nscq`` and ``nvlsm``; the names fixed in
the driver step's package table and its corrections), at two versions: 580.95.05-1 (the GPU profiles'
recorded driver, the one the sandbox's lock takes) and 580.105.08-1 (newer: what an
unheld ``apt-get upgrade`` would move to). Their contents are stand-ins, and each
package's description says so:

* the GPU stand-in: ``nvidia-smi`` replaying the node's recordings
  (/usr/share/sandbox-gpu, sandbox/gpu_standin.py) while a module is loaded, NVIDIA's
  failure text otherwise; the libcuda stub (``libcuda1``); an empty
  ``libnvidia-ml.so.<version>`` (``libnvidia-ml1``, the name the probe reads); the
  nouveau blacklist (``nvidia-kernel-support``);
* daemons whose units run under the node's systemd: ``nvidia-persistenced``, Fabric
  Manager (at exactly its version, refusing another loaded module as NVIDIA's does;
  it starts ``nvlsm``, versioned on its own, where that is installed);
* the kernel module: ``nvidia-kernel-open-dkms`` / ``nvidia-kernel-dkms`` ship a DKMS
  source tree that Debian's real ``dkms`` builds for the running kernel (a few seconds,
  killable) into ``/lib/modules/<release>/updates/dkms/nvidia.ko``: an ELF whose
  ``.modinfo`` holds the version and the licence (``Dual MIT/GPL`` open, ``NVIDIA``
  proprietary), which the node's boot "loads" (sandbox/files/node-init.sh);
* ``linux-headers-<release>`` of the host's kernel (nodes run the host's kernel, which
  no archive ships headers for): what dkms looks for at /lib/modules/<release>/build.

These are built here (``build_deb``), not from wheels: ``DriverPkg`` carries the control
relations (Conflicts, Replaces) the toolkit's packages do not need.

>>> sorted({p.name for p in packages("x86_64", "6.1.0-1-amd64")})[:4]
['cuda-drivers', 'firmware-nvidia-gsp', 'libcuda1', 'libnvidia-ml1']
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
# What the pinning packages pin: the driver's packages (and Fabric Manager's, at its version).
PINNED = ("nvidia-driver", "nvidia-driver-cuda", "nvidia-open", "cuda-drivers", "nvidia-kernel-open-dkms",
          "nvidia-kernel-dkms", "nvidia-kernel-support", "libcuda1", "libnvidia-ml1", "nvidia-smi",
          "nvidia-persistenced", "nvidia-modprobe", "firmware-nvidia-gsp", "nvidia-fabricmanager", "libnvidia-nscq")
# The two kernel module flavours: package, licence in its .modinfo (the open module's
# is "Dual MIT/GPL", the proprietary one's "NVIDIA", as `modinfo nvidia` shows them).
FLAVOURS = {
    "open": ("nvidia-kernel-open-dkms", "Dual MIT/GPL"),
    "proprietary": ("nvidia-kernel-dkms", "NVIDIA"),
}
# How long the stand-in module build takes (s): long enough to kill it half-way.
DKMS_SECONDS = 5
MAINTAINER = "gpu-bringup sandbox (NVIDIA driver stand-ins) <sandbox@localhost>"
STANDIN = ("SANDBOX STAND-IN for NVIDIA's {name}: built by the gpu-bringup sandbox\n"
           "(sandbox/aptrepo/driver_debs.py) under NVIDIA's name, version and\n"
           "dependencies; its files are stand-ins, not NVIDIA's driver.")


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


def deb_version(version: str) -> str:
    """The Debian version of upstream *version*.

    >>> deb_version("580.95.05")
    '580.95.05-1'
    """
    return f"{version}-{DEBIAN_REVISION}"


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


def version_packages(version: str, machine: str) -> list[DriverPkg]:
    """The driver's packages at upstream *version* for *machine*'s CPU (``uname -m``)."""
    arch, ver, lib = cpus.dpkg_arch(machine), deb_version(version), f"usr/lib/{cpus.TRIPLETS[machine]}"

    def pkg(name: str, summary: str, **fields) -> DriverPkg:
        fields.setdefault("arch", arch)
        return DriverPkg(name=name, version=ver,
                         description=f"{summary} (SANDBOX STAND-IN)\n" + STANDIN.format(name=name), **fields)

    def at(*names: str) -> tuple[str, ...]:
        return tuple(f"{name} (= {ver})" for name in names)

    dkms = [pkg(name, f"NVIDIA kernel module ({flavour}), DKMS source",
                depends=("dkms", *at("nvidia-kernel-support", "firmware-nvidia-gsp")),
                conflicts=tuple(other for other, _ in FLAVOURS.values() if other != name),
                replaces=tuple(other for other, _ in FLAVOURS.values() if other != name),
                texts=((f"usr/src/nvidia-{version}/dkms.conf", _text("dkms.conf", VERSION=version), 0o644),
                       (f"usr/src/nvidia-{version}/dkms-build.sh",
                        _text("dkms-build.sh", VERSION=version, LICENSE=licence, FLAVOUR=flavour,
                              SECONDS=str(DKMS_SECONDS)), 0o755)),
                scripts=(("postinst", _text("dkms.postinst", VERSION=version)),
                         ("prerm", _text("dkms.prerm", VERSION=version))))
            for flavour, (name, licence) in FLAVOURS.items()]
    either_module = " | ".join(f"{name} (= {ver})" for name, _ in FLAVOURS.values())
    return [
        *dkms,
        pkg("nvidia-kernel-support", "NVIDIA kernel module support files",
            texts=(("etc/modprobe.d/nvidia-blacklists-nouveau.conf",
                    "# SANDBOX STAND-IN for the NVIDIA driver package's file.\nblacklist nouveau\n", 0o644),),
            conffiles=("/etc/modprobe.d/nvidia-blacklists-nouveau.conf",)),
        pkg("firmware-nvidia-gsp", "NVIDIA GSP firmware",
            texts=((f"lib/firmware/nvidia/{version}/gsp_ga10x.bin", "", 0o644),
                   (f"lib/firmware/nvidia/{version}/gsp_tu10x.bin", "", 0o644))),
        pkg("libcuda1", "NVIDIA CUDA Driver Library",
            generated=((f"{lib}/libcuda.so.{version}", debs.libcuda_stub_kind(machine)),),
            links=((f"{lib}/libcuda.so.1", f"libcuda.so.{version}"),)),
        pkg("libnvidia-ml1", "NVIDIA Management Library (NVML) runtime library",
            texts=((f"{lib}/libnvidia-ml.so.{version}", "", 0o644),),
            links=((f"{lib}/libnvidia-ml.so.1", f"libnvidia-ml.so.{version}"),)),
        pkg("nvidia-smi", "NVIDIA System Management Interface", depends=at("libnvidia-ml1"),
            texts=(("usr/bin/nvidia-smi", _text("nvidia-smi", VERSION=version), 0o755),
                   ("usr/lib/sandbox-gpu/sandbox-gpu-replay", REPLAY.read_text(), 0o755))),
        pkg("nvidia-persistenced", "daemon to maintain persistent software state in the NVIDIA driver",
            texts=(("usr/bin/nvidia-persistenced", _text("nvidia-persistenced"), 0o755),
                   ("lib/systemd/system/nvidia-persistenced.service", _text("nvidia-persistenced.service"), 0o644))),
        pkg("nvidia-modprobe", "utility to load NVIDIA kernel modules and create device nodes",
            texts=(("usr/bin/nvidia-modprobe", _text("nvidia-modprobe"), 0o755),)),
        pkg("nvidia-driver-cuda", "NVIDIA driver CUDA integration components",
            depends=(*at("nvidia-kernel-support", "libcuda1", "libnvidia-ml1", "nvidia-smi", "nvidia-persistenced",
                         "nvidia-modprobe", "firmware-nvidia-gsp"), either_module)),
        pkg("nvidia-driver", "NVIDIA metapackage", depends=at("nvidia-driver-cuda")),
        pkg("nvidia-open", "NVIDIA driver with the open kernel module (metapackage)",
            depends=at("nvidia-driver", "nvidia-kernel-open-dkms")),
        pkg("cuda-drivers", "CUDA Driver meta-package, branch-agnostic",
            depends=(*at("nvidia-driver"), either_module)),
        *(pkg(f"nvidia-driver-pinning-{pinned}", f"APT driver pinning file for driver {what}",
              arch="all", section="non-free/admin",
              # apt reads preferences.d files without an extension or with .pref only.
              texts=((f"etc/apt/preferences.d/nvidia-driver-pinning-{pinned}.pref",
                      f"# SANDBOX STAND-IN for NVIDIA's pinning package.\n"
                      f"Package: {' '.join(PINNED)}\nPin: version {pin}\nPin-Priority: 1000\n", 0o644),),
              conffiles=(f"/etc/apt/preferences.d/nvidia-driver-pinning-{pinned}.pref",))
          for pinned, what, pin in ((BRANCH, f"branch {BRANCH}", f"{BRANCH}.*"),
                                    (version, f"version {version}", ver))),
        pkg("nvidia-fabricmanager", "NVIDIA Fabric Manager (NVSwitch systems)",
            texts=(("usr/bin/nv-fabricmanager", _text("nv-fabricmanager", VERSION=version), 0o755),
                   ("usr/share/nvidia/nvswitch/fabricmanager.cfg", "# SANDBOX STAND-IN: nothing reads this file.\n",
                    0o644),
                   ("lib/systemd/system/nvidia-fabricmanager.service", _text("nvidia-fabricmanager.service"), 0o644)),
            conffiles=("/usr/share/nvidia/nvswitch/fabricmanager.cfg",)),
        pkg("libnvidia-nscq", "NVSwitch Configuration and Query library",
            texts=((f"{lib}/libnvidia-nscq.so.{version}", "", 0o644),)),
    ]


def nvlsm_package(machine: str) -> DriverPkg:
    """NVLSM, versioned on its own; no unit of its own in R580: Fabric Manager starts it on
    NVLink5 systems (Fabric Manager's guide, fourth-generation NVSwitch systems)."""
    return DriverPkg(name="nvlsm", version=NVLSM_VERSION, arch=cpus.dpkg_arch(machine),
                     description="NVIDIA NVLink Subnet Manager (SANDBOX STAND-IN)\n" + STANDIN.format(name="nvlsm"),
                     texts=(("opt/nvidia/nvlsm/sbin/nvlsm", _text("nvlsm"), 0o755),))


def packages(machine: str = "x86_64", kernel_release: str | None = None) -> list[DriverPkg]:
    """Every stand-in driver package of one repository directory (*machine*'s CPU), and the
    headers of *kernel_release* (default: the host's, which the nodes run)."""
    pkgs = [pkg for version in VERSIONS for pkg in version_packages(version, machine)]
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



def closure(roots: tuple[str, ...], version: str, flavour: str, machine: str = "x86_64") -> list[str]:
    """``name=version`` of *roots* and everything they depend on at upstream *version*, the
    module of *flavour* where either would do: what ``apt-get install`` needs named when the
    repository holds a newer driver (apt takes each package's newest, which the roots'
    exact Depends then refuse; NVIDIA's guide pins the version for the same reason).

    >>> closure(("nvidia-open",), "580.95.05", "open")[:3]
    ['firmware-nvidia-gsp=580.95.05-1', 'libcuda1=580.95.05-1', 'libnvidia-ml1=580.95.05-1']
    >>> "nvidia-kernel-dkms=580.95.05-1" in closure(("nvidia-driver-cuda",), "580.95.05", "proprietary")
    True
    """
    table = {pkg.name: pkg for pkg in version_packages(version, machine)}
    module = FLAVOURS[flavour][0]
    wanted, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in wanted or name not in table:  # dkms: Debian's own
            continue
        wanted.add(name)
        for dependency in table[name].depends:
            choices = [alt.split()[0] for alt in dependency.split("|")]
            todo.append(module if module in choices else choices[0])
    return [f"{name}={deb_version(version)}" for name in sorted(wanted)]
