"""The one table of GPU architectures: per compute capability (SM), what every decision
about a GPU reads: its products and their PCI ids, whether NVIDIA's open kernel modules
drive it or are the only ones that do, the first (and last) CUDA whose nvcc targets it,
FlashInfer's target suffix and the CUDA arch flag. ``bringup/cuda.py`` (toolkit floors),
``bringup/flashinfer.py`` (targets), ``bringup/gpu_ids.py`` (the PCI bus) and the driver
plan (``bringup/plan/driver.py``, ``driver_step.py``, ``gpus.py``) derive their views from
it; adding a GPU is one row here plus its tests (docs/contributing.md, "A new GPU").

Sources, read for this table (each row names the ones it rests on):

- CUDA_GPUS: NVIDIA's "CUDA GPU Compute Capability", https://developer.nvidia.com/cuda-gpus
  ("12.1 | NVIDIA GB10 (DGX Spark)", "12.0 | NVIDIA RTX PRO 6000 Blackwell Server
  Edition ... GeForce RTX 5090", "10.3 | NVIDIA GB300 NVIDIA B300", "10.0 | NVIDIA GB200
  NVIDIA B200", "9.0 | NVIDIA GH200 NVIDIA H200 NVIDIA H100", "8.9 | NVIDIA L4 NVIDIA L40
  NVIDIA L40S", "NVIDIA A100 | 8.0").
- CUDA_NOTES: CUDA Toolkit release notes 10.0 .. 13.0, "Supported architectures",
  https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (sm_90 in 11.8;
  sm_100, sm_101, sm_120 in 12.8; sm_103, sm_121 and the ``f`` family targets in 12.9;
  sm_101 renamed sm_110 in 13.0).
- OPEN_MODULES: NVIDIA's open GPU kernel modules, README.md "Compatible GPUs",
  https://github.com/NVIDIA/open-gpu-kernel-modules (release 595.45.04: "The NVIDIA open
  kernel modules can be used on any Turing or later GPU"; its rows give the PCI ids and the
  names nvidia-smi prints, each checked against pci.ids, https://github.com/pciutils/pciids),
  and NVIDIA's blog "NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules",
  https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/
  ("For cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use
  the open-source GPU kernel modules").
- FLASHINFER: FlashInfer's ``CompilationContext._normalize_cuda_arch``,
  https://github.com/flashinfer-ai/flashinfer/blob/main/flashinfer/compilation_context.py
  ("SM 9.x -> 'a' suffix", "SM 12.x -> 'f' suffix ... compute_120f for SM120,
  compute_121a for SM121 ... Requires CUDA >= 12.9", "SM 10+ -> 'a' suffix",
  "SM < 9 -> no suffix"; read in the 0.7.0 .. 0.7.4 wheels).
- NVLINK5: NVLink5 behind NVSwitches needs NVLSM beside Fabric Manager
  (https://github.com/siderolabs/extensions/issues/717,
  https://github.com/NVIDIA/gpu-operator/issues/2781; Fabric Manager user guide,
  fourth-generation NVSwitches): the SM 10.x data-centre parts.
- IMEX: NVIDIA IMEX Service for NVLink Networks user's guide,
  https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/ ("Overview", "IMEX
  Channels"): the Grace-Blackwell compute trays of an NVL rack (GB200, GB300: four GPUs a
  tray, NVLink to the other trays through NVLink switch trays, none on the tray itself)
  share memory across the NVLink domain through the nvidia-imex service and its channels;
  Fabric Manager runs on the switch trays, not on them (NVIDIA's GPU driver container
  installs ``nvidia-imex`` on them, github.com/NVIDIA/gpu-driver-container ``imex_install``;
  leptonai/gpud#1106: "GB200 to skip fabric-manager activeness in favor of fabric state").

A GPU the table does not know stays unknown by its PCI id; an SM it does not know takes
the open-module and NVLink answers of its major (the architecture generation) and
FlashInfer's suffix of the nearest known SM below it, as FlashInfer's rule is by major.
"""

from dataclasses import dataclass

from packaging.version import Version

