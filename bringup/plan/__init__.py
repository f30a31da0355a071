"""The node plan: facts + settings -> every decision the deploy acts on, with findings.

    python -m bringup.plan FACTS.json [--config CONFIG.yaml]

prints the NodePlan as JSON (bringup/plan/cli.py). The tasks (tasks/) take the NodePlan
and nothing else: every path, version, package, option and file content they need is
in it, decided here once.

``plan()`` below runs the decisions in the order their findings are reported; each
concern is a module of its own, its decisions pure functions of one ``PlanContext``
(context.py):

- model.py: the NodePlan, the plan of each step, the planner's constants
- repository.py: NVIDIA's apt repository, the node's sources and keyrings, apt's locks
- dcgm.py: the DCGM step (gpu_diag_install): NVIDIA's DCGM at its lock, its host engine started
- driver_step.py: the driver step (driver_manage): NVIDIA's driver at its lock, and the
  driver layer's findings (driver.py) as the fixes it makes
- gpus.py: the SMs, the driver's floors, FlashInfer's arch list
- health.py: the GPUs' hardware health (ECC, row remapping, PCIe link, slowdown, Xids)
- toolkit.py: the toolkit and its lock, how the node resolves CUDA today
- venv.py: the venv's CPython and locks, the venv the node has
- paths.py: the paths root writes or hands over (UNSAFE_PATH), the paths the service
  user must reach (SERVICE_PATH_UNREACHABLE)
- account.py: the service account
- service.py: the service's env file, unit and exposure, a failing unit's cause
- model_source.py: where service_model comes from; HF_HUB_OFFLINE, the model's fetch
- prewarm.py: FlashInfer's JIT pre-warm, DeepGEMM's kernels
- serving_group.py: a serving group's member (issue 38): its multi-node arguments, NCCL/Gloo env
"""

from dataclasses import replace

from bringup import facts_schema
from bringup.layout import SERVICE_BASE_PATH
from bringup.locks import LockFiles
from bringup.group import GROUP_ENV_KEYS
from bringup.planned_env import OFFLINE_KEY
from bringup.plan import (account, dcgm, diag, driver_step, gpus, health, model_source, paths, prewarm, repository, service,
                          serving_group, toolkit, venv)
from bringup.plan.driver import driver_layer_findings
from bringup.plan.account import service_account_problem
from bringup.plan.cli import load_facts, load_settings, main
from bringup.plan.context import PlanContext
from bringup.plan.model import (MIN_PYTHON, SYSTEM_PYTHON, TOOLKIT_PACKAGES, DeepGemmPlan, DriverPlan, NodePlan,
                                PrewarmPlan, RepoPlan, ServicePlan, ToolkitPlan, VenvPlan)
from bringup.plan.paths import cache_dir_problem, env_file_problem
from bringup.plan.service import exposure_findings, listen_address, loopback_only, managed_env_keys, service_env
from bringup.steps import DEPLOY_STEPS

# The planner's surface for the rest of the project (control/, tasks/, tests/), as it
# was when the planner was one module.
__all__ = [
    "plan", "NodePlan", "RepoPlan", "DriverPlan", "ToolkitPlan", "VenvPlan", "PrewarmPlan", "DeepGemmPlan", "ServicePlan",
    "MIN_PYTHON", "TOOLKIT_PACKAGES", "SYSTEM_PYTHON", "service_env", "managed_env_keys", "listen_address",
    "loopback_only", "exposure_findings", "service_account_problem", "env_file_problem", "cache_dir_problem",
    "load_facts", "load_settings", "main",
]


