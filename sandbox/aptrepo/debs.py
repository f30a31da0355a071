"""NVIDIA's CUDA 13.0 apt packages, re-made from NVIDIA's PyPI wheels.

Names, versions, Depends and file layout follow NVIDIA's own packages in
``developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/``:
everything installs under ``/usr/local/cuda-13.0``, libraries and headers in
``targets/x86_64-linux/{lib,include}`` (reached through the ``lib64`` and
``include`` links), the compiler in ``bin``, the NVVM pieces in ``nvvm``.
The wheels lay out ``nvidia/cu13/{bin,include,lib,nvvm}``; the tables below
say where each wheel file goes. Every wheel file must be claimed by exactly
one package and no two packages may ship the same path (checked at build).

The nvcc.profile shipped in the nvcc wheel is NVIDIA's, unchanged: from
``/usr/local/cuda-13.0/bin`` it resolves ``TOP=/usr/local/cuda-13.0``, so
cicc is ``nvvm/bin/cicc``, libdevice ``nvvm/libdevice``, includes
``targets/x86_64-linux/include`` and ``.../include/cccl``, libraries
``targets/x86_64-linux/lib`` and ``.../lib/stubs``: the layout below.
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
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.aptrepo.wheels import LockedWheel

CUDA = "usr/local/cuda-13.0"
TGT = f"{CUDA}/targets/x86_64-linux"
WHEEL_ROOT = "nvidia/cu13/"
KEYRING_PATH = "usr/share/keyrings/cuda-archive-keyring.gpg"
SOURCES_LIST_PATH = "etc/apt/sources.list.d/cuda-debian12-x86_64.list"
MAINTAINER = "gpu-bringup sandbox (NVIDIA CUDA wheels repackaged) <cuda-sandbox@localhost>"
HOMEPAGE = "https://developer.nvidia.com/cuda-zone"
# Timestamp of generated files and directories, so a rebuild gives the same bytes.
EPOCH = 1735689600  # 2025-01-01T00:00:00Z

# dpkg-deb compression: xz is what NVIDIA (and Debian) use; level 1 keeps a
# cold build of ~400 MB of binaries short on two cores.
COMPRESSION = ("xz", "1")


@dataclass(frozen=True)
class Pkg:
    name: str
    description: str
    # Wheel whose version (plus "-1") is the package version, or a fixed version.
    version_of: str = ""
    version: str = ""
    arch: str = "amd64"
    section: str = "devel"
    # Depends entries; "{pkg-name}" is replaced by that package's version.
    depends: tuple[str, ...] = ()
    # (wheel, path under nvidia/cu13/ -- a directory when it ends with "/", destination)
    files: tuple[tuple[str, str, str], ...] = ()
    # (path, link target) -- relative targets, as NVIDIA ships them
    links: tuple[tuple[str, str], ...] = ()
    dirs: tuple[str, ...] = ()
    # (path, generator name): content made at build time (see _generate)
    generated: tuple[tuple[str, str], ...] = ()
    scripts: tuple[tuple[str, str], ...] = ()
    conffiles: tuple[str, ...] = ()

    def wheels(self) -> list[str]:
        names = {w for w, _, _ in self.files}
        if self.version_of:
            names.add(self.version_of)
        return sorted(names)


_POSTINST_CONFIG_COMMON = """#!/bin/sh
# Registers this toolkit for /usr/local/cuda and /usr/local/cuda-13 the way
# NVIDIA's cuda-toolkit-X-Y-config-common does: the highest priority wins, so
# /usr/local/cuda moves when another toolkit is installed (never trust it).
set -e
if [ "$1" = "configure" ]; then
    update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-13.0 130
    update-alternatives --install /usr/local/cuda-13 cuda-13 /usr/local/cuda-13.0 130
fi
exit 0
"""

_PRERM_CONFIG_COMMON = """#!/bin/sh
set -e
if [ "$1" = "remove" ] || [ "$1" = "deconfigure" ]; then
    update-alternatives --remove cuda /usr/local/cuda-13.0
    update-alternatives --remove cuda-13 /usr/local/cuda-13.0
