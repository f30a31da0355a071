"""What FlashInfer will do with a toolkit and a GPU: its target-arch rules, per release.

Source: flashinfer/compilation_context.py, ``CompilationContext._normalize_cuda_arch``
(each SM's suffix is its row in bringup/gpu_archs.py; the rules of the SM 12.x branch
are here) and ``__init__`` (read in the 0.7.0 and 0.7.2 wheels; 0.7.2.post1 and 0.7.4 match
0.7.2), and flashinfer/jit/cpp_ext.py ``get_cuda_version`` (nvcc of the resolved
CUDA home, falling back to ``torch.version.cuda`` when that nvcc cannot run).

- auto-detect (no ``FLASHINFER_CUDA_ARCH_LIST``): each GPU's SM is normalised inside
  ``try/except Exception``; a failure only logs, leaving the target set empty, and
  every JIT build later fails with "FlashInfer requires GPUs with sm75 or higher".
- ``FLASHINFER_CUDA_ARCH_LIST`` entries with a letter suffix are taken as-is; nvcc
  then has to know that target, or ptxas fails ("Value 'sm_120f' is not defined").
"""

from dataclasses import dataclass

from packaging.version import Version

from bringup.cuda import FIRST_CUDA_FOR_FAMILY_TARGETS, FIRST_CUDA_FOR_SM
from bringup.gpu_archs import FAMILY_TARGET_MAJORS, flashinfer_suffix

# Releases from which SM 12.0 builds ``0a`` on CUDA 12.8 instead of failing
# (0.7.1 changelog; 0.7.2 source).
SM120_ACCEPTS_CUDA_12_8_FROM = Version("0.7.1")


class ArchError(Exception):
    """FlashInfer's normalisation raises for this SM and CUDA (the message is FlashInfer's)."""


def _suffixed(sm, minor_suffix):
    return f"{sm.major}.{minor_suffix}"


def normalize_arch(flashinfer_version, cuda, sm):
    """The target FlashInfer derives for ``sm`` with nvcc ``cuda``, like ``12.0f``.

    + flashinfer_version: FlashInfer release (Version)
    + cuda: the CUDA release FlashInfer detects (Version)
    + sm: compute capability (Version)

    Raises ArchError with FlashInfer's own message where it would raise.

    >>> normalize_arch(Version("0.7.2"), Version("13.0"), Version("12.0"))
    '12.0f'
    >>> normalize_arch(Version("0.7.2"), Version("12.8"), Version("12.0"))
    '12.0a'
    """
    suffix = flashinfer_suffix(sm)
    if sm.major in FAMILY_TARGET_MAJORS:
        return _normalize_family(flashinfer_version, cuda, sm, suffix)
    return _suffixed(sm, f"{sm.minor}{suffix}")


def _normalize_family(flashinfer_version, cuda, sm, suffix):
    """FlashInfer's SM 12.x branch: the family target (``12.0f``) needs nvcc 12.9; from
    0.7.1 it builds ``12.0a`` on 12.8 instead of failing."""
    family_ok = cuda >= FIRST_CUDA_FOR_FAMILY_TARGETS
    if flashinfer_version < SM120_ACCEPTS_CUDA_12_8_FROM:
        if not family_ok:
            raise ArchError("SM 12.x requires CUDA >= 12.9")
        return _suffixed(sm, f"{sm.minor}{suffix}")
    if suffix == "f":
        if family_ok:
            return _suffixed(sm, f"{sm.minor}f")
        if FIRST_CUDA_FOR_SM.get(sm) and cuda >= FIRST_CUDA_FOR_SM[sm]:
            return _suffixed(sm, f"{sm.minor}a")
        raise ArchError("SM 120 requires CUDA >= 12.8")
    if family_ok:
        return _suffixed(sm, f"{sm.minor}a")
    raise ArchError("SM 12.1+ requires CUDA >= 12.9")


def target_supported_by_cuda(target, cuda):
    """True when nvcc ``cuda`` knows the target ``target`` (e.g. ``12.0f`` needs 12.9).

    >>> target_supported_by_cuda("12.0f", Version("12.8"))
    False
    """
    if target.endswith("f"):
        return cuda >= FIRST_CUDA_FOR_FAMILY_TARGETS
    return True


@dataclass(frozen=True)
class Prediction:
    """What FlashInfer will build for a node: ``targets`` (sorted) or why it breaks.

    ``outcome`` is one of ``ok``, ``empty_arch_set``, ``ptxas_failure``,
    ``import_failure`` or ``no_nvcc``; ``detail`` says it in FlashInfer's words.
    """

    outcome: str
    targets: tuple
    detail: str = ""


def predict(flashinfer_version, detected_cuda, sms, arch_list_env=None, nvcc_runs=True):
    """Predict FlashInfer's target set for GPUs ``sms`` in an environment.

    + flashinfer_version: FlashInfer release (Version)
    + detected_cuda: what ``get_cuda_version()`` returns there (Version)
    + sms: the GPUs' compute capabilities (Versions)
    + arch_list_env: value of ``FLASHINFER_CUDA_ARCH_LIST`` there, or None
    + nvcc_runs: whether the resolved CUDA home has an nvcc that runs

    >>> predict(Version("0.7.0"), Version("12.8"), [Version("12.0")]).outcome
    'empty_arch_set'
    """
    if arch_list_env:
        return _predict_from_env(flashinfer_version, detected_cuda, arch_list_env, nvcc_runs)
    targets = set()
    for sm in sms:
        try:
            targets.add(normalize_arch(flashinfer_version, detected_cuda, sm))
        except ArchError as error:
            # FlashInfer swallows this on auto-detect: the set stays empty.
            return Prediction("empty_arch_set", (), str(error))
    return _finish(sorted(targets, key=_target_key), nvcc_runs)


def _predict_from_env(flashinfer_version, detected_cuda, arch_list_env, nvcc_runs):
    targets = set()
    for entry in arch_list_env.split():
        if entry[-1].isalpha():
            if not target_supported_by_cuda(entry, detected_cuda):
                return Prediction(
                    "ptxas_failure", (), f"nvcc {detected_cuda} cannot build target {entry}"
                )
            targets.add(entry)
            continue
        try:
            targets.add(normalize_arch(flashinfer_version, detected_cuda, Version(entry)))
        except ArchError as error:
            return Prediction("import_failure", (), str(error))
    return _finish(sorted(targets, key=_target_key), nvcc_runs)


def _finish(targets, nvcc_runs):
    if not nvcc_runs:
        return Prediction("no_nvcc", tuple(targets), "no runnable nvcc in the resolved CUDA home")
    return Prediction("ok", tuple(targets))


def _target_key(target):
    major, minor = target.split(".")
    return (int(major), minor)


def workspace_dir_name(targets):
    """The JIT cache directory FlashInfer names after its target set.

    >>> workspace_dir_name(["12.0f", "10.0a"])
    '100a_120f'
    """
    return "_".join(target.replace(".", "") for target in sorted(targets, key=_target_key))
