"""The service environment's keys whose values the plan decides itself: the toolkit
(``CUDA_HOME``, ``PATH``), FlashInfer's arch list, every cache directory and the host
compiler. ``service_env`` may not set them (bringup.config), and their values are no
secret (bringup.redact keeps them in what it prints).

>>> "CUDA_HOME" in PLANNED_ENV_KEYS and "SGLANG_JIT_CACHE_DIR" in PLANNED_ENV_KEYS
True
"""

from bringup.caches import CACHE_DIRS

PLANNED_ENV_KEYS = ("CUDA_HOME", "PATH", "FLASHINFER_CUDA_ARCH_LIST", *CACHE_DIRS, "CXX")
