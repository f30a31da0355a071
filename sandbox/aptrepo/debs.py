"""NVIDIA's CUDA apt packages, re-made from NVIDIA's PyPI wheels.

Names, versions, Depends and file layout follow NVIDIA's own packages in
``developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/`` (and its
``sbsa`` twin for Arm servers, ``Architecture: arm64``): toolkit X.Y installs under
``/usr/local/cuda-X.Y``, libraries and headers in ``targets/<target>/{lib,include}``
(``x86_64-linux``, ``sbsa-linux``; reached through the ``lib64`` and ``include`` links), the compiler in ``bin``, the NVVM pieces in ``nvvm``.
One table, ``toolkit_packages()``, makes the packages of every release set of
wheels.lock (CUDA 13.0 GA, 13.0 update 2, 12.8 update 1); ``LAYOUTS`` says
where each CUDA major's wheels keep what the packages ship. Every wheel file
must be claimed by a package and no two packages may ship the same path
(checked at build). A package made the same from two sets (libcurand-13-0
10.4.0.35-1 is in both 13.0 sets) is built once.

The nvcc.profile shipped in the 13.0 nvcc wheel is NVIDIA's, unchanged: from
``/usr/local/cuda-13.0/bin`` it resolves ``TOP=/usr/local/cuda-13.0``, so
cicc is ``nvvm/bin/cicc``, libdevice ``nvvm/libdevice``, includes
``targets/x86_64-linux/include`` and ``.../include/cccl``, libraries
``targets/x86_64-linux/lib`` and ``.../lib/stubs``: the layout below.

The 12.x wheels hold the real ptxas, libNVVM, libdevice and crt headers but no
nvcc driver, no cicc and no fatbinary, so CUDA 12.8 cannot compile here: its
``bin/nvcc`` is the version-reporting stand-in ``nvcc-12.8`` (SANDBOX
STAND-IN, next to this file), its ``bin/ptxas`` NVIDIA's.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import math
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bringup.plan.model import nvvm_package
from sandbox import cpus
from sandbox.aptrepo.wheels import LockedWheel

KEYRING_PATH = "usr/share/keyrings/cuda-archive-keyring.gpg"
SOURCES_LIST_PATH = "etc/apt/sources.list.d/cuda-debian12-x86_64.list"
MAINTAINER = "gpu-bringup sandbox (NVIDIA CUDA wheels repackaged) <cuda-sandbox@localhost>"
HOMEPAGE = "https://developer.nvidia.com/cuda-zone"
# Timestamp of generated files and directories, so a rebuild gives the same bytes.
EPOCH = 1735689600  # 2025-01-01T00:00:00Z

# dpkg-deb compression: zstd, as Ubuntu's archive uses since 21.10 (NVIDIA's and
# Debian's use xz; dpkg reads both, and no check here depends on which). The CUDA
# binaries barely compress (libcublas: 691 MB to 527 MB with zstd -3, 518 MB with
# xz -1), and every toolkit install in the tests unpacks them: xz took 5.9 s of CPU
# for that one package, zstd 0.9 s, and several times that gap under QEMU on the
# arm64 nodes.
COMPRESSION = ("zstd", "3")


@dataclass(frozen=True)
class Layout:
    """Where one CUDA major's PyPI wheels keep the parts NVIDIA's packages ship.

    Read from the wheels themselves (unzip -l of the locked files): the 13.x
    wheels share the root ``nvidia/cu13/`` and ship crt and NVVM as wheels of
    their own; each 12.x ``-cu12`` wheel has its own root and keeps crt and
    NVVM inside the nvcc wheel, which holds ptxas as its only program.
    """
    # part -> (wheel name, root of its files inside the wheel); a part whose
    # wheel is not in a release set is not packaged for it.
    parts: dict[str, tuple[str, str]]
    libnvvm: str                          # under the nvvm part's root
    nvvm_h: str
    nvcc_headers: tuple[str, ...]         # headers cuda-nvcc ships (not crt/)
    runtime_static: tuple[str, ...]       # static libraries of the runtime wheel
    # The nvcc wheel has the nvcc driver, cicc (in the nvvm part) and fatbinary.
    complete: bool


LAYOUTS = {
    13: Layout(
        parts={part: (wheel, "nvidia/cu13/") for part, wheel in (
            ("nvcc", "nvidia-cuda-nvcc"), ("crt", "nvidia-cuda-crt"), ("nvvm", "nvidia-nvvm"),
            ("cccl", "nvidia-cuda-cccl"), ("runtime", "nvidia-cuda-runtime"),
            ("culibos", "nvidia-cuda-culibos"), ("curand", "nvidia-curand"), ("cublas", "nvidia-cublas"))},
        libnvvm="lib/libnvvm.so.4",
        nvvm_h="include/nvvm.h",
        nvcc_headers=("include/fatbinary_section.h",),
        runtime_static=("lib/libcudart_static.a", "lib/libcudadevrt.a"),
        complete=True,
    ),
    12: Layout(
        parts={
            "nvcc": ("nvidia-cuda-nvcc-cu12", "nvidia/cuda_nvcc/"),
            "crt": ("nvidia-cuda-nvcc-cu12", "nvidia/cuda_nvcc/"),
            "nvvm": ("nvidia-cuda-nvcc-cu12", "nvidia/cuda_nvcc/"),
            "cccl": ("nvidia-cuda-cccl-cu12", "nvidia/cuda_cccl/"),
            "runtime": ("nvidia-cuda-runtime-cu12", "nvidia/cuda_runtime/"),
        },
        libnvvm="nvvm/lib64/libnvvm.so",
        nvvm_h="nvvm/include/nvvm.h",
        nvcc_headers=("include/fatbinary_section.h", "include/nvPTXCompiler.h"),
        runtime_static=(),
        complete=False,
    ),
}

# Where nvidia-nvvm keeps cicc, by wheel version (unzip -l): bin/cicc in 13.0.48
# (13.0 GA), nvvm/bin/cicc from 13.0.88 on. nvcc.profile looks in nvvm/bin
# (CICC_PATH = $(TOP)/nvvm/bin), where NVIDIA's NVVM package (nvvm_package) puts it.
CICC_IN_WHEEL = {"13.0.48": "bin/cicc"}
CICC_DEFAULT = "nvvm/bin/cicc"

# uname -m -> NVIDIA's targets/ directory. Source: nvcc.profile's $(_TARGET_DIR_)
# (targets/x86_64-linux on x86_64, targets/sbsa-linux on an Arm server) and NVIDIA's sbsa
# packages (cuda-cudart-dev-13-0_*_arm64.deb ships usr/local/cuda-13.0/targets/sbsa-linux/).
TARGETS = {"x86_64": "x86_64-linux", "aarch64": "sbsa-linux"}

# bin/nvcc of a toolkit whose wheels have no nvcc driver: SANDBOX STAND-IN
# scripts that only report the version (text of NVIDIA's nvcc of that release).
NVCC_STANDINS = {"12.8": Path(__file__).with_name("nvcc-12.8")}


@dataclass(frozen=True)
class Release:
    """One release set of wheels.lock: the wheels cuda-toolkit==*toolkit* pins together."""
    toolkit: str                       # the cuda-toolkit meta wheel's version, "13.0.2"
    wheels: dict[str, LockedWheel]     # wheel name -> locked wheel
    machine: str = "x86_64"            # the CPU the wheels are built for (uname -m)

    @property
    def major(self) -> int:
        return int(self.toolkit.split(".")[0])

    @property
    def cuda(self) -> str:
        """X.Y, as in /usr/local/cuda-X.Y."""
        return ".".join(self.toolkit.split(".")[:2])

    @property
    def suffix(self) -> str:
        """-X-Y, as in cuda-nvcc-X-Y."""
        return "-" + self.cuda.replace(".", "-")

    @property
    def home(self) -> str:
        return f"usr/local/cuda-{self.cuda}"

    @property
    def target(self) -> str:
        """The toolkit's targets/ directory: ``x86_64-linux``, ``sbsa-linux``."""
        return TARGETS[self.machine]

    @property
    def deb_arch(self) -> str:
        """``Architecture:`` of its CPU-specific packages: ``amd64``, ``arm64``."""
        return cpus.dpkg_arch(self.machine)

    @property
    def targets(self) -> str:
        """The toolkit's own target tree, under its home."""
        return f"{self.home}/targets/{self.target}"

    @property
    def priority(self) -> int:
        """update-alternatives priority: 128 for 12.8, 130 for 13.0 (newest wins)."""
        major, minor = self.cuda.split(".")
        return int(major) * 10 + int(minor)

    @property
    def layout(self) -> Layout:
        return LAYOUTS[self.major]

    def has(self, part: str) -> bool:
        return part in self.layout.parts and self.layout.parts[part][0] in self.wheels

    def wheel(self, part: str) -> LockedWheel:
        return self.wheels[self.layout.parts[part][0]]

    def src(self, part: str, path: str) -> tuple[LockedWheel, str]:
        """(wheel, member path) of *path* under the root of *part*'s wheel."""
        return self.wheel(part), self.layout.parts[part][1] + path

    def version(self, part: str) -> str:
        """Debian version of the packages made from *part*: the wheel's, plus "-1"."""
        return f"{self.wheel(part).version}-1"


