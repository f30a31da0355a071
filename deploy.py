"""Bring GPU nodes to a serving-ready SGLang install.

    pyinfra inventory/gpu.py deploy.py

Every host is validated first (the same report as validate.py); a host whose plan
has blockers gets no change at all, and the output says why. The steps then act on
the plan (bringup.plan.NodePlan): every version, path and package is decided there.
``deploy_steps`` selects steps (all by default).
"""

from control.host_plan import planned_host
from tasks.apt_locks import apt_locks
from tasks.cuda_env import cuda_environment
from tasks.cuda_repo import cuda_repository
from tasks.cuda_toolkit import cuda_toolkit
from tasks.prewarm import deep_gemm_precompile, flashinfer_prewarm
from tasks.service import sglang_service
from tasks.service_account import service_account
from tasks.sglang_venv import sglang_venv

node = planned_host("deploy")

if node:
    # Before anything is written: a host whose apt stays locked fails unchanged.
    if node.uses_apt:
        apt_locks(node)
    repo_changes = cuda_repository(node) if node.runs("repo") else []
    if node.runs("toolkit"):
        cuda_toolkit(node, repo_changes)
    env_changes = cuda_environment(node) if node.runs("env") else []
    if node.runs("account"):
        service_account(node)
    venv_changes = sglang_venv(node) if node.runs("venv") else []
    if node.runs("prewarm"):
        flashinfer_prewarm(node)
        if node.deep_gemm.run:
            deep_gemm_precompile(node)
    if node.runs("service"):
        sglang_service(node, changes=[*env_changes, *venv_changes])
