"""Bring GPU nodes to a serving-ready SGLang install.

    pyinfra inventory/gpu.py deploy.py

Every host is validated first (the same report as validate.py); a host whose plan
has blockers gets no change at all, and the output says why. The steps then act on
the plan (bringup.plan.NodePlan): every version, path and package is decided there.
``deploy_steps`` selects steps (all by default).
"""

from bringup.driver_reboot import driver_ready
from control.host_plan import planned_host
from tasks.apt_locks import apt_locks
from tasks.cuda_env import cuda_environment
from tasks.cuda_repo import cuda_repository
from tasks.cuda_toolkit import cuda_toolkit
from tasks.dcgm import nvidia_dcgm
from tasks.deploy_lock import deploy_lock, deploy_lock_check, deploy_lock_release
from tasks.driver import nvidia_driver, nvidia_driver_outcome
from tasks.locks_served import locked_packages_served
from tasks.prewarm import deep_gemm_precompile, flashinfer_prewarm
from tasks.release import release_before_change
from tasks.service import sglang_service
from tasks.service_account import service_account
from tasks.sglang_venv import sglang_venv

node = planned_host("deploy")

if node:
    # One deploy at a time on a node, for the whole run: taken first (a host whose lock
    # stays another deploy's fails unchanged), checked before each step, let go last.
    deploy_lock(node)
    # Before anything is written: a host whose apt stays locked fails unchanged.
    if node.uses_apt:
        apt_locks(node)
    repo_changes = env_changes = venv_changes = []
    if node.runs("repo"):
        deploy_lock_check("repo")
        repo_changes = cuda_repository(node)
    # Before the driver or the toolkit step installs anything: fresh lists that serve every
    # locked version (a lock resolved against another index fails here, nothing installed).
    locked_packages_served(node, repo_changes)
    # A driver this run installs but will not have loaded (needs reboot) is not one the
    # service's steps can use: those are left out, and the summary says why.
    loaded = driver_ready(node.driver) or "driver" not in node.steps
    device_prewarm = node.prewarm is not None and not node.prewarm.no_device
    if node.runs("driver"):
        deploy_lock_check("driver")
        nvidia_driver(node, later_steps=loaded and bool({"prewarm", "service"} & set(node.steps)))
    if node.runs("toolkit"):
        deploy_lock_check("toolkit")
        cuda_toolkit(node)
    # DCGM's host engine reads the GPUs through the driver: after it, once it is loaded.
    if node.runs("dcgm") and loaded:
        deploy_lock_check("dcgm")
        nvidia_dcgm(node)
    # Before the first step that can change the env file, the unit or the venv: what the
    # service runs is recorded (once), so that a rollback can put it back.
    if node.venv.managed and node.service.enable and any(node.runs(step) for step in ("env", "venv", "service")):
        release_before_change(node)
    if node.runs("env"):
        deploy_lock_check("env")
        env_changes = cuda_environment(node)
    if node.runs("account"):
        deploy_lock_check("account")
        service_account(node)
    if node.runs("venv"):
        deploy_lock_check("venv")
        venv_changes = sglang_venv(node)
    if node.runs("prewarm") and (loaded or not device_prewarm):
        deploy_lock_check("prewarm")
        flashinfer_prewarm(node)
        if node.deep_gemm.run and loaded:
            deploy_lock_check("deep_gemm")
            deep_gemm_precompile(node)
    if node.runs("service") and loaded:
        deploy_lock_check("service")
        sglang_service(node, changes=[*env_changes, *venv_changes])
    deploy_lock_release()
    # Last: a host left needing a reboot fails here (exit status 1), after every step
    # that did not need the driver ran.
    nvidia_driver_outcome(node)