def releases(sets: dict[str, dict[str, LockedWheel]], machine: str = "x86_64") -> list[Release]:
    """The release sets of a read lock (wheels.read_lock()) of *machine*'s wheels."""
    return [Release(toolkit, wheels, machine) for toolkit, wheels in sets.items()]


@dataclass(frozen=True)
class Pkg:
    name: str
    version: str
    description: str
    arch: str = "amd64"
    section: str = "devel"
    depends: tuple[str, ...] = ()
    # (wheel, member path in the wheel -- a directory when it ends with "/", destination)
    files: tuple[tuple[LockedWheel, str, str], ...] = ()
    # (path, link target) -- relative targets, as NVIDIA ships them
    links: tuple[tuple[str, str], ...] = ()
    dirs: tuple[str, ...] = ()
    # (path, content, mode): files whose content is given here
    texts: tuple[tuple[str, str, int], ...] = ()
    # (path, generator name): content made at build time (see _generate)
    generated: tuple[tuple[str, str], ...] = ()
    scripts: tuple[tuple[str, str], ...] = ()
    conffiles: tuple[str, ...] = ()

    def wheels(self) -> list[LockedWheel]:
        return sorted({w for w, _, _ in self.files}, key=lambda w: (w.name, w.version))


_POSTINST_CONFIG_COMMON = """#!/bin/sh
# Registers this toolkit for /usr/local/cuda and /usr/local/cuda-{major} the way
# NVIDIA's cuda-toolkit-X-Y-config-common does: the highest priority wins, so
# /usr/local/cuda moves when another toolkit is installed (never trust it).
set -e
if [ "$1" = "configure" ]; then
    update-alternatives --install /usr/local/cuda cuda /{home} {priority}
    update-alternatives --install /usr/local/cuda-{major} cuda-{major} /{home} {priority}
fi
exit 0
"""

