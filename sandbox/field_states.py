"""Field states: what real GPU nodes already carry when the bring-up meets them.

    python -m sandbox up gpu1 --addr 127.0.5.11 --gpu rtx-pro-6000-x8 --state incident,operator

Each state is a small shell script, ``sandbox/states/<name>.sh`` (``<name>.<os>.sh`` or
``<name>.ubuntu.sh`` where a distribution needs other steps: script_path), run once per
machine as a cached layer (sandbox.layers); a node with states mounts their
layers under its own overlay. States may imply others (``cuda-12.8`` needs
``nvidia-repo``) and ``incident`` is only the sum of three. A node's states are
expanded and put in one canonical order, so ``incident,operator`` and
``operator,incident`` are the same chain and share every layer.

| state | what the node then has |
| --- | --- |
| handbuilt-venv | /opt/venv_sglang211: python3 -m venv + pip, torch 2.14.1 and FlashInfer 0.7.0 |
| venv-built | a deploy stopped between its venv's build and its switch: the same lock's venv built by the product's ``files/build-venv.sh`` at /opt/sglang/venvs/<digest>, complete, no /opt/sglang/venv link (a deploy of that lock switches it in) |
| distro-cuda | the distribution's own ``nvidia-cuda-toolkit`` (Debian's non-free, Ubuntu's multiverse), nvcc at /usr/bin/nvcc |
| nvidia-repo | NVIDIA's ``cuda-keyring`` from the sandbox's apt repository, installed as NVIDIA's guide says |
| cuda-12.8 | CUDA 12.8 by apt from that repository, first on a login shell's PATH (implies nvidia-repo) |
| operator | /etc/sglang/sglang.env with operator variables, Ubuntu's /etc/environment, an old venv directory at /opt/sglang/venv |
| incident | nvidia-repo + cuda-12.8 + handbuilt-venv: the seeds' node |
| operator-python | (Ubuntu 22.04) the operator's CPython 3.11.2 at /opt/cpython-3.11, root's: built from Debian's signed source package (sandbox/operator_python.py), what ``venv_python`` names; not a stand-in |
| iproute2 | the distribution's ``iproute2`` (``ip``), as a server image has it: the serving groups' route probe needs it, and a bridged node (sandbox.network) shows its own eth0 and routes with it |

The driver states are stand-ins for the GPU driver only, like the GPU
profiles (sandbox/gpu_standin.py): files under /var/lib/sandbox-gpu that node-init.sh
and the nvidia-smi stand-in read, and packages built on the node with dpkg-deb under
NVIDIA's names (sandbox/files/standin-deb.sh) or the sandbox apt repository's stand-in
driver packages (sandbox/aptrepo/driver_debs.py), each saying it is a stand-in. They are
meant for a profile with a driver (not ``none`` or ``driver-failed``):

| state | what the node then has | finding |
| --- | --- | --- |
| proprietary-module | the proprietary module's banner in /proc/driver/nvidia/version (a Blackwell profile) | DRIVER_OPEN_MODULE_REQUIRED |
| library-mismatch | libnvidia-compute-580 580.105.08 (held, with libnvidia-ml.so.580.105.08), the module at the profile's version | DRIVER_LIBRARY_MISMATCH |
| ubuntu-drivers | (Ubuntu only) Canonical's 580-server-open driver as `ubuntu-drivers install --gpgpu` leaves it on a generic kernel: nvidia-headless-no-dkms-580-server-open, libnvidia-compute-580-server, nvidia-utils-580-server, nvidia-compute-utils-580-server, nvidia-kernel-common-580-server at 580.95.05-0ubuntu0.<release>.2 and linux-modules-nvidia-580-server-open-generic / -<kernel release> (empty stand-ins, not held) | DRIVER_CANONICAL |
| ubuntu-drivers-dkms | (Ubuntu only) Canonical's 580-server-open driver built by DKMS, as `ubuntu-drivers install --gpgpu` leaves it on a kernel flavour without prebuilt modules: nvidia-driver-580-server-open, nvidia-dkms-580-server-open (Ubuntu's real dkms builds its stand-in module, loaded at boot), libnvidia-compute-580-server (libnvidia-ml.so.580.95.05), nvidia-compute-utils-580-server (nvidia-persistenced), nvidia-utils-580-server, nvidia-kernel-common-580-server, nvidia-kernel-source-580-server-open at 580.95.05-0ubuntu0.<release>.1 (stand-ins with their Depends, not held; sandbox/files/canonical-dkms.sh) | DRIVER_CANONICAL (adopted with driver_manage) |
| ubuntu-drivers-dkms-older | the same at 580.82.07-0ubuntu0.<release>.1, its module 580.82.07 loaded | DRIVER_CANONICAL (replaced with driver_manage, then a reboot) |
| nvswitch-no-fm | 4 NVSwitches in /proc/driver/nvidia-nvswitch/devices, no Fabric Manager; fabric In Progress | FABRIC_MANAGER_MISSING |
| nvswitch-fm-inactive | nvswitch-no-fm + nvidia-fabricmanager 580.95.05 by apt (held), its unit not started | FABRIC_MANAGER_INACTIVE |
| nvswitch-fm-other-version | nvswitch-no-fm + nvidia-fabricmanager 580.105.08 by apt (held), its unit enabled and failing | FABRIC_MANAGER_VERSION |
| nouveau-loaded | /sys/module/nouveau | NOUVEAU_LOADED |
| mig-on | MIG enabled on GPU 0 in nvidia-smi -q | MIG_ENABLED |
| kernel-log | systemd-journal-remote by apt (its units masked): `python -m sandbox health NAME STATE` writes a health state's NVRM Xid lines into the journal with it (sandbox/gpu_health_states.py) | (the health state's GPU_XID) |
| acs-redirect | pciutils by apt; ACSCtl ReqRedir+ CmpltRedir+ in the PCI config space of the root ports above the GPUs (a PCIe profile) | P2P_ACS_REDIRECT |
| no-driver | the GPUs' recordings only: no nvidia-smi, libcuda, module or nouveau blacklist (no layer) | DRIVER_NOT_LOADED |

``no-driver`` is the node a vendor ships without a driver: the sandbox apt repository's
stand-in driver packages (sandbox/aptrepo/driver_debs.py) install one, and its module
is loaded at the next boot (``python -m sandbox reboot NAME``, sandbox/files/node-init.sh).

``first-boot-upgrades``: a cloud image's first boot, unattended-upgrades
holding apt's and dpkg's locks for 90 s from boot (a stand-in process,
sandbox/files/unattended-upgrade-standin, taking them as apt does); the deploy's
``apt_unlocked`` waits for it (``deploy_apt_lock_timeout``).

``cloud-login``: a cloud image's login user (``ubuntu``, ``admin`` on Debian; uid 1000)
with passwordless sudo as cloud-init writes it, and sudo hardened as CIS benchmarks have
it (use_pty, env_reset, secure_path, a log file, umask 0077 for what runs through sudo).
The node's start gives the user the sandbox's SSH key; the registered host list reaches
the node as that user with ``_sudo`` (sandbox/registration.py), so pyinfra and the node
suite go through sudo, while the tests' own SSH stays root's.

The two Fabric Manager states are alternatives (composed, the upper layer's package is the
node's); 580.95.05 is the h100-x8 profile's driver, the HGX profile to put them on.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from sandbox import aptrepo, image, layers, operator_python, pypimirror

SCRIPTS = Path(__file__).resolve().parent / "states"
FILES = Path(__file__).resolve().parent / "files"
HELPERS = Path(__file__).resolve().parents[1] / "files"
LOCKS = Path(__file__).resolve().parent / "locks"


@dataclass(frozen=True)
class State:
    """A field state: the states it implies, and what its script needs."""

    name: str
    implies: tuple[str, ...] = ()
    # "apt-repo": the sandbox's CUDA apt repository (CUDA_REPO); "mirror": the
    # wheel mirror (FIND_LINKS) and the lock <lock>-cpXY-ARCH.txt as lock.txt;
    # "cpython": the operator's CPython build (sandbox.operator_python) as cpython.tar;
    # "kernel": the host's running kernel release (in the key only: the script reads uname -r).
    needs: tuple[str, ...] = ()
    lock: str = ""
    has_script: bool = True
    # Files of sandbox/files/ the script sources, copied beside it (and in its layer's key).
    files: tuple[str, ...] = ()
    # The product's own helpers (files/) the script runs, copied beside it the same way.
    helpers: tuple[str, ...] = ()
    # Other states whose layers hold the same large files (a venv of the same lock elsewhere).
    shares_with: tuple[str, ...] = ()


# Canonical order of the layers (this dict's): the costly layers that depend on
# nothing else lowest, so that they are shared by the most chains. The venv
# (minutes, about 5 GB) sits right on the base image: every chain holding it
# reuses the one layer, and a rebuilt apt repository rebuilds only the small
# apt layers above it. What operators do by hand comes last.
STATES = {
    "handbuilt-venv": State("handbuilt-venv", needs=("mirror",), lock="handbuilt-venv", shares_with=("venv-built",)),
    # The same lock's venv built by the product's build-venv.sh, never switched in: its CUDA
    # libraries are the hand-built venv's, hard links where both layers are cached.
    "venv-built": State("venv-built", needs=("mirror",), lock="handbuilt-venv",
                        helpers=("build-venv.sh", "root-may-run.sh", "torch_info.py"), shares_with=("handbuilt-venv",)),
    "distro-cuda": State("distro-cuda"),
    "nvidia-repo": State("nvidia-repo", needs=("apt-repo",)),
    "cuda-12.8": State("cuda-12.8", implies=("nvidia-repo",), needs=("apt-repo",)),
    "operator": State("operator", needs=("mirror",), lock="operator-venv"),
    "operator-python": State("operator-python", needs=("cpython",)),
    "incident": State("incident", implies=("nvidia-repo", "cuda-12.8", "handbuilt-venv"), has_script=False),
    # The driver's stand-ins: seconds each, on top of everything else.
    "proprietary-module": State("proprietary-module"),
    "library-mismatch": State("library-mismatch", files=("standin-deb.sh",)),
    "nvswitch-no-fm": State("nvswitch-no-fm"),
    # Canonical's driver (ubuntu-drivers install --gpgpu): stand-in packages under its names (Ubuntu only).
    "ubuntu-drivers": State("ubuntu-drivers", files=("standin-deb.sh",), needs=("kernel",)),
    # Canonical's DKMS-built driver (a kernel flavour without prebuilt modules): Ubuntu's dkms
    # from the archive builds the stand-in module; at the lock's version (adopted) or older (replaced).
    "ubuntu-drivers-dkms": State("ubuntu-drivers-dkms", files=("standin-deb.sh", "canonical-dkms.sh"),
                                 needs=("kernel",)),
    "ubuntu-drivers-dkms-older": State("ubuntu-drivers-dkms-older", files=("standin-deb.sh", "canonical-dkms.sh"),
                                       needs=("kernel",)),
    # Fabric Manager from the apt repository's stand-in packages (sandbox/aptrepo/driver_debs.py).
    "nvswitch-fm-inactive": State("nvswitch-fm-inactive", implies=("nvswitch-no-fm", "nvidia-repo"),
                                  needs=("apt-repo",)),
    "nvswitch-fm-other-version": State("nvswitch-fm-other-version", implies=("nvswitch-no-fm", "nvidia-repo"),
                                       needs=("apt-repo",)),
    "nouveau-loaded": State("nouveau-loaded"),
    "mig-on": State("mig-on"),
    # pciutils from the distribution's archive (as distro-cuda's toolkit is).
    "acs-redirect": State("acs-redirect"),
    # systemd-journal-remote from the distribution's archive: the GPU health states' Xid
    # lines reach the journal through it (sandbox/gpu_health_states.py).
    "kernel-log": State("kernel-log"),
    # iproute2 from the distribution's archive (the minbase image has no `ip`).
    "iproute2": State("iproute2"),
    # Nothing to build: the node's own files leave the driver out (sandbox/node.py).
    "no-driver": State("no-driver", has_script=False),
    # Ubuntu's cloud images: unattended-upgrades at first boot (a stand-in).
    "first-boot-upgrades": State("first-boot-upgrades", files=("unattended-upgrade-standin",)),
    # Cloud images' login user with passwordless, CIS-hardened sudo (not a stand-in).
    "cloud-login": State("cloud-login"),
}

ORDER = [name for name, state in STATES.items() if state.has_script]


def parse(text: str) -> list[str]:
    """State names from ``--state a,b`` (blanks and repeats dropped); ValueError on an unknown one.

    >>> parse("operator, incident,operator")
    ['operator', 'incident']
    >>> parse("")
    []
    """
    names = []
    for name in (part.strip() for part in text.split(",")):
        if not name or name in names:
            continue
        if name not in STATES:
            raise ValueError(f"unknown state {name!r}; known: {', '.join(STATES)}")
        names.append(name)
    return names


def expand(names: list[str]) -> list[str]:
    """The states with a script that *names* stand for, implied ones included, in ORDER.

    >>> expand(["incident", "operator"]) == expand(["operator", "incident"])
    True
    >>> expand(["operator", "incident"])
    ['handbuilt-venv', 'nvidia-repo', 'cuda-12.8', 'operator']
    """
    wanted: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(STATES[name].implies)
    return [name for name in ORDER if name in wanted]


def canonical(names: list[str]) -> list[str]:
    """The states as a node records them: as named, each once, in the order of their layers.

    >>> canonical(["operator", "incident"])
    ['incident', 'operator']
    """
    first = {name: min((ORDER.index(s) for s in expand([name])), default=len(ORDER)) for name in names}
    return sorted(dict.fromkeys(names), key=lambda name: (first[name], name))


def lock_for(state: State, os_name: str, machine: str | None = None) -> Path:
    """The lock of *state* for the CPython of *os_name* and the CPU *machine* (default: this
    machine's, which builds the layers): sandbox/locks/<lock>-cpXY-ARCH.txt.

    >>> lock_for(STATES["operator"], "debian13", "x86_64").name
    'operator-venv-cp313-x86_64.txt'
    """
    python = image.os_spec(os_name).python.replace(".", "")
    return LOCKS / f"{state.lock}-cp{python}-{machine or os.uname().machine}.txt"


def steps(os_name: str, names: list[str]) -> list[layers.Step]:
    """The layer steps of a node's states on *os_name*, bottom first."""
    chain = [STATES[name] for name in expand(names)]
    # One look at the apt repository for the whole chain (it is served, and
    # possibly rebuilt, by that look).
    repo = _apt_repo(os_name) if any("apt-repo" in state.needs for state in chain) else None
    return [_step(state, os_name, repo) for state in chain]


def ensure_layers(os_name: str, names: list[str], log=sys.stderr) -> list[layers.Layer]:
    """Build (once per machine) and return the layers of *names* on *os_name*, bottom first."""
    return layers.ensure_chain(os_name, steps(os_name, names), log)


def is_current(info: dict) -> bool:
    """Whether a cached layer (its layer.json) is what its state makes today on its parent."""
    state, os_name = STATES.get(info.get("state")), info.get("os")
    if state is None or not state.has_script or os_name not in image.OSES:
        return False
    if info.get("base") != image.image_dir(os_name).name:
        return False
    # The repository as built, not served: a look must not start a server (on
    # another port, which would rebuild the keyring and stale every apt layer).
    repo = {"digest": aptrepo.built_digest(os_name), "repo_url": ""} if "apt-repo" in state.needs else None
    if repo and repo["digest"] is None:
        return True  # nothing to compare with: keep it
    try:
        step = _step(state, os_name, repo)
    except ValueError:  # its lock is gone
        return False
    return layers.layer_key(info["base"], info.get("parent"), step) == info["key"]


def prune(log=sys.stderr) -> list[str]:
    """Delete the cached layers this checkout's states no longer make (layers.prune)."""
    return layers.prune(is_current, log)


def _step(state: State, os_name: str, repo: dict | None) -> layers.Step:
    """A state's script with its inputs (digests, for the key) and environment (when built)."""
    inputs, files = {}, {}
    if "apt-repo" in state.needs:
        inputs["apt_repo"] = repo["digest"]
    if "mirror" in state.needs:
        lock = lock_for(state, os_name)
        if not lock.is_file():
            raise ValueError(f"state {state.name} has no lock for {os_name}: {lock} is missing")
        inputs["lock"] = hashlib.sha256(lock.read_bytes()).hexdigest()
        files["lock.txt"] = lock
    for name, where in [*((name, FILES) for name in state.files), *((name, HELPERS) for name in state.helpers)]:
        files[name] = where / name
        inputs[name] = hashlib.sha256(files[name].read_bytes()).hexdigest()
    if "kernel" in state.needs:
        # Its script builds for the running kernel (``uname -r``: module paths, headers): a
        # host kernel update makes it again.
        inputs["kernel"] = os.uname().release
    if "cpython" in state.needs:
        # Keyed by what makes the build; built (once per machine) only when the layer is.
        inputs["cpython"] = operator_python.artifact_key(os_name)
        files["cpython.tar"] = operator_python.artifact_dir(os_name) / "cpython.tar"

    def prepare() -> dict:
        env = {}
        if "cpython" in state.needs:
            operator_python.tarball(os_name)
        if "apt-repo" in state.needs:
            env["CUDA_REPO"] = repo["repo_url"]
        if "mirror" in state.needs:
            env["FIND_LINKS"] = pypimirror.serve([files["lock.txt"]])["url"]
        return env

    script = script_path(state.name, os_name).read_text()
    return layers.Step(state.name, script, inputs=inputs, prepare=prepare, files=files,
                       shares_with=state.shares_with)


def script_path(name: str, os_name: str, scripts: Path = SCRIPTS) -> Path:
    """The script of state *name* on *os_name*: ``<name>.<os>.sh``, else ``<name>.<vendor>.sh``
    (``ubuntu``), else ``<name>.sh``. A distribution that needs other steps gets a script of
    its own, and the other distributions' layers keep their keys.

    >>> script_path("handbuilt-venv", "ubuntu2204").name, script_path("handbuilt-venv", "debian12").name
    ('handbuilt-venv.ubuntu2204.sh', 'handbuilt-venv.sh')
    >>> script_path("distro-cuda", "ubuntu2404").name
    'distro-cuda.ubuntu.sh'
    """
    for candidate in (f"{name}.{os_name}.sh", f"{name}.{image.os_spec(os_name).vendor}.sh"):
        if (scripts / candidate).is_file():
            return scripts / candidate
    return scripts / f"{name}.sh"


def _apt_repo(os_name: str) -> dict:
    """The served sandbox apt repository of *os_name*'s distro: ``repo_url`` and manifest ``digest``.

    Served first (built if needed): the cuda-keyring package names the URL being
    served, so the layer is keyed by what the node will reach.
    """
    return aptrepo.distro_repo(os_name, aptrepo.ensure_served(log=sys.stderr, dirs=[(os_name, "x86_64")]))
