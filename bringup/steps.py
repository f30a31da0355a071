"""deploy.py's steps: the one table the settings' ``deploy_steps``, the plan's steps
and apt steps, and the fleet summary's step of each task derive from.

A step is a value of ``deploy_steps``, the titles of its tasks (the ``@deploy``
decorators in tasks/; ``tests/unit/test_steps.py`` fails on a title with no row) and
whether it installs packages with apt (deploy then waits for apt's locks first).
Adding a step: a row here, its task file in tasks/, its call in deploy.py and its part
of the plan (a module of bringup/plan/, its plan class in bringup/plan/model.py, called
from ``bringup.plan.plan``).

    >>> DEPLOY_STEPS[:3], APT_STEPS
    (('repo', 'driver', 'toolkit'), ('repo', 'driver', 'toolkit', 'dcgm', 'venv'))
    >>> STEP_OF_TASK["DeepGEMM pre-compile"]
    'prewarm'
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One step of deploy.py, in the order they run."""

    name: str
    tasks: tuple
    apt: bool = False


STEPS = (
    Step("repo", ("NVIDIA CUDA apt repository",), apt=True),
    Step("driver", ("NVIDIA driver",), apt=True),
    Step("toolkit", ("CUDA toolkit",), apt=True),
    # DCGM (gpu_diag_install): NVIDIA's diagnostic's packages and host engine.
    Step("dcgm", ("NVIDIA DCGM",), apt=True),
    Step("env", ("CUDA environment",)),
    Step("account", ("Service account and helpers",)),
    Step("venv", ("SGLang venv",), apt=True),
    Step("prewarm", ("FlashInfer JIT pre-warm", "DeepGEMM pre-compile")),
    # The rollback is the service step's own (service_rollback: on-failure), and rollback.py's.
    Step("service", ("SGLang service", "SGLang rollback")),
)
# Tasks around the steps on every deploy (no deploy_steps value of their own): the
# summary counts them under these names.
GUARDS = {"apt locks": "apt", "Locked packages served": "apt", "Deploy lock": "lock", "Deploy lock released": "lock", "SGLang release": "release"}

DEPLOY_STEPS = tuple(step.name for step in STEPS)
APT_STEPS = tuple(step.name for step in STEPS if step.apt)
STEP_OF_TASK = {**{title: step.name for step in STEPS for title in step.tasks}, **GUARDS}
