"""DeepGEMM's kernels for the service's model, compiled before the service starts.

DeepGEMM is SGLang's JIT for FP8 block-scaled GEMMs (DeepSeek-style checkpoints). Its
kernels depend on the model's shapes, so only SGLang's own tool builds them, and only on
the node's GPUs: ``python -m sglang.compile_deep_gemm`` launches the whole server for the
model and sends it one request (SGLang 0.5.23, sglang/compile_deep_gemm.py:108-204; it
takes every ``sglang serve`` server argument plus ``--timeout``, default 3600 s). Without
it, the service's first start compiles them ("Entering DeepGEMM JIT Pre-Compile session.
It may take a long time (typically 10-20 mins)", srt/layers/deep_gemm_wrapper/
compile_utils.py:150-193). The kernels land in SGLANG_DG_CACHE_DIR (bringup/caches.py).

Which GPUs use DeepGEMM (SGLang 0.5.23, srt/layers/deep_gemm_wrapper/configurer.py:32-55):
SM 9.0 and later. SM 12.0/12.1 only with a deep_gemm that has the SM120 APIs
(configurer.py:17-29); sgl-deep-gemm 0.2.3.post2, the one the locks pin, has them.
"""

from packaging.version import Version

# configurer.py:39: `if sm_version < 90: return False`.
FIRST_DEEP_GEMM_SM = Version("9.0")


def deep_gemm_decision(enabled, model, gpu_sms):
    """Whether deploy compiles DeepGEMM's kernels on this node, and why (or why not).

    + enabled: the ``prewarm_deep_gemm`` setting
    + model: the ``service_model`` setting
    + gpu_sms: the compute capabilities of the GPUs the node reports (Version); empty
      on a node without GPUs (an image builder's ``target_sms`` do not count: the
      compile runs the server on the GPUs)

    >>> deep_gemm_decision(True, "deepseek-ai/DeepSeek-V3", [Version("9.0")])
    (True, 'SM 9.0 uses DeepGEMM')
    >>> deep_gemm_decision(True, "m", [Version("8.9")])
    (False, 'SM 8.9 does not use DeepGEMM (SGLang uses it on SM 9.0 and later)')
    """
    if not enabled:
        return False, "prewarm_deep_gemm is off"
    if not model:
        return False, "no service_model: DeepGEMM's kernels are compiled for a model's shapes"
    if not gpu_sms:
        return False, "no GPU on the node: the compile runs the server on the node's GPUs"
    older = [sm for sm in gpu_sms if sm < FIRST_DEEP_GEMM_SM]
    if older:
        return False, (f"SM {', '.join(str(sm) for sm in older)} does not use DeepGEMM "
                       f"(SGLang uses it on SM {FIRST_DEEP_GEMM_SM} and later)")
    return True, f"SM {', '.join(str(sm) for sm in gpu_sms)} uses DeepGEMM"


def deep_gemm_request(sglang, model, server_args, gpu_sms):
    """What the compile is for, as its manifest records it: a change of any of these
    (the release, the model, the server arguments such as ``--tp-size`` or
    ``--quantization``, the GPUs) compiles again.

    >>> deep_gemm_request("0.5.23", "m", ("--tp-size", "8"), [Version("12.0")])
    {'sglang': '0.5.23', 'model': 'm', 'server_args': ['--tp-size', '8'], 'sms': ['12.0']}
    """
    return {"sglang": sglang, "model": model, "server_args": list(server_args),
            "sms": [str(sm) for sm in gpu_sms]}