_PRERM_CONFIG_COMMON = """#!/bin/sh
set -e
if [ "$1" = "remove" ] || [ "$1" = "deconfigure" ]; then
    update-alternatives --remove cuda /{home}
    update-alternatives --remove cuda-{major} /{home}
fi
exit 0
"""

_DOC = """This package is part of the gpu-bringup sandbox's CUDA apt repository:
NVIDIA's CUDA {cuda} PyPI wheels repackaged under NVIDIA's apt package names.
It registers /{home} as the 'cuda' and 'cuda-{major}' alternatives.
"""


def toolkit_packages(rel: Release) -> tuple[Pkg, ...]:
    """What NVIDIA's debian12/x86_64 (or sbsa) repository calls the packages of *rel* and what they hold."""
    lay, sfx, home, major, arch = rel.layout, rel.suffix, rel.home, rel.major, rel.deb_arch
    tgt = rel.targets
    config = f"cuda-toolkit{sfx}-config-common"
    cudart_up = rel.wheel("runtime").version
    fmt = {"home": home, "major": major, "priority": rel.priority, "cuda": rel.cuda}
    pkgs = [
        Pkg(
            name=config,
            version=rel.version("runtime"),
            arch="all",
            description=f"Common config package for CUDA Toolkit {rel.cuda}.\n"
                        f"Registers /{home} as the 'cuda' and 'cuda-{major}' alternatives.",
            # update-alternatives refuses a target that does not exist yet.
            dirs=(home,),
            # A package of directories only is "completely replaced" (and dropped)
            # by dpkg as soon as other packages own them: ship one file of its own.
            texts=((f"usr/share/doc/{config}/README", _DOC.format(**fmt), 0o644),),
            scripts=(("postinst", _POSTINST_CONFIG_COMMON.format(**fmt)),
                     ("prerm", _PRERM_CONFIG_COMMON.format(**fmt))),
        ),
        Pkg(
            name=f"cuda-cudart{sfx}",
            version=rel.version("runtime"),
            arch=arch,
            description="CUDA Runtime native Libraries",
            depends=(config,),
            files=((*rel.src("runtime", f"lib/libcudart.so.{major}"), f"{tgt}/lib/libcudart.so.{cudart_up}"),),
            links=((f"{tgt}/lib/libcudart.so.{major}", f"libcudart.so.{cudart_up}"),),
        ),
        Pkg(
            name=f"cuda-cudart-dev{sfx}",
            version=rel.version("runtime"),
            arch=arch,
            description="CUDA Runtime native dev links, headers",
            depends=(f"cuda-cudart{sfx} (>= {cudart_up})", f"cuda-cccl{sfx}", f"cuda-driver-dev{sfx}"),
            files=(
                (*rel.src("runtime", "include/"), f"{tgt}/include/"),
                *((*rel.src("runtime", lib), f"{tgt}/{lib}") for lib in lay.runtime_static),
                *([(*rel.src("culibos", "lib/libculibos.a"), f"{tgt}/lib/libculibos.a")]
                  if rel.has("culibos") else []),
            ),
            links=(
                (f"{tgt}/lib/libcudart.so", f"libcudart.so.{major}"),
                # The toolkit-level names everybody uses ($CUDA_HOME/include, $CUDA_HOME/lib64).
                (f"{home}/include", f"targets/{rel.target}/include"),
                (f"{home}/lib64", f"targets/{rel.target}/lib"),
            ),
        ),
        Pkg(
            name=f"cuda-driver-dev{sfx}",
            version=rel.version("runtime"),
            arch=arch,
            description="CUDA Driver native dev stub library",
            generated=((f"{tgt}/lib/stubs/libcuda.so", libcuda_stub_kind(rel.machine)),),
        ),
        Pkg(
            name=f"cuda-cccl{sfx}",
            version=rel.version("cccl"),
            arch=arch,
            description="CUDA CCCL (Thrust, CUB, libcu++)",
            files=((*rel.src("cccl", "include/"), f"{tgt}/include/"),
                   (*rel.src("cccl", "lib/cmake/"), f"{tgt}/lib/cmake/")),
        ),
        Pkg(
            name=f"cuda-crt{sfx}",
            version=rel.version("crt"),
            arch=arch,
            description="CUDA crt (device runtime headers used by nvcc)",
            files=((*rel.src("crt", "include/crt/"), f"{tgt}/include/crt/"),),
        ),
        _nvvm_package(rel),
        _nvcc_package(rel),
    ]
    if rel.has("curand"):
        pkgs += _library_packages(rel, "curand", "libcurand", "CURAND", ("libcurand",))
    if rel.has("cublas"):
        # FlashInfer's JIT includes cublasLt.h (norm, via trtllm/common/cudaUtils.h).
        pkgs += _library_packages(rel, "cublas", "libcublas", "CUBLAS", ("libcublas", "libcublasLt", "libnvblas"))
    return tuple(pkgs)


