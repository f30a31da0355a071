"""What deploy does about the loaded module after the driver step (bringup/driver_reboot.py):
the module against the plan, then go, needs reboot or reboot, from the settings."""

import pytest

from bringup.driver_reboot import (
    GO,
    NEEDS_REBOOT,
    REBOOT,
    driver_ready,
    module_mismatch,
    reboot_decision,
)
from bringup.plan.model import DriverPlan

PLAN = DriverPlan(manage=True, branch="580", version="580.95.05", flavour="open")
OPEN = {"loaded": True, "version": "580.95.05", "flavour": "open", "banner": "NVRM version: ..."}

# name, module (driver_layer.module), mismatch (substring; "" when it matches)
MODULES = [
    ("the plan's module", OPEN, ""),
    ("the version without a leading zero", {**OPEN, "version": "580.95.5"}, ""),
    ("/sys/module alone: no flavour said", {**OPEN, "flavour": None, "banner": None}, ""),
    ("no module", {"loaded": False, "version": None, "flavour": None}, "loaded: none; installed: 580.95.05 open"),
    ("no driver_layer at all", None, "loaded: none"),
    ("the old driver", {**OPEN, "version": "570.86.15", "flavour": "proprietary"},
     "loaded: 570.86.15 proprietary; installed: 580.95.05 open"),
    ("the other flavour", {**OPEN, "flavour": "proprietary"}, "loaded: 580.95.05 proprietary"),
    ("a newer one than the lock", {**OPEN, "version": "580.105.08"}, "loaded: 580.105.08 open"),
]


@pytest.mark.parametrize("name,module,mismatch", MODULES, ids=[case[0] for case in MODULES])
def test_module_mismatch(name, module, mismatch):
    found = module_mismatch(module, PLAN)
    assert mismatch in found if mismatch else found == ""


WHY = "loaded: none; installed: 580.95.05 open"
# name, plan fields, mismatch, action, reason (substring)
DECISIONS = [
    ("driver not managed", {"manage": False}, WHY, GO, ""),
    ("module matches", {}, "", GO, ""),
    ("never (the default)", {}, WHY, NEEDS_REBOOT, "driver_reboot: never"),
    ("if-needed", {"reboot": "if-needed"}, WHY, REBOOT, WHY),
    ("if-needed, service serving", {"reboot": "if-needed", "service_active": True}, WHY, NEEDS_REBOOT,
     "driver_reboot_serving is false"),
    ("if-needed, serving allowed", {"reboot": "if-needed", "service_active": True, "reboot_serving": True}, WHY,
     REBOOT, WHY),
    ("never, serving allowed", {"reboot_serving": True, "service_active": True}, WHY, NEEDS_REBOOT, "never"),
]


@pytest.mark.parametrize("name,fields,mismatch,action,reason", DECISIONS, ids=[case[0] for case in DECISIONS])
def test_reboot_decision(name, fields, mismatch, action, reason):
    plan = DriverPlan(**{**PLAN.__dict__, **fields})
    found, why = reboot_decision(plan, mismatch)
    assert found == action
    assert (reason in why and WHY in why) if reason else why == ""


@pytest.mark.parametrize("fields,ready", [
    ({"manage": False, "reboot_for": WHY}, True),
    ({"reboot_for": ""}, True),
    ({"reboot_for": WHY}, False),
    ({"reboot_for": WHY, "reboot": "if-needed"}, True),
    ({"reboot_for": WHY, "reboot": "if-needed", "service_active": True}, False),
])
def test_driver_ready_runs_the_service_only_on_a_loaded_driver(fields, ready):
    assert driver_ready(DriverPlan(**{**PLAN.__dict__, **fields})) is ready


def test_a_node_plan_manages_no_driver_by_default():
    from bringup.plan.model import NodePlan
    assert NodePlan().driver == DriverPlan(manage=False)
    assert NodePlan().as_dict()["driver"]["manage"] is False
