"""Which GPU architectures a torch CUDA build carries code for.

Source: PyTorch release matrix (RELEASE.md, "Release Compatibility Matrix") and
``torch.cuda.get_arch_list()`` of the wheels: 2.14.1+cu130 reports
``['sm_75', 'sm_80', 'sm_86', 'sm_90', 'sm_100', 'sm_120']``; cu128 and cu129 builds
carry sm_100 and sm_120 as well.
"""

from packaging.version import Version

ARCH_LIST_FOR_TORCH_CUDA = {
    Version("12.6"): ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    Version("12.8"): ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    Version("12.9"): ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    Version("13.0"): ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
}


def arch_list_for_build(torch_cuda):
    """The arch list a torch wheel built for CUDA ``torch_cuda`` carries, or None if unknown.

    >>> arch_list_for_build(Version("13.0"))[-1]
    'sm_120'
    """
    return ARCH_LIST_FOR_TORCH_CUDA.get(torch_cuda)


def _arch_version(entry):
    """``sm_120`` / ``compute_120`` -> Version("12.0"); other spellings -> None."""
    _, _, digits = entry.partition("_")
    digits = digits.rstrip("abf")
    if not digits.isdigit() or len(digits) < 2:
        return None
    return Version(f"{digits[:-1]}.{digits[-1]}")


def covers_sm(arch_list, sm):
    """True when the arch list has code that runs on ``sm``: SASS of the same major
    and a minor not above it (binary compatibility within a major), or PTX
    (``compute_XY``) of an SM not above it, which the driver JIT-compiles.

    >>> covers_sm(["sm_90", "sm_120"], Version("12.1"))
    True
    >>> covers_sm(["sm_90", "sm_100"], Version("12.0"))
    False
    """
    for entry in arch_list:
        built = _arch_version(entry)
        if built is None:
            continue
        if entry.startswith("compute_") and built <= sm:
            return True
        if entry.startswith("sm_") and built.major == sm.major and built.minor <= sm.minor:
            return True
    return False
