"""The NVIDIA GPUs this project supports or meets, by PCI device id: what a node's bus
(the facts' ``pci_gpus``) says when nvidia-smi lists nothing (no driver, or a kernel
module that refused the GPUs).

Sources, read for this table:

- Device ids and product names: NVIDIA's open GPU kernel modules, README.md, "Compatible
  GPUs" (github.com/NVIDIA/open-gpu-kernel-modules, release 595.45.04: "The NVIDIA open
  kernel modules can be used on any Turing or later GPU (see the table below)"), rows such
  as "| NVIDIA RTX PRO 6000 Blackwell Server Edition | 2BB5 10DE 204E |", "| NVIDIA B200 |
  2901 10DE 1999 |", "| NVIDIA H100 NVL | 2321 10DE 1839 |". Its names are the ones
  nvidia-smi prints. Each id was checked against the PCI ID repository (pci.ids,
  github.com/pciutils/pciids, version 2026.08.22), e.g. "2bb5  GB202GL [RTX PRO 6000
  Blackwell Server Edition]", "2335  GH100 [H200 SXM 141GB]", "2e12  GB20B [GB10]".
- Compute capabilities: NVIDIA's "CUDA GPU Compute Capability" (developer.nvidia.com/cuda-gpus):
  "12.1 | NVIDIA GB10 (DGX Spark)", "12.0 | NVIDIA RTX PRO 6000 Blackwell Server Edition |
  NVIDIA RTX PRO 6000 Blackwell Workstation Edition NVIDIA RTX PRO 6000 Blackwell Max-Q
  Workstation Edition ... GeForce RTX 5090", "10.3 | NVIDIA GB300 NVIDIA B300",
  "10.0 | NVIDIA GB200 NVIDIA B200", "9.0 | NVIDIA GH200 NVIDIA H200 NVIDIA H100",
  "8.9 | NVIDIA L4 NVIDIA L40 NVIDIA L40S"; the A100's 8.0 from the same page's earlier
  table ("NVIDIA A100 | 8.0").

An NVIDIA id not listed stays unknown: named by its id, never guessed from its neighbours.
"""

from dataclasses import dataclass

from packaging.version import Version

NVIDIA = "10de"


@dataclass(frozen=True)
class GpuModel:
    name: str          # the product name (NVIDIA's, as nvidia-smi prints it)
    compute_cap: str   # "12.0"


# PCI device id (lower-case hex) -> the product; a subsystem id makes no difference here
# (GH200's 120GB and 480GB share 2342: named as pci.ids names the device).
MODELS = {
    # Blackwell
    "2bb5": GpuModel("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
    "2bb1": GpuModel("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
    "2bb4": GpuModel("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "12.0"),
    "2b85": GpuModel("NVIDIA GeForce RTX 5090", "12.0"),
    "2e12": GpuModel("NVIDIA GB10", "12.1"),
    "2901": GpuModel("NVIDIA B200", "10.0"),
    "2941": GpuModel("NVIDIA GB200", "10.0"),
    "3182": GpuModel("NVIDIA B300 SXM6 AC", "10.3"),
    "31c2": GpuModel("NVIDIA GB300", "10.3"),
    # Hopper
    "2330": GpuModel("NVIDIA H100 80GB HBM3", "9.0"),
    "2339": GpuModel("NVIDIA H100", "9.0"),
    "2331": GpuModel("NVIDIA H100 PCIe", "9.0"),
    "2321": GpuModel("NVIDIA H100 NVL", "9.0"),
    "2335": GpuModel("NVIDIA H200", "9.0"),
    "233b": GpuModel("NVIDIA H200 NVL", "9.0"),
    "2342": GpuModel("NVIDIA GH200 120GB / 480GB", "9.0"),
    "2348": GpuModel("NVIDIA GH200 144G HBM3e", "9.0"),
    # Ada
    "26b9": GpuModel("NVIDIA L40S", "8.9"),
    "27b8": GpuModel("NVIDIA L4", "8.9"),
    # Ampere
    "20b0": GpuModel("NVIDIA A100-SXM4-40GB", "8.0"),
    "20b2": GpuModel("NVIDIA A100-SXM4-80GB", "8.0"),
    "20b3": GpuModel("NVIDIA A100-SXM-64GB", "8.0"),
    "20b5": GpuModel("NVIDIA A100 80GB PCIe", "8.0"),
    "20f1": GpuModel("NVIDIA A100-PCIE-40GB", "8.0"),
}


def gpu_model(gpu):
    """The product of one ``pci_gpus`` entry, or None for an id the table does not know.

    >>> gpu_model({"vendor": "10de", "device": "2bb5"}).compute_cap
    '12.0'
    >>> gpu_model({"vendor": "10de", "device": "1db6"}) is None
    True
    """
    if gpu.get("vendor") != NVIDIA:
        return None
    return MODELS.get(str(gpu.get("device") or "").lower())


def bus_gpus(facts):
    """The NVIDIA GPUs on the bus (the facts' ``pci_gpus``; ``[]`` when absent or null).

    >>> bus_gpus({"pci_gpus": None}), bus_gpus({})
    ([], [])
    """
    return [gpu for gpu in facts.get("pci_gpus") or [] if gpu.get("vendor") == NVIDIA]


def pci_gpus_sms(facts):
    """The compute capabilities of the GPUs on the bus that the table knows, sorted, each
    once (``()`` for none: no ``pci_gpus``, no GPU, only unknown ids).

    >>> bus = [{"bus_id": f"0000:{n}8:00.0", "vendor": "10de", "device": "2bb5", "class": "0302"} for n in range(8)]
    >>> pci_gpus_sms({"pci_gpus": bus + [{"bus_id": "0000:98:00.0", "vendor": "10de", "device": "2901",
    ...                                   "class": "0302"}]})
    (<Version('10.0')>, <Version('12.0')>)
    >>> pci_gpus_sms({"pci_gpus": [{"bus_id": "0000:18:00.0", "vendor": "10de", "device": "ffff", "class": "0302"}]})
    ()
    """
    return tuple(sorted({Version(model.compute_cap) for model in map(gpu_model, bus_gpus(facts)) if model}))


def bus_summary(gpus):
    """The GPUs on the bus in words: how many of each model (an unknown one by its id).

    >>> bus_summary([{"vendor": "10de", "device": "2bb5"}] * 8 + [{"vendor": "10de", "device": "ffff"}])
    '9 NVIDIA GPU(s): 8x NVIDIA RTX PRO 6000 Blackwell Server Edition (compute capability 12.0), 1x unknown \
NVIDIA device 10de:ffff'
    """
    counts = {}
    for gpu in gpus:
        model = gpu_model(gpu)
        label = (f"{model.name} (compute capability {model.compute_cap})" if model
                 else f"unknown NVIDIA device {gpu.get('vendor')}:{gpu.get('device')}")
        counts[label] = counts.get(label, 0) + 1
    return f"{len(gpus)} NVIDIA GPU(s): " + ", ".join(f"{count}x {label}" for label, count in counts.items())
