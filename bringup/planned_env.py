"""The service environment's keys whose values the plan decides itself: the toolkit
(``CUDA_HOME``, ``PATH``), FlashInfer's arch list, every cache directory and the host
compiler. ``service_env`` may not set them (bringup.config), and their values are no
secret (bringup.redact keeps them in what it prints).

>>> "CUDA_HOME" in PLANNED_ENV_KEYS and "SGLANG_JIT_CACHE_DIR" in PLANNED_ENV_KEYS
True

``OFFLINE_KEY`` is set by the plan only where the operator has not set it (service_env or
the env file; bringup/plan/model_source.py): not one of the planned keys, no secret either.
Nor are a serving group's NCCL and Gloo keys (interface and port names: bringup/group.py).
"""

from bringup.caches import CACHE_DIRS
from bringup.group import GROUP_ENV_KEYS

PLANNED_ENV_KEYS = ("CUDA_HOME", "PATH", "FLASHINFER_CUDA_ARCH_LIST", *CACHE_DIRS, "CXX")
# huggingface_hub's offline switch (1.33.0 constants.py HF_HUB_OFFLINE): an offline node
# whose hub cache holds the model gets it, so SGLang does not sit retrying the hub.
OFFLINE_KEY = "HF_HUB_OFFLINE"
# The env keys whose values are shown where they are printed (bringup/redact.py).
NOT_SECRET_ENV_KEYS = (*PLANNED_ENV_KEYS, OFFLINE_KEY, *GROUP_ENV_KEYS)
# What deploy wrote into the env file for a reason of its own (OFFLINE_KEY: the hub did not
# answer and the cache held the model) is listed beside it, in ``<env file>.deploy-owned``
# (root's, 0600, written whole): the probe (files/probe.d/) then tells it from the operator's own
# value, and deploy takes it back when the reason is gone (bringup/plan/model_source.py).
OWNED_SUFFIX = ".deploy-owned"
# The keys deploy ever records there: its HF_HUB_OFFLINE, a serving group's NCCL/Gloo keys.
OWNED_ENV_KEYS = (OFFLINE_KEY, *GROUP_ENV_KEYS)


def owned_record(owned):
    """The content of ``<env file>.deploy-owned`` for ``owned`` (key -> the value deploy wrote).

    >>> print(owned_record({"HF_HUB_OFFLINE": "1"}), end="")
    # gpu-bringup (tasks/cuda_env.py): keys of the env file deploy wrote; it takes them back when their reason is gone
    HF_HUB_OFFLINE=1
    """
    lines = [("# gpu-bringup (tasks/cuda_env.py): keys of the env file deploy wrote; it takes them back when their "
              "reason is gone"), *(f"{key}={value}" for key, value in owned.items())]
    return "\n".join(lines) + "\n"