def _nvvm_package(rel: Release) -> Pkg:
    home, nvvm = rel.home, rel.wheel("nvvm")
    cicc = ()
    if rel.layout.complete:
        cicc = ((*rel.src("nvvm", CICC_IN_WHEEL.get(nvvm.version, CICC_DEFAULT)), f"{home}/nvvm/bin/cicc"),)
    return Pkg(
        name=f"{nvvm_package(rel.major)}{rel.suffix}",
        version=rel.version("nvvm"),
        arch=rel.deb_arch,
        description="CUDA nvvm (cicc, libNVVM, libdevice)" if cicc else "CUDA nvvm (libNVVM, libdevice)",
        files=(
            *cicc,
            (*rel.src("nvvm", "nvvm/libdevice/"), f"{home}/nvvm/libdevice/"),
            (*rel.src("nvvm", rel.layout.nvvm_h), f"{home}/nvvm/include/nvvm.h"),
            (*rel.src("nvvm", rel.layout.libnvvm), f"{home}/nvvm/lib64/libnvvm.so.4.0.0"),
        ),
        links=(
            (f"{home}/nvvm/lib64/libnvvm.so.4", "libnvvm.so.4.0.0"),
            (f"{home}/nvvm/lib64/libnvvm.so", "libnvvm.so.4"),
        ),
    )


