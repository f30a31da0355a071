"""What the JIT pre-warm must build, and whether a node's cache already holds it."""

from bringup.setting_checks import shown
from bringup.versions import parse

# What files/prewarm.py writes into its manifest: key -> the types its value may have.
MANIFEST_SHAPE = {"flashinfer": (str,), "arch_list": (str,), "request": (dict,), "toolchain": (str, type(None)),
                  "modules": (list,)}


def prewarm_request(config):
    """The pre-warm request files/prewarm.py records in its manifest.

    >>> prewarm_request(type("C", (), {"prewarm_modules": ("norm",), "prewarm_head_dims": ("128",),
    ...                                "prewarm_dtypes": ("bf16",)})())
    {'modules': ['norm'], 'head_dims': [128], 'dtypes': ['bf16']}
    """
    return {
        "modules": list(config.prewarm_modules),
        "head_dims": [int(head_dim) for head_dim in config.prewarm_head_dims],
        "dtypes": list(config.prewarm_dtypes),
    }


def manifest_problem(state):
    """What is wrong with the shape of a pre-warm state (``{"manifest", "stale"}``), or "".
    The manifest is a file the service user can write: any shape may arrive.

    >>> manifest_problem({"manifest": ["x"], "stale": []})
    'the manifest is a list, not an object'
    >>> manifest_problem({"manifest": {"flashinfer": 7}, "stale": []})
    'its flashinfer is int 7'
    """
    manifest, stale = state.get("manifest"), state.get("stale", [])
    if not isinstance(manifest, dict):
        return f"the manifest is a {type(manifest).__name__}, not an object"
    for key, kinds in MANIFEST_SHAPE.items():
        if key in manifest and not isinstance(manifest[key], kinds):
            return f"its {key} is {type(manifest[key]).__name__} {shown(manifest[key], 40)}"
    if not isinstance(stale, list) or not all(isinstance(name, str) for name in stale):
        return f"its stale modules are {shown(stale, 40)}, not names"
    return ""


def prewarm_gap(state, request, flashinfer, arch_list, toolchain=None):
    """Why the cache does not hold the request, or "" when it does.

    + state: the facts' ``jit_cache.prewarm`` (``{"manifest", "stale"}``) or None
    + request: ``prewarm_request(config)``
    + flashinfer: the FlashInfer release that will serve (Version)
    + arch_list: the plan's FLASHINFER_CUDA_ARCH_LIST
    + toolchain: the facts' ``jit_cache.toolchain`` (the service's compilers and header
      packages, digested); SGLang's modules are keyed by them, FlashInfer's are not

    >>> prewarm_gap(None, {}, None, "12.0f")
    'no pre-warm manifest'
    """
    if not state or not state.get("manifest"):
        return "no pre-warm manifest"
    problem = manifest_problem(state) if isinstance(state, dict) else "the state is not an object"
    if problem:
        return f"the pre-warm manifest is not as files/prewarm.py writes it ({problem}): the pre-warm rewrites it"
    manifest = state["manifest"]
    if parse(manifest.get("flashinfer")) != flashinfer:
        return f"built by FlashInfer {manifest.get('flashinfer')}, serving with {flashinfer}"
    if manifest.get("arch_list") != arch_list:
        return f"built for {manifest.get('arch_list')!r}, planned {arch_list!r}"
    if manifest.get("request") != request:
        return f"built {manifest.get('request')}, requested {request}"
    sglang = [module for module in request.get("modules", ()) if module.startswith("sglang-")]
    if sglang and toolchain and manifest.get("toolchain") != toolchain:
        return (f"{', '.join(sglang)} built with another toolchain (nvcc, c++ or their headers' packages "
                "changed since): SGLang would compile them again at start")
    if state.get("stale"):
        return f"ninja would rebuild {', '.join(state['stale'])}"
    return ""
