"""SANDBOX STAND-IN packages of NVIDIA's DCGM 4, in the sandbox apt repository.

NVIDIA publishes DCGM in the CUDA repository the repo step configures; its installation
guide (docs.nvidia.com/datacenter/dcgm/latest/installation.html, "Install DCGM") installs
``datacenter-gpu-manager-4-cuda<major>`` for the CUDA major of the driver and starts the
host engine with ``systemctl --now enable nvidia-dcgm``. DCGM 4 is split
(``datacenter-gpu-manager-4-core``: the host engine ``nv-hostengine``, ``dcgmi`` and the
``nvidia-dcgm`` unit; ``datacenter-gpu-manager-4-cuda13``: the diagnostic's CUDA 13
plugins, depending on the core at its version). NVIDIA's Debian versions carry the epoch
``1`` (``1:4.4.1-1``, as public Dockerfiles pin ``datacenter-gpu-manager-4-core=1:4.4.0-1``),
and so do these stand-ins (the pool's file names leave the epoch out, as Debian's do:
sandbox/aptrepo/debs.py deb_filename), so a lock made here has NVIDIA's form. Two versions are served: 4.4.1 (the one the
sandbox's locks take) and 4.4.2 (newer: what an unpinned install would take).

Their contents are stand-ins, and each package's description says so: the core ships
sandbox/files/dcgmi (answering ``diag -r 1|2 -j`` with the public samples of
tests/fixtures/dcgm/, passing while the host engine runs and no health state chose an
answer), a stand-in ``nv-hostengine`` and the ``nvidia-dcgm`` unit running it; the cuda13
package ships a marker where the plugins would be.

    >>> sorted((p.name, p.version) for p in packages("x86_64"))[:2]
    [('datacenter-gpu-manager-4-core', '1:4.4.1-1'), ('datacenter-gpu-manager-4-core', '1:4.4.2-1')]
    >>> [p.depends for p in packages("x86_64") if p.name.endswith("cuda13")][0]
    ('datacenter-gpu-manager-4-core (= 1:4.4.1-1)',)
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from sandbox import cpus
from sandbox.aptrepo.driver_debs import DriverPkg

FILES = Path(__file__).resolve().parent / "dcgm"
SANDBOX_FILES = Path(__file__).resolve().parents[1] / "files"
SAMPLES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "dcgm"
# The answers the dcgmi stand-in reads (sandbox/gpu_health_states.py DCGM_SAMPLES's).
ANSWERS = {"pass": "diag-r1-pass.json", "fail": "diag-r2-fail.json"}
VERSIONS = ("4.4.1", "4.4.2")
REVISION, EPOCH = "1", "1"
CORE, CUDA13 = "datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda13"
STANDIN = ("SANDBOX STAND-IN for NVIDIA's {name}: built by the gpu-bringup sandbox\n"
           "(sandbox/aptrepo/dcgm_debs.py) under NVIDIA's name and dependencies; its\n"
           "files are stand-ins, not NVIDIA's DCGM.")
# This file's digest and its stand-in files': a changed one makes new packages.
BUILDER = hashlib.sha256(b"".join(p.read_bytes() for p in (Path(__file__), *sorted(FILES.iterdir()),
                                                                SANDBOX_FILES / "dcgmi"))).hexdigest()


def version_packages(version: str, machine: str) -> list[DriverPkg]:
    """DCGM's two stand-in packages at upstream *version* for *machine*'s CPU."""
    arch, deb = cpus.dpkg_arch(machine), f"{EPOCH}:{version}-{REVISION}"
    core = DriverPkg(
        name=CORE, version=deb, arch=arch, section="multiverse/utils", builder=BUILDER,
        description="NVIDIA Datacenter GPU Manager, core (SANDBOX STAND-IN)\n" + STANDIN.format(name=CORE),
        texts=(("usr/bin/dcgmi", (SANDBOX_FILES / "dcgmi").read_text(), 0o755),
               ("usr/bin/nv-hostengine", (FILES / "nv-hostengine").read_text().replace("@VERSION@", version), 0o755),
               ("lib/systemd/system/nvidia-dcgm.service", (FILES / "nvidia-dcgm.service").read_text(), 0o644),
               *((f"usr/share/sandbox-gpu/dcgm/{answer}.json", (SAMPLES / sample).read_text(), 0o644)
                 for answer, sample in ANSWERS.items())))
    cuda13 = DriverPkg(
        name=CUDA13, version=deb, arch=arch, section="multiverse/utils", builder=BUILDER,
        description="NVIDIA Datacenter GPU Manager, CUDA 13 diagnostics (SANDBOX STAND-IN)\n"
                    + STANDIN.format(name=CUDA13),
        depends=(f"{CORE} (= {deb})",),
        texts=(("usr/share/datacenter-gpu-manager-4/cuda13/SANDBOX-STAND-IN",
                "SANDBOX STAND-IN: no diagnostic plugin here (sandbox/aptrepo/dcgm_debs.py).\n", 0o644),))
    return [core, cuda13]


def packages(machine: str = "x86_64") -> list[DriverPkg]:
    """Every stand-in DCGM package of one repository directory (*machine*'s CPU)."""
    return [pkg for version in VERSIONS for pkg in version_packages(version, machine)]