def plan(facts, config, locks=None, member=None):
    """Decide what a node needs.

    + facts: the facts document (docs/facts.md)
    + config: a validated ``Config``
    + locks: where the control side's lock files are read (``bringup.locks.LockFiles``;
      default: the current directory, the repository root)
    + member: the node's place in its serving group (``bringup.group.Member``; None: it
      serves alone, and nothing of groups enters its plan)

    >>> from bringup.config import Config
    >>> facts = {"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [],
    ...          "python": {"version": "3.11.2"}}
    >>> plan(facts, Config()).codes("blocker")
    ['NO_GPU']
    """
    facts_schema.check(facts)
    node = NodePlan(layout=config.layout, manage_alternative=config.cuda_manage_alternative,
                    steps=tuple(step for step in DEPLOY_STEPS if step in config.deploy_steps),
                    apt_locks=list(facts.get("apt_locks") or []), apt_lock_timeout=config.deploy_apt_lock_timeout,
                    deploy_lock_timeout=config.deploy_lock_timeout)
    context = PlanContext.of(facts, config, locks if locks is not None else LockFiles(),
                             node.findings.append, member=member)
    node.torch_cuda = str(context.torch_cuda)
    repository.check_apt_locks(context)
    node.repo = repository.repo(context)
    node.driver = driver_step.driver_plan(context, node.repo)
    context = replace(context, sms=gpus.target_sms(context))
    gpus.check_standin(context)
    node.toolkit = toolkit.toolkit(context, node.repo)
    toolkit.check_toolkit_lock(context, node.toolkit)
    gpus.check_driver(context, node.driver)
    # The layer below CUDA (kernel module, user space, Fabric Manager, P2P path, MIG)
    # reports beside the driver's floors, before anything is built for the GPUs.
    driver_layer_findings(context.facts, context.config, context.add)
    # And the hardware under both: a GPU that needs a reset or a replacement blocks.
    health.health_findings(context.facts, context.config, context.add)
    node.dcgm = dcgm.dcgm_plan(context, node.repo)
    diag.diag_findings(context.facts, context.config, context.add)
    context = replace(context, targets=gpus.arch_targets(context))
    node.arch_list = " ".join(context.targets)
    node.venv = venv.venv_plan(context)
    venv.check_venv(context)
    toolkit.check_toolkits(context)
    toolkit.check_resolution(context)
    toolkit.check_login_path(context)
    toolkit.check_symlink(context)
    paths.check_paths(context)
    venv.check_venv_readable(context)
    paths.check_service_reach(context)
    venv.check_entry_point(context)
    account.check_service_account(context)
    # SSH sessions get the toolkit but not the venv; the service gets both.
    node.session_path = f"{context.home}/bin:{SERVICE_BASE_PATH}"
    node.env = service_env(config, context.home, node.arch_list)
    node.group = serving_group.group_plan(context)
    if node.group is not None:
        node.env = {**node.env, **node.group.env}
        node.env_owned = dict(node.group.env)
    service.check_service_env(context, node.env)
    source = model_source.check_model_source(context)
    if source is not None and source.offline:
        node.env = {**node.env, OFFLINE_KEY: "1"}
        node.env_owned = {**node.env_owned, OFFLINE_KEY: "1"}
    node.env_drop = {**model_source.taken_back(context, node.env), **serving_group.taken_back(context, node.env)}
    if node.env_owned or node.env_drop:
        # Deploy writes its record whole: an entry this plan did not decide (its HF_HUB_OFFLINE
        # while the model is not judged) is carried into it, never forgotten.
        recorded = context.facts.get("service_env_owned") or {}
        node.env_owned = {**node.env_owned, **{key: value for key, value in recorded.items()
                                               if key not in GROUP_ENV_KEYS and key not in node.env_drop
                                               and key not in node.env_owned}}
    model_fact = context.facts.get("model") or {}
    node.env_settled = bool(model_fact) and model_fact.get("model") == config.service_model
    node.model_fetch = model_source.fetch_plan(context, source)
    node.prewarm = prewarm.prewarm_plan(context)
    node.service = driver_step.service_after(service.service_plan(context, node.env), node.driver)
    service.check_serving_ready(context)
    node.findings.extend(exposure_findings(node.service, config.service_args, config.service_port))
    node.deep_gemm = prewarm.deep_gemm_plan(context)
    service.check_service_unit(context)
    # What the driver step cures is a fix, said as what deploy will do.
    node.findings[:] = driver_step.as_fixes(node.findings, node.driver)
    return node
