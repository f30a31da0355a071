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
    # With their modes from the layout, never a umask's; a venv root closed to the
    # service user (release.sh under umask 077 made one 0700) is opened again.
    for role, name in (("venv root", "Venv root"), ("venvs", "Venvs directory")):
        entry = node.layout.directory(role)
        directory_if_missing(name=name, path=entry.path, user=entry.owner, group=entry.owner, mode=entry.mode,
                             reached=entry.reached)
    built = venv_from_lock(name=f"Build the venv from {venv.lock}", venv=venv)
    torch_arch_recorded(name="Record torch's arch list in the venv", venv=venv, layout=node.layout)
    return [built]