fi
exit 0
"""

# What NVIDIA's debian12/x86_64 repository calls these packages and what they hold.
PACKAGES: tuple[Pkg, ...] = (
    Pkg(
        name="cuda-toolkit-13-0-config-common",
        version_of="nvidia-cuda-runtime",
        arch="all",
        description="Common config package for CUDA Toolkit 13.0.\n"
                    "Registers /usr/local/cuda-13.0 as the 'cuda' and 'cuda-13' alternatives.",
        # update-alternatives refuses a target that does not exist yet.
        dirs=(CUDA,),
        # A package of directories only is "completely replaced" (and dropped)
        # by dpkg as soon as other packages own them: ship one file of its own.
        generated=(("usr/share/doc/cuda-toolkit-13-0-config-common/README", "doc"),),
        scripts=(("postinst", _POSTINST_CONFIG_COMMON), ("prerm", _PRERM_CONFIG_COMMON)),
    ),
    Pkg(
        name="cuda-cudart-13-0",
        version_of="nvidia-cuda-runtime",
        description="CUDA Runtime native Libraries",
        depends=("cuda-toolkit-13-0-config-common",),
        files=(("nvidia-cuda-runtime", "lib/libcudart.so.13", f"{TGT}/lib/libcudart.so.{{cuda-cudart-13-0:up}}"),),
        links=((f"{TGT}/lib/libcudart.so.13", "libcudart.so.{cuda-cudart-13-0:up}"),),
    ),
    Pkg(
        name="cuda-cudart-dev-13-0",
        version_of="nvidia-cuda-runtime",
        description="CUDA Runtime native dev links, headers",
        depends=("cuda-cudart-13-0 (>= {cuda-cudart-13-0:up})", "cuda-cccl-13-0", "cuda-driver-dev-13-0"),
        files=(
            ("nvidia-cuda-runtime", "include/", f"{TGT}/include/"),
            ("nvidia-cuda-runtime", "lib/libcudart_static.a", f"{TGT}/lib/libcudart_static.a"),
            ("nvidia-cuda-runtime", "lib/libcudadevrt.a", f"{TGT}/lib/libcudadevrt.a"),
            ("nvidia-cuda-culibos", "lib/libculibos.a", f"{TGT}/lib/libculibos.a"),
        ),
        links=(
            (f"{TGT}/lib/libcudart.so", "libcudart.so.13"),
            # The toolkit-level names everybody uses ($CUDA_HOME/include, $CUDA_HOME/lib64).
            (f"{CUDA}/include", "targets/x86_64-linux/include"),
            (f"{CUDA}/lib64", "targets/x86_64-linux/lib"),
        ),
    ),
    Pkg(
        name="cuda-driver-dev-13-0",
        version_of="nvidia-cuda-runtime",
        description="CUDA Driver native dev stub library",
        generated=((f"{TGT}/lib/stubs/libcuda.so", "libcuda-stub"),),
    ),
    Pkg(
        name="cuda-cccl-13-0",
        version_of="nvidia-cuda-cccl",
        description="CUDA CCCL (Thrust, CUB, libcu++)",
        files=(
            ("nvidia-cuda-cccl", "include/cccl/", f"{TGT}/include/cccl/"),
            ("nvidia-cuda-cccl", "include/nv/", f"{TGT}/include/nv/"),
            ("nvidia-cuda-cccl", "lib/cmake/", f"{TGT}/lib/cmake/"),
        ),
    ),
    Pkg(
        name="cuda-crt-13-0",
        version_of="nvidia-cuda-crt",
        description="CUDA crt (device runtime headers used by nvcc)",
        files=(("nvidia-cuda-crt", "include/crt/", f"{TGT}/include/crt/"),),
    ),
    Pkg(
        name="cuda-nvvm-13-0",
        version_of="nvidia-nvvm",
        description="CUDA nvvm (cicc, libNVVM, libdevice)",
        files=(
            ("nvidia-nvvm", "nvvm/bin/cicc", f"{CUDA}/nvvm/bin/cicc"),
            ("nvidia-nvvm", "nvvm/libdevice/", f"{CUDA}/nvvm/libdevice/"),
            ("nvidia-nvvm", "include/nvvm.h", f"{CUDA}/nvvm/include/nvvm.h"),
            ("nvidia-nvvm", "lib/libnvvm.so.4", f"{CUDA}/nvvm/lib64/libnvvm.so.4.0.0"),
        ),
        links=(
            (f"{CUDA}/nvvm/lib64/libnvvm.so.4", "libnvvm.so.4.0.0"),
            (f"{CUDA}/nvvm/lib64/libnvvm.so", "libnvvm.so.4"),
        ),
    ),
    Pkg(
        name="cuda-nvcc-13-0",
        version_of="nvidia-cuda-nvcc",
        description="CUDA nvcc",
        depends=("cuda-crt-13-0 (>= {cuda-crt-13-0:up})", "cuda-nvvm-13-0 (>= {cuda-nvvm-13-0:up})"),
        files=(
            ("nvidia-cuda-nvcc", "bin/", f"{CUDA}/bin/"),
            ("nvidia-cuda-nvcc", "include/fatbinary_section.h", f"{TGT}/include/fatbinary_section.h"),
        ),
    ),
    Pkg(
        name="libcurand-13-0",
        version_of="nvidia-curand",
        section="libs",
        description="CURAND native runtime libraries",
        depends=("cuda-toolkit-13-0-config-common",),
        files=(("nvidia-curand", "lib/libcurand.so.10", f"{TGT}/lib/libcurand.so.{{libcurand-13-0:up}}"),),
        links=((f"{TGT}/lib/libcurand.so.10", "libcurand.so.{libcurand-13-0:up}"),),
    ),
    Pkg(
        name="libcurand-dev-13-0",
        version_of="nvidia-curand",
        section="libdevel",
        description="CURAND native dev links, headers",
        depends=("libcurand-13-0 (>= {libcurand-13-0:up})",),
        files=(("nvidia-curand", "include/", f"{TGT}/include/"),),
        links=((f"{TGT}/lib/libcurand.so", "libcurand.so.10"),),
    ),
    Pkg(
        name="libcublas-13-0",
        version_of="nvidia-cublas",
        section="libs",
        description="CUBLAS native runtime libraries",
        depends=("cuda-toolkit-13-0-config-common",),
        files=(
            ("nvidia-cublas", "lib/libcublas.so.13", f"{TGT}/lib/libcublas.so.{{libcublas-13-0:up}}"),
            ("nvidia-cublas", "lib/libcublasLt.so.13", f"{TGT}/lib/libcublasLt.so.{{libcublas-13-0:up}}"),
            ("nvidia-cublas", "lib/libnvblas.so.13", f"{TGT}/lib/libnvblas.so.{{libcublas-13-0:up}}"),
        ),
        links=(
            (f"{TGT}/lib/libcublas.so.13", "libcublas.so.{libcublas-13-0:up}"),
            (f"{TGT}/lib/libcublasLt.so.13", "libcublasLt.so.{libcublas-13-0:up}"),
            (f"{TGT}/lib/libnvblas.so.13", "libnvblas.so.{libcublas-13-0:up}"),
        ),
    ),
    Pkg(
        # FlashInfer's JIT includes cublasLt.h (norm, via trtllm/common/cudaUtils.h).
        name="libcublas-dev-13-0",
        version_of="nvidia-cublas",
        section="libdevel",
        description="CUBLAS native dev links, headers",
        depends=("libcublas-13-0 (>= {libcublas-13-0:up})",),
        files=(("nvidia-cublas", "include/", f"{TGT}/include/"),),
        links=(
            (f"{TGT}/lib/libcublas.so", "libcublas.so.13"),
            (f"{TGT}/lib/libcublasLt.so", "libcublasLt.so.13"),
            (f"{TGT}/lib/libnvblas.so", "libnvblas.so.13"),
        ),
    ),
    Pkg(
        name="cuda-keyring",
        version="1.1-1",
        arch="all",
        section="admin",
        description="GPG keyring for the CUDA repository (sandbox)\n"
                    "Installs the repository's signing key and its apt source, like\n"
                    "NVIDIA's cuda-keyring; the key is the sandbox repository's own.",
        generated=((KEYRING_PATH, "keyring"), (SOURCES_LIST_PATH, "sources-list")),
        conffiles=(f"/{SOURCES_LIST_PATH}",),
    ),
)


@dataclass
class Context:
    """Inputs a build needs besides the wheels."""
    lock: dict[str, LockedWheel]
    fingerprint: str = ""
    public_key: bytes = b""       # binary (gpg --export) key for the keyring package
    repo_url: str = ""            # what the keyring's sources.list points at
    versions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        for pkg in PACKAGES:
            self.versions[pkg.name] = pkg.version or f"{self.lock[pkg.version_of].version}-1"

    def fmt(self, text: str) -> str:
        """Replace {pkg} with its Debian version and {pkg:up} with the upstream part."""
        out = text
        for name, ver in self.versions.items():
            out = out.replace("{%s:up}" % name, ver.rsplit("-", 1)[0]).replace("{%s}" % name, ver)
        return out


def deb_filename(pkg: Pkg, ctx: Context) -> str:
    return f"{pkg.name}_{ctx.versions[pkg.name]}_{pkg.arch}.deb"


def check_layout(wheels: dict[str, Path], ctx: Context) -> None:
    """Every wheel file claimed once, no path shipped by two packages."""
    owners: dict[str, str] = {}
    claimed: dict[str, set[str]] = {}
    for pkg in PACKAGES:
        for dest in _dest_paths(pkg, wheels, ctx, claimed):
            if dest in owners:
                raise RuntimeError(f"{dest} is in both {owners[dest]} and {pkg.name}")
            owners[dest] = pkg.name
    for wname, path in wheels.items():
        with zipfile.ZipFile(path) as zf:
            members = {m.filename for m in zf.infolist() if _payload(m)}
        left = members - claimed.get(wname, set())
        if left:
            raise RuntimeError(f"{wname}: no package ships {sorted(left)[:10]}")


def _payload(member: zipfile.ZipInfo) -> bool:
    name = member.filename
    return (name.startswith(WHEEL_ROOT) and not member.is_dir()
            and not name.startswith(WHEEL_ROOT + ".metadata/"))


def _matches(members, src: str):
    """(member, suffix) pairs of the wheel members a mapping source covers."""
    full = WHEEL_ROOT + src
    for m in members:
        if src.endswith("/"):
            if m.filename.startswith(full) and not m.is_dir():
                yield m, m.filename[len(full):]
        elif m.filename == full:
            yield m, ""


def _dest_paths(pkg: Pkg, wheels, ctx, claimed) -> list[str]:
    out = []
    for wname, src, dest in pkg.files:
        with zipfile.ZipFile(wheels[wname]) as zf:
            hits = list(_matches(zf.infolist(), src))
        if not hits:
            raise RuntimeError(f"{pkg.name}: {wname} has nothing at {src}")
        for m, suffix in hits:
            claimed.setdefault(wname, set()).add(m.filename)
            out.append(ctx.fmt(dest) + suffix)
    out += [ctx.fmt(p) for p, _ in pkg.links]
    out += [p for p, _ in pkg.generated]
    return out


def package_digest(pkg: Pkg, ctx: Context, generator_inputs: dict[str, str]) -> str:
    """Hash of everything that shapes one .deb (to reuse an unchanged one)."""
    spec = {
        "pkg": repr(pkg),
        "version": ctx.versions[pkg.name],
        "wheels": {w: ctx.lock[w].sha256 for w in pkg.wheels()},
        "generated": {g: generator_inputs[g] for _, g in pkg.generated},
        "depends": [ctx.fmt(d) for d in pkg.depends],
        "compression": COMPRESSION,
        "builder": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def generator_inputs(ctx: Context) -> dict[str, str]:
    return {
        "libcuda-stub": hashlib.sha256(_LIBCUDA_STUB_C.encode()).hexdigest(),
        "keyring": hashlib.sha256(ctx.public_key).hexdigest(),
        "sources-list": _sources_list(ctx),
        "doc": hashlib.sha256(_DOC.encode()).hexdigest(),
    }


_DOC = """This package is part of the gpu-bringup sandbox's CUDA apt repository:
NVIDIA's CUDA 13.0 PyPI wheels repackaged under NVIDIA's apt package names.
It registers /usr/local/cuda-13.0 as the 'cuda' and 'cuda-13' alternatives.
"""


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


def _generate(kind: str, dest: Path, ctx: Context, workdir: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if kind == "libcuda-stub":
        src = workdir / "libcuda-stub.c"
        src.write_text(_LIBCUDA_STUB_C)
        subprocess.run(["gcc", "-shared", "-fPIC", "-nostdlib", "-O2", "-Wl,-soname,libcuda.so.1",
                        "-Wl,--build-id=none", "-o", str(dest), str(src)], check=True)
        os.chmod(dest, 0o755)
    elif kind == "keyring":
        dest.write_bytes(ctx.public_key)
        os.chmod(dest, 0o644)
    elif kind == "doc":
        dest.write_text(_DOC)
        os.chmod(dest, 0o644)
    elif kind == "sources-list":
        dest.write_text(_sources_list(ctx))
        os.chmod(dest, 0o644)
    else:
        raise ValueError(kind)


def build_deb(pkg: Pkg, ctx: Context, wheels: dict[str, Path], out_dir: Path, workdir: Path) -> Path:
    """Stage *pkg* from the wheels and run dpkg-deb; returns the .deb path."""
    stage = workdir / pkg.name
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    for wname, src, dest in pkg.files:
        with zipfile.ZipFile(wheels[wname]) as zf:
            for m, suffix in _matches(zf.infolist(), src):
                target = stage / (ctx.fmt(dest) + suffix)
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(m) as fin, open(target, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
                executable = (m.external_attr >> 16) & 0o111
                os.chmod(target, 0o755 if executable else 0o644)
                mtime = calendar.timegm(m.date_time + (0, 0, 0))
                os.utime(target, (mtime, mtime))
    for path, target in pkg.links:
        link = stage / ctx.fmt(path)
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(ctx.fmt(target), link)
    for d in pkg.dirs:
        (stage / d).mkdir(parents=True, exist_ok=True)
    for path, kind in pkg.generated:
        _generate(kind, stage / path, ctx, workdir)
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
    long_lines.append(_provenance(pkg, ctx))
    fields = [
        ("Package", pkg.name),
        ("Version", ctx.versions[pkg.name]),
        ("Architecture", pkg.arch),
        ("Maintainer", MAINTAINER),
        ("Installed-Size", str(installed_kib)),
    ]
    if pkg.depends:
        fields.append(("Depends", ", ".join(ctx.fmt(d) for d in pkg.depends)))
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

    out = out_dir / deb_filename(pkg, ctx)
    comp, level = COMPRESSION
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(EPOCH))
    proc = subprocess.run(
        ["dpkg-deb", "--root-owner-group", f"-Z{comp}", f"-z{level}", "--build", str(stage), str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"dpkg-deb failed for {pkg.name}:\n{proc.stdout}")
    shutil.rmtree(stage)
    return out


def _provenance(pkg: Pkg, ctx: Context) -> str:
    wheels = [f"{w}=={ctx.lock[w].version}" for w in sorted({w for w, _, _ in pkg.files})]
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