# The open-module column: NVIDIA's open kernel modules do not drive the GPU (before
# Turing), drive it, or are the only modules that do (a proprietary module on it leaves
# "No devices were found").
OPEN_UNSUPPORTED, OPEN_SUPPORTED, OPEN_REQUIRED = "unsupported", "supported", "required"


@dataclass(frozen=True)
class Product:
    pci_id: str   # PCI device id, lower-case hex (vendor 10de); a subsystem id makes no difference
    name: str     # the product name, as nvidia-smi prints it


@dataclass(frozen=True)
class Architecture:
    sm: Version                 # compute capability
    family: str                 # NVIDIA's architecture name
    first_cuda: Version         # first CUDA whose nvcc targets it
    last_cuda: Version | None   # last CUDA that still targets it (None: every later one)
    open_modules: str           # OPEN_UNSUPPORTED, OPEN_SUPPORTED or OPEN_REQUIRED
    flashinfer_suffix: str      # FlashInfer's target suffix with nvcc >= 12.9: "", "a" or "f"
    cuda_arch: str              # the CUDA arch flag (nvcc -arch, torch's get_arch_list)
    nvlink5: bool               # NVLink5 parts behind NVSwitches need NVLSM
    products: tuple             # Products with this SM this project knows by PCI id
    sources: str                # the sources above this row rests on


def _row(sm, family, first_cuda, open_modules, suffix, products=(), last_cuda=None, nvlink5=False,
         sources="CUDA_GPUS, CUDA_NOTES, OPEN_MODULES, FLASHINFER"):
    sm = Version(sm)
    return Architecture(sm, family, Version(first_cuda), last_cuda and Version(last_cuda), open_modules, suffix,
                        f"sm_{sm.major}{sm.minor}", nvlink5,
                        tuple(Product(pci_id, name) for pci_id, name in products), sources)


