"""The NVIDIA GPUs this project supports or meets, by PCI device id: what a node's bus
(the facts' ``pci_gpus``) says when nvidia-smi lists nothing (no driver, or a kernel
module that refused the GPUs).

The ids, product names and compute capabilities are rows of the one table of GPU
architectures (``bringup/gpu_archs.py``, which cites NVIDIA's open GPU kernel modules
README, pci.ids and NVIDIA's CUDA GPUs page); this module only reads the bus with it.

An NVIDIA id not listed stays unknown: named by its id, never guessed from its neighbours.
"""

from dataclasses import dataclass

from packaging.version import Version

from bringup.gpu_archs import products

NVIDIA = "10de"


@dataclass(frozen=True)
class GpuModel:
    name: str          # the product name (NVIDIA's, as nvidia-smi prints it)
    compute_cap: str   # "12.0"


# PCI device id (lower-case hex) -> the product (bringup/gpu_archs.py's rows).
MODELS = {pci_id: GpuModel(name, str(sm)) for pci_id, (name, sm) in products().items()}


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


# The driver of a GPU handed to a virtual machine (VFIO passthrough): never this host's.
PASSED_THROUGH = "vfio-pci"


def bus_gpus(facts):
    """The NVIDIA GPUs on the bus that are this host's (the facts' ``pci_gpus``, less those
    bound to vfio-pci: a virtual machine's; ``[]`` when absent or null).

    >>> bus_gpus({"pci_gpus": None}), bus_gpus({})
    ([], [])
    >>> [gpu["bus_id"] for gpu in bus_gpus({"pci_gpus": [{"bus_id": "0000:18:00.0", "vendor": "10de", "driver": "nvidia"},
    ...                                                  {"bus_id": "0000:28:00.0", "vendor": "10de", "driver": "vfio-pci"}]})]
    ['0000:18:00.0']
    """
    return [gpu for gpu in facts.get("pci_gpus") or [] if gpu.get("vendor") == NVIDIA
            and gpu.get("driver") != PASSED_THROUGH]


def passed_through_gpus(facts):
    """The NVIDIA GPUs on the bus bound to vfio-pci (handed to virtual machines).

    >>> passed_through_gpus({"pci_gpus": [{"bus_id": "0000:28:00.0", "vendor": "10de", "driver": "vfio-pci"}]})[0]["bus_id"]
    '0000:28:00.0'
    """
    return [gpu for gpu in facts.get("pci_gpus") or [] if gpu.get("vendor") == NVIDIA
            and gpu.get("driver") == PASSED_THROUGH]


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