def _nvcc_package(rel: Release) -> Pkg:
    home, sfx, tgt = rel.home, rel.suffix, rel.targets
    standin = ()
    if not rel.layout.complete:
        if rel.cuda not in NVCC_STANDINS:
            raise RuntimeError(f"CUDA {rel.cuda}: its wheels have no nvcc and there is no stand-in for it")
        standin = ((f"{home}/bin/nvcc", NVCC_STANDINS[rel.cuda].read_text(), 0o755),)
    return Pkg(
        name=f"cuda-nvcc{sfx}",
        version=rel.version("nvcc"),
        arch=rel.deb_arch,
        description="CUDA nvcc" if not standin else
                    "CUDA nvcc (ptxas; nvcc is a version-reporting sandbox stand-in)\n"
                    "NVIDIA's PyPI wheels of this release carry ptxas but no nvcc driver,\n"
                    "cicc or fatbinary: bin/nvcc only answers --version.",
        depends=(f"cuda-crt{sfx} (>= {rel.wheel('crt').version})",
                 f"{nvvm_package(rel.major)}{sfx} (>= {rel.wheel('nvvm').version})"),
        files=(
            (*rel.src("nvcc", "bin/"), f"{home}/bin/"),
            *((*rel.src("nvcc", h), f"{tgt}/{h}") for h in rel.layout.nvcc_headers),
        ),
        texts=standin,
    )


def _library_packages(rel: Release, part: str, name: str, title: str, libs: tuple[str, ...]) -> list[Pkg]:
    """The runtime and -dev packages of one math library (libcurand, libcublas)."""
    sfx, tgt = rel.suffix, rel.targets
    so = rel.wheel(part).version  # NVIDIA names the library files after the package version
    soname = so.split(".")[0]     # the library's own major: libcurand.so.10, libcublas.so.13
    return [
        Pkg(
            name=f"{name}{sfx}",
            version=rel.version(part),
            arch=rel.deb_arch,
            section="libs",
            description=f"{title} native runtime libraries",
            depends=(f"cuda-toolkit{sfx}-config-common",),
            files=tuple((*rel.src(part, f"lib/{lib}.so.{soname}"), f"{tgt}/lib/{lib}.so.{so}") for lib in libs),
            links=tuple((f"{tgt}/lib/{lib}.so.{soname}", f"{lib}.so.{so}") for lib in libs),
        ),
        Pkg(
            name=f"{name}-dev{sfx}",
            version=rel.version(part),
            arch=rel.deb_arch,
            section="libdevel",
            description=f"{title} native dev links, headers",
            depends=(f"{name}{sfx} (>= {so})",),
            files=((*rel.src(part, "include/"), f"{tgt}/include/"),),
            links=tuple((f"{tgt}/lib/{lib}.so", f"{lib}.so.{soname}") for lib in libs),
        ),
    ]


