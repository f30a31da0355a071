"""Bring GPU nodes to a serving-ready SGLang install.

    pyinfra inventory/gpu.py deploy.py

Every host is validated first (the same report as validate.py); a host whose plan
has blockers gets no change at all, and the output says why. The tasks then act on
the plan: they never re-derive a version.
"""

from tasks.cuda_env import cuda_environment
from tasks.cuda_repo import cuda_repository
from tasks.cuda_toolkit import cuda_toolkit
from tasks.node_plan import planned_host
from tasks.prewarm import flashinfer_prewarm
from tasks.service import sglang_service
from tasks.sglang_venv import sglang_venv

planned = planned_host("deploy")

if planned:
    config, facts, node = planned
    node_plan = node.as_dict()
    repo_changes = cuda_repository(repo=node_plan["repo"])
    cuda_toolkit(toolkit=node_plan["toolkit"], repo_changes=repo_changes)
    cuda_environment(node=node_plan, env_file=config.service_env_file,
                     manage_alternative=config.cuda_manage_alternative)
    if config.venv_managed:
        sglang_venv(config=config)
    flashinfer_prewarm(config=config, arch_list=node.arch_list)
    sglang_service(config=config)
