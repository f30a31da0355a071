"""FlashInfer JIT cache, compiled before the service starts."""

from pyinfra.api import deploy

from bringup.prewarm import prewarm_request
from tasks.operations.sglang import jit_prewarm
from tasks.sglang_venv import service_home

MANIFEST = "prewarm/manifest.json"


@deploy("FlashInfer JIT pre-warm")
def flashinfer_prewarm(config, arch_list):
    """
    Build the configured modules for the plan's arch list into the service's cache.

    + config: the host's ``bringup.config.Config``
    + arch_list: the plan's FLASHINFER_CUDA_ARCH_LIST
    """
    jit_prewarm(name=f"Pre-warm FlashInfer for {arch_list}",
                probe_args={"venv": config.venv_path, "env_file": config.service_env_file,
                            "cache_dir": config.service_cache_dir},
                request=prewarm_request(config), flashinfer=config.stack_flashinfer, arch_list=arch_list,
                user=config.service_user, home=service_home(config), env_file=config.service_env_file,
                venv=config.venv_path, manifest=f"{config.service_cache_dir}/{MANIFEST}")