KEYRING = Pkg(
    name="cuda-keyring",
    version="1.1-1",
    arch="all",
    section="admin",
    description="GPG keyring for the CUDA repository (sandbox)\n"
                "Installs the repository's signing key and its apt source, like\n"
                "NVIDIA's cuda-keyring; the key is the sandbox repository's own.",
    generated=((KEYRING_PATH, "keyring"), (SOURCES_LIST_PATH, "sources-list")),
    conffiles=(f"/{SOURCES_LIST_PATH}",),
)


def all_packages(sets: dict[str, dict[str, LockedWheel]], machine: str = "x86_64",
                 keyring: Pkg = KEYRING) -> list[Pkg]:
    """Every package of every release set of *machine*'s wheels, each (name, version) once,
    and *keyring*.

    Two sets may make the same package (same wheel, same version); made
    differently under one name and version it would be two packages apt
    cannot tell apart, so that is an error.
    """
    seen: dict[tuple[str, str], Pkg] = {}
    for rel in releases(sets, machine):
        for pkg in toolkit_packages(rel):
            other = seen.setdefault((pkg.name, pkg.version), pkg)
            if other != pkg:
                raise RuntimeError(f"{pkg.name} {pkg.version} is made two ways (cuda-toolkit=={rel.toolkit})")
    return [*seen.values(), keyring]


@dataclass
class Context:
    """Inputs a build needs besides the wheels."""
    fingerprint: str = ""
    public_key: bytes = b""       # binary (gpg --export) key for the keyring package
    repo_url: str = ""            # what the keyring's sources.list points at


def deb_filename(pkg: Pkg) -> str:
    """The pool's file name: ``<name>_<version>_<arch>.deb``, the version without its epoch
    (as dpkg-name and Debian's pools write it: no ``:`` in a served file name).

    >>> from types import SimpleNamespace
    >>> deb_filename(SimpleNamespace(name="datacenter-gpu-manager-4-core", version="1:4.4.1-1", arch="amd64"))
    'datacenter-gpu-manager-4-core_4.4.1-1_amd64.deb'
    """
    return f"{pkg.name}_{pkg.version.split(':', 1)[-1]}_{pkg.arch}.deb"


def check_layout(wheels: dict[LockedWheel, Path], packages: list[Pkg]) -> None:
    """Every wheel file claimed, no path shipped under two package names."""
    owners: dict[str, str] = {}
    claimed: dict[LockedWheel, set[str]] = {}
    for pkg in packages:
        for dest in _dest_paths(pkg, wheels, claimed):
            # The same package at another version may ship it (it replaces itself).
            if owners.setdefault(dest, pkg.name) != pkg.name:
                raise RuntimeError(f"{dest} is in both {owners[dest]} and {pkg.name}")
    for wheel in {w for pkg in packages for w in pkg.wheels()}:
        with zipfile.ZipFile(wheels[wheel]) as zf:
            members = {m.filename for m in zf.infolist() if _payload(m)}
        left = members - claimed.get(wheel, set())
        if left:
            raise RuntimeError(f"{wheel.name}=={wheel.version}: no package ships {sorted(left)[:10]}")


def _payload(member: zipfile.ZipInfo) -> bool:
    """A file the toolkit needs: not NVIDIA's build records (.metadata/), not the
    empty __init__.py package markers of the 12.x wheels, not the dist-info."""
    parts = member.filename.split("/")
    return (not member.is_dir() and parts[0] == "nvidia" and ".metadata" not in parts
            and parts[-1] != "__init__.py")


def _matches(members, src: str):
    """(member, suffix) pairs of the wheel members a mapping source covers."""
    for m in members:
        if src.endswith("/"):
            if m.filename.startswith(src) and _payload(m):
                yield m, m.filename[len(src):]
        elif m.filename == src:
            yield m, ""


