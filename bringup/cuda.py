"""CUDA compatibility tables: which CUDA targets an SM, which driver runs a CUDA.

Sources:
- Which CUDA first (and last) targets an SM: the one table of GPU architectures,
  bringup/gpu_archs.py (CUDA Toolkit release notes, "Supported architectures"); the
  ``f`` family targets came with 12.9 (CUDA 12.9 release notes).
- CUDA Toolkit release notes, Table 3 "CUDA Toolkit and Minimum Required Driver
  Version" (toolkit GA drivers) and the minor-version compatibility table (any
  12.x on >= 525.60.13, any 13.x on >= 580).
- NVIDIA data-centre and RTX PRO driver release notes for per-GPU floors
  (B200 >= 570.133.20, RTX PRO 6000 Blackwell >= 575.51.03).
"""

import re

from packaging.version import Version

from bringup.gpu_archs import ARCHITECTURES
from bringup.versions import parse

# SM -> first (and last) CUDA release whose nvcc targets it: the columns of the one
# table of GPU architectures (bringup/gpu_archs.py, release notes cited there).
FIRST_CUDA_FOR_SM = {arch.sm: arch.first_cuda for arch in ARCHITECTURES}
LAST_CUDA_FOR_SM = {arch.sm: arch.last_cuda for arch in ARCHITECTURES if arch.last_cuda}

# Family (``f``) targets need this nvcc (CUDA 12.9 release notes).
FIRST_CUDA_FOR_FAMILY_TARGETS = Version("12.9")

# CUDA X.Y -> minimum Linux driver of its GA release (release notes Table 3).
GA_DRIVER_FOR_CUDA = {
    Version("12.8"): Version("570.26"),
    Version("12.9"): Version("575.51.03"),
    Version("13.0"): Version("580.65.06"),
    Version("13.1"): Version("590.44.01"),
}

# CUDA major -> driver floor under minor-version compatibility (release notes,
# "CUDA minor version compatibility"). Below it nothing built for that major runs.
MINOR_COMPAT_DRIVER_FOR_MAJOR = {
    12: Version("525.60.13"),
    13: Version("580.65.06"),
}

# GPU model (whole words of nvidia-smi's name) -> driver floor for that GPU.
# - B200: NVIDIA GPU Operator 25.3.0 release notes / platform support, "HGX B200 requires
#   a driver container version of 570.133.20 or later" (NVIDIA/cloud-native-docs PR 184).
# - RTX PRO 6000 Blackwell: RTX PRO driver release notes, first supporting driver 575.51.03.
# No entry, on purpose (no documented per-GPU floor found; the CUDA floor applies,
# 580.65.06 for the default cu130 stack, and SM 12.1 needs a CUDA >= 12.9 toolkit):
# - GB200 ("NVIDIA GB200"): the GPU Operator 25.3.0 notes add "HGX GB200 NVL" support and
#   driver 570.124.06 in the same list, but state a minimum only for HGX B200. Whole-word
#   matching keeps the B200 entry off GB200.
# - GB10 ("NVIDIA GB10", DGX Spark): NVIDIA documents DGX OS 7 with 580-series drivers
#   (dgx-spark-playbooks: "Driver version 580.95.05 or higher" for one playbook; sample
#   output with 580.82.09), not a floor for the GPU.
DRIVER_FLOOR_FOR_GPU = {
    "B200": Version("570.133.20"),
    "RTX PRO 6000 Blackwell": Version("575.51.03"),
}


def cuda_supports_sm(cuda, sm):
    """True when nvcc of release ``cuda`` can target ``sm`` (both Versions).

    >>> cuda_supports_sm(Version("12.8"), Version("12.1"))
    False
    """
    first = FIRST_CUDA_FOR_SM.get(sm)
    if first is None or cuda < first:
        return False
    last = LAST_CUDA_FOR_SM.get(sm)
    return last is None or cuda <= last


def driver_floor_for_cuda(cuda):
    """The oldest driver that runs code built with CUDA ``cuda`` (minor-version compatible).

    >>> str(driver_floor_for_cuda(Version("13.0")))
    '580.65.6'
    """
    return MINOR_COMPAT_DRIVER_FOR_MAJOR.get(cuda.major) or GA_DRIVER_FOR_CUDA.get(cuda)


def driver_floor_for_gpu(name):
    """The oldest driver NVIDIA supports for a GPU model, or None if no floor is known.

    >>> str(driver_floor_for_gpu("NVIDIA B200"))
    '570.133.20'
    >>> driver_floor_for_gpu("NVIDIA GB200") is None
    True
    """
    for model, floor in DRIVER_FLOOR_FOR_GPU.items():
        if re.search(rf"(?:^|\s){re.escape(model)}(?:\s|$)", name):
            return floor
    return None


def driver_runs_cuda(driver_version, cuda):
    """True when the driver (a version string) can run CUDA ``cuda`` code.

    >>> driver_runs_cuda("550.54.15", Version("13.0"))
    False
    """
    floor = driver_floor_for_cuda(cuda)
    driver = parse(driver_version)
    return driver is not None and (floor is None or driver >= floor)
