"""Every cache the serving stack writes, placed under ``service_cache_dir`` in the
service's environment (and so the pre-warm's): nothing lands in the service user's home
or ``~/.cache``, where neither the pre-warm nor the node suite would see it.

Sources: the pinned wheels (sglang 0.5.23, flashinfer-python 0.7.2, apache-tvm-ffi
0.1.11, sgl-deep-gemm 0.2.3.post2), file:line inside each:
- sglang/__init__.py:6-14 and srt/environ.py:2308-2336: ``import sglang`` sets (setdefault,
  so ours win) TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, CUDA_CACHE_PATH,
  FLASHINFER_WORKSPACE_BASE under SGLANG_CACHE_DIR since 0.5.18 (PR 32434), and
  TILELANG_CACHE_DIR since 0.5.21; releases before set none of them.
- srt/environ.py:1383: SGLANG_CACHE_DIR, default ``~/.cache/sglang``.
- kernels/jit/utils/compile/cache.py:317-319: SGLANG_JIT_CACHE_DIR (SGLang's own JIT
  kernels, 0.5.18+), default ``~/.cache/sglang/jit``: it does NOT follow SGLANG_CACHE_DIR.
- srt/environ.py:1373 and srt/layers/deep_gemm_wrapper/compile_utils.py:49-51:
  SGLANG_DG_CACHE_DIR (default ``$SGLANG_CACHE_DIR/deep_gemm``) is copied over
  DG_JIT_CACHE_DIR, so DeepGEMM is placed through SGLANG_DG_CACHE_DIR.
- flashinfer/jit/env.py:66-70: FLASHINFER_WORKSPACE_BASE (``$HOME`` by default); the
  JIT cache is ``<base>/.cache/flashinfer/<version>/<archs>/cached_ops``.
- tvm_ffi/cpp/extension.py:682,933: TVM_FFI_CACHE_DIR, default ``~/.cache/tvm-ffi``
  (FlashInfer kernels built through tvm-ffi; sglang <= 0.5.17's own JIT kernels).
- XDG_CACHE_HOME: what else follows the XDG base directory spec (Hugging Face hub
  downloads, outlines, cuda-python) instead of ``~/.cache``.
"""

# variable -> directory under service_cache_dir ("" is the directory itself)
CACHE_DIRS = {
    "SGLANG_CACHE_DIR": "",
    "FLASHINFER_WORKSPACE_BASE": "",
    "SGLANG_JIT_CACHE_DIR": "jit",
    "SGLANG_DG_CACHE_DIR": "deep_gemm",
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "CUDA_CACHE_PATH": "nv",
    "TILELANG_CACHE_DIR": "tilelang",
    "TVM_FFI_CACHE_DIR": "tvm-ffi",
    "XDG_CACHE_HOME": "xdg",
}


def cache_env(cache_dir):
    """The cache variables of the service's environment.

    >>> cache_env("/var/cache/sglang")["SGLANG_JIT_CACHE_DIR"]
    '/var/cache/sglang/jit'
    """
    return {variable: f"{cache_dir}/{sub}" if sub else cache_dir for variable, sub in CACHE_DIRS.items()}