ARCHITECTURES = (
    _row("7.5", "Turing", "10.0", OPEN_SUPPORTED, ""),
    _row("8.0", "Ampere", "11.0", OPEN_SUPPORTED, "", (
        ("20b0", "NVIDIA A100-SXM4-40GB"),
        ("20b2", "NVIDIA A100-SXM4-80GB"),
        ("20b3", "NVIDIA A100-SXM-64GB"),
        ("20b5", "NVIDIA A100 80GB PCIe"),
        ("20f1", "NVIDIA A100-PCIE-40GB"))),
    _row("8.6", "Ampere", "11.1", OPEN_SUPPORTED, ""),
    _row("8.7", "Ampere", "11.4", OPEN_SUPPORTED, ""),
    _row("8.9", "Ada Lovelace", "11.8", OPEN_SUPPORTED, "", (
        ("26b9", "NVIDIA L40S"),
        ("27b8", "NVIDIA L4"))),
    _row("9.0", "Hopper", "11.8", OPEN_SUPPORTED, "a", (
        ("2330", "NVIDIA H100 80GB HBM3"),
        ("2339", "NVIDIA H100"),
        ("2331", "NVIDIA H100 PCIe"),
        ("2321", "NVIDIA H100 NVL"),
        ("2335", "NVIDIA H200"),
        ("233b", "NVIDIA H200 NVL"),
        # GH200's 120GB and 480GB share 2342: named as pci.ids names the device.
        ("2342", "NVIDIA GH200 120GB / 480GB"),
        ("2348", "NVIDIA GH200 144G HBM3e"))),
    _row("10.0", "Blackwell", "12.8", OPEN_REQUIRED, "a", (
        ("2901", "NVIDIA B200"),
        ("2941", "NVIDIA GB200")), nvlink5=True,
        sources="CUDA_GPUS, CUDA_NOTES, OPEN_MODULES, FLASHINFER, NVLINK5, IMEX"),
    # sm_101 (Jetson Thor before CUDA 13.0 renamed it sm_110).
    _row("10.1", "Blackwell", "12.8", OPEN_REQUIRED, "a", last_cuda="12.9"),
    _row("10.3", "Blackwell Ultra", "12.9", OPEN_REQUIRED, "a", (
        ("3182", "NVIDIA B300 SXM6 AC"),
        ("31c2", "NVIDIA GB300")), nvlink5=True,
        sources="CUDA_GPUS, CUDA_NOTES, OPEN_MODULES, FLASHINFER, NVLINK5, IMEX"),
    # Jetson Thor: L4T's own driver, not the data-centre open/proprietary choice.
    _row("11.0", "Blackwell (Jetson Thor)", "13.0", OPEN_SUPPORTED, "a", sources="CUDA_GPUS, CUDA_NOTES, FLASHINFER"),
    _row("12.0", "Blackwell", "12.8", OPEN_REQUIRED, "f", (
        ("2bb5", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
        ("2bb1", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
        ("2bb4", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"),
        ("2b85", "NVIDIA GeForce RTX 5090"))),
    _row("12.1", "Blackwell (DGX Spark)", "12.9", OPEN_REQUIRED, "a", (
        ("2e12", "NVIDIA GB10"),)),
)

# Views every decision reads (derived, never written by hand).
BY_SM = {arch.sm: arch for arch in ARCHITECTURES}
# Majors whose GPUs run on the open kernel modules only (Blackwell's 10.x and 12.x).
OPEN_ONLY_MAJORS = frozenset(arch.sm.major for arch in ARCHITECTURES if arch.open_modules == OPEN_REQUIRED)
# The oldest SM the open kernel modules drive (Turing): older GPUs need the proprietary ones.
FIRST_OPEN_MODULE_SM = min(arch.sm for arch in ARCHITECTURES if arch.open_modules != OPEN_UNSUPPORTED)
# Majors whose NVSwitch systems are NVLink5 (NVLSM beside Fabric Manager).
NVLINK5_MAJORS = frozenset(arch.sm.major for arch in ARCHITECTURES if arch.nvlink5)
# The products whose NVLink reaches other trays through NVLink switch trays: the node runs
# nvidia-imex (with its channels), not Fabric Manager (IMEX above). By PCI id and by the
# name nvidia-smi prints.
IMEX_PCI_IDS = frozenset({"2941", "31c2"})
IMEX_NAMES = frozenset(product.name for arch in ARCHITECTURES for product in arch.products
                       if product.pci_id in IMEX_PCI_IDS)
# Majors for which FlashInfer builds a family (``f``) target and checks nvcc's release first.
FAMILY_TARGET_MAJORS = frozenset(arch.sm.major for arch in ARCHITECTURES if arch.flashinfer_suffix == "f")


def architecture(sm):
    """The table's row of ``sm`` (a Version), or None for an SM it does not know.

    >>> architecture(Version("12.0")).cuda_arch, architecture(Version("6.1")) is None
    ('sm_120', True)
    """
    return BY_SM.get(sm)


def flashinfer_suffix(sm):
    """FlashInfer's target suffix for ``sm`` (with nvcc >= 12.9): the row's, else that of the
    nearest known SM below it (FlashInfer's rule goes by major), else none.

    >>> flashinfer_suffix(Version("12.0")), flashinfer_suffix(Version("13.0")), flashinfer_suffix(Version("8.6"))
    ('f', 'a', '')
    """
    below = [arch for arch in ARCHITECTURES if arch.sm <= sm]
    return max(below, key=lambda arch: arch.sm).flashinfer_suffix if below else ""


def needs_imex(name="", pci_id=""):
    """Whether a GPU (its nvidia-smi name or its PCI device id) is a Grace-Blackwell NVL
    compute-tray part that needs IMEX (IMEX above).

    >>> needs_imex(name="NVIDIA GB200"), needs_imex(pci_id="31C2"), needs_imex(name="NVIDIA B200")
    (True, True, False)
    """
    return name in IMEX_NAMES or str(pci_id).lower() in IMEX_PCI_IDS


def products():
    """PCI device id -> (product name, SM) of every product the table knows.

    >>> products()["2bb5"]
    ('NVIDIA RTX PRO 6000 Blackwell Server Edition', <Version('12.0')>)
    """
    return {product.pci_id: (product.name, arch.sm) for arch in ARCHITECTURES for product in arch.products}
