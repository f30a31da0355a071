"""Tasks read the plan only: no module of tasks/ parses a host's settings or probes and
plans a host itself; a plan made while the run executes (the driver step's reboot) comes
from control/host_plan.py's guarded entry point (``replanned_host``), as the first one
does (``planned_host``)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASKS = sorted((ROOT / "tasks").rglob("*.py"))
# What plans a host or reads its settings: only control/host_plan.py's entry points may.
PLANNERS = {"bringup.config": {"Config", "SCHEMA"}, "control.host_plan": {"gather", "load_config", "probe_inputs"},
            "bringup.plan": {"plan"}}


def reached(path):
    """(module, name) of every name ``path`` imports from the planners' modules, and
    every ``host.data`` it reads."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in PLANNERS:
            found += [(node.module, alias.name) for alias in node.names if alias.name in PLANNERS[node.module]]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "*") for alias in node.names if alias.name in PLANNERS]
        elif isinstance(node, ast.Attribute) and node.attr == "data" and getattr(node.value, "id", "") == "host":
            found.append(("pyinfra.host", "data"))
    return found


@pytest.mark.parametrize("path", TASKS, ids=lambda path: str(path.relative_to(ROOT)))
def test_a_task_takes_the_plan_and_never_plans_or_reads_settings(path):
    assert reached(path) == [], f"{path.relative_to(ROOT)}: take what you need from the NodePlan"


def test_the_driver_step_plans_again_through_the_guarded_entry_point():
    source = (ROOT / "tasks" / "driver.py").read_text()
    assert 'partial(replanned_host, "deploy")' in source


def test_the_deploy_lock_waits_as_long_as_the_plan_says():
    """tasks/deploy_lock.py parsed the host's settings again for deploy_lock_timeout."""
    from bringup.config import Config
    from bringup.plan import plan

    facts = {"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [], "python": {"version": "3.11.2"}}
    node = plan(facts, Config.from_data({"deploy_lock_timeout": "45"}))
    assert node.deploy_lock_timeout == 45 and node.as_dict()["deploy_lock_timeout"] == 45
    assert plan(facts, Config()).deploy_lock_timeout == Config().deploy_lock_timeout == 600
