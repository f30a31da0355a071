"""The managed SGLang venv, built from the pinned lock."""

from pyinfra.api import deploy

from tasks.operations.files import directory_if_missing
from tasks.operations.packages import system_packages
from tasks.operations.sglang import torch_arch_recorded, venv_from_lock


@deploy("SGLang venv")
def sglang_venv(node):
    """
    Build the venv from the plan's lock; an external venv (``venv.managed`` false)
    is left as it is. Returns the operations that changed the live venv.

    + node: the NodePlan (``venv``, ``layout``)
    """
    venv = node.venv
    if not venv.managed:
        return []
    system_packages(name="Python venv support and the host compiler FlashInfer's JIT uses",
                    packages=list(venv.system_packages), timeout=node.apt_lock_timeout)
    directory_if_missing(name="Venv root", path=node.layout.venv_root)
    built = venv_from_lock(name=f"Build the venv from {venv.lock}", venv=venv)
    torch_arch_recorded(name="Record torch's arch list in the venv", venv=venv, layout=node.layout)
    return [built]