def _dest_paths(pkg: Pkg, wheels, claimed) -> list[str]:
    out = []
    for wheel, src, dest in pkg.files:
        with zipfile.ZipFile(wheels[wheel]) as zf:
            hits = list(_matches(zf.infolist(), src))
        if not hits:
            raise RuntimeError(f"{pkg.name} {pkg.version}: {wheel.name}=={wheel.version} has nothing at {src}")
        for m, suffix in hits:
            claimed.setdefault(wheel, set()).add(m.filename)
            out.append(dest + suffix)
    out += [p for p, _ in pkg.links]
    out += [p for p, _, _ in pkg.texts]
    out += [p for p, _ in pkg.generated]
    return out


def package_digest(pkg: Pkg, generator_inputs: dict[str, str]) -> str:
    """Hash of everything that shapes one .deb (to reuse an unchanged one)."""
    spec = {
        "pkg": repr(pkg),  # version, depends, wheels with their sha256, texts
        "generated": {g: generator_inputs[g] for _, g in pkg.generated},
        "compression": COMPRESSION,
        "builder": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def libcuda_stub_kind(machine: str) -> str:
    """The generator of *machine*'s libcuda stub: ``libcuda-stub`` (x86_64, the name
    older builds cached under), ``libcuda-stub-aarch64``.

    >>> libcuda_stub_kind("aarch64")
    'libcuda-stub-aarch64'
    """
    return "libcuda-stub" if machine == "x86_64" else f"libcuda-stub-{machine}"


def generator_inputs(ctx: Context) -> dict[str, str]:
    stub = hashlib.sha256(_LIBCUDA_STUB_C.encode()).hexdigest()
    return {
        **{libcuda_stub_kind(machine): stub for machine in TARGETS},
        "keyring": hashlib.sha256(ctx.public_key).hexdigest(),
        "sources-list": _sources_list(ctx),
    }


# The libcuda link stub. SANDBOX STAND-IN: NVIDIA's stubs/libcuda.so exports
# the driver API; this one is an empty shared object (soname libcuda.so.1)
# built with gcc. It lets "-lcuda -L$CUDA_HOME/lib64/stubs" link a shared
# object (as FlashInfer's JIT does) on a machine without NVIDIA's driver.
_LIBCUDA_STUB_C = """/* SANDBOX STAND-IN for NVIDIA's stubs/libcuda.so: an empty shared object
 * (soname libcuda.so.1) so that -lcuda links on a builder without a driver.
 * It exports no CUDA driver API. */
const char gpu_bringup_sandbox_libcuda_stub[] = "sandbox stand-in, not NVIDIA libcuda";
"""


def _sources_list(ctx: Context) -> str:
    return f"deb [signed-by=/{KEYRING_PATH}] {ctx.repo_url} /\n"


def _generate(kind: str, dest: Path, ctx: Context, scratch: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    stub_for = {libcuda_stub_kind(machine): machine for machine in TARGETS}
    if kind in stub_for:
        src = scratch / "libcuda-stub.c"
        src.write_text(_LIBCUDA_STUB_C)
        subprocess.run([cpus.gcc(stub_for[kind]), "-shared", "-fPIC", "-nostdlib", "-O2", "-Wl,-soname,libcuda.so.1",
                        "-Wl,--build-id=none", "-o", str(dest), str(src)], check=True)
        os.chmod(dest, 0o755)
    elif kind == "keyring":
        dest.write_bytes(ctx.public_key)
        os.chmod(dest, 0o644)
    elif kind == "sources-list":
        dest.write_text(_sources_list(ctx))
        os.chmod(dest, 0o644)
    else:
        raise ValueError(kind)


def build_deb(pkg: Pkg, ctx: Context, wheels: dict[LockedWheel, Path], out_dir: Path, workdir: Path) -> Path:
    """Stage *pkg* from the wheels and run dpkg-deb; returns the .deb path."""
    # Per name and version: two versions of one package may build side by side.
    stage = workdir / f"{pkg.name}_{pkg.version}"
    scratch = workdir / f"{pkg.name}_{pkg.version}.scratch"
    for d in (stage, scratch):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    for wheel, src, dest in pkg.files:
        with zipfile.ZipFile(wheels[wheel]) as zf:
            for m, suffix in _matches(zf.infolist(), src):
                target = stage / (dest + suffix)
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(m) as fin, open(target, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
                executable = (m.external_attr >> 16) & 0o111
                os.chmod(target, 0o755 if executable else 0o644)
                mtime = calendar.timegm(m.date_time + (0, 0, 0))
                os.utime(target, (mtime, mtime))
    for path, target in pkg.links:
        link = stage / path
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)
    for d in pkg.dirs:
        (stage / d).mkdir(parents=True, exist_ok=True)
    for path, text, mode in pkg.texts:
        (stage / path).parent.mkdir(parents=True, exist_ok=True)
        _write(stage / path, text, mode)
        os.utime(stage / path, (EPOCH, EPOCH))
    for path, kind in pkg.generated:
        _generate(kind, stage / path, ctx, scratch)
        os.utime(stage / path, (EPOCH, EPOCH))

    installed_kib = 0
    md5 = []
    for dirpath, dirnames, filenames in os.walk(stage):
        dirnames.sort()
        for d in dirnames:
            installed_kib += 1
        for f in sorted(filenames):
            p = Path(dirpath) / f
            rel = p.relative_to(stage).as_posix()
            if p.is_symlink():
                installed_kib += 1
                continue
            installed_kib += max(1, math.ceil(p.stat().st_size / 1024))
            md5.append(f"{_md5(p)}  {rel}\n")

    control_dir = stage / "DEBIAN"
    control_dir.mkdir()
    desc_short, _, desc_long = pkg.description.partition("\n")
    long_lines = [desc_long] if desc_long else []
    long_lines.append(_provenance(pkg))
    fields = [
        ("Package", pkg.name),
        ("Version", pkg.version),
        ("Architecture", pkg.arch),
        ("Maintainer", MAINTAINER),
        ("Installed-Size", str(installed_kib)),
    ]
    if pkg.depends:
        fields.append(("Depends", ", ".join(pkg.depends)))
    fields += [("Section", pkg.section), ("Priority", "optional"), ("Homepage", HOMEPAGE)]
    body = "".join(f"{k}: {v}\n" for k, v in fields)
    long_text = "\n".join(long_lines)
    body += f"Description: {desc_short}\n" + "".join(
        f" {line}\n" if line.strip() else " .\n" for line in long_text.splitlines())
    _write(control_dir / "control", body, 0o644)
    _write(control_dir / "md5sums", "".join(md5), 0o644)
    for name, text in pkg.scripts:
        _write(control_dir / name, text, 0o755)
    if pkg.conffiles:
        _write(control_dir / "conffiles", "".join(c + "\n" for c in pkg.conffiles), 0o644)
    for dirpath, dirnames, filenames in os.walk(stage):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o755)
            if not (os.path.isfile(p) and not os.path.islink(p)) or p.startswith(str(control_dir)):
                os.utime(p, (EPOCH, EPOCH), follow_symlinks=False)
    os.utime(stage, (EPOCH, EPOCH))

    out = out_dir / deb_filename(pkg)
    comp, level = COMPRESSION
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(EPOCH))
    proc = subprocess.run(
        ["dpkg-deb", "--root-owner-group", f"-Z{comp}", f"-z{level}", "--build", str(stage), str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"dpkg-deb failed for {pkg.name}:\n{proc.stdout}")
    shutil.rmtree(stage)
    shutil.rmtree(scratch)
    return out


def _provenance(pkg: Pkg) -> str:
    wheels = [f"{w.name}=={w.version}" for w in pkg.wheels()]
    if wheels:
        return "Repackaged for the gpu-bringup sandbox from NVIDIA's PyPI wheel(s) " + ", ".join(wheels) + "."
    return "Made for the gpu-bringup sandbox repository."


def _md5(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "md5").hexdigest()


def _write(path: Path, text: str, mode: int) -> None:
    path.write_text(text)
    os.chmod(path, mode)


def control_of(deb: Path) -> str:
    """The control stanza of a built .deb (dpkg-deb -f)."""
    return subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, stdout=subprocess.PIPE,
                          text=True).stdout
