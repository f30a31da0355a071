"""The IMEX findings (bringup/plan/driver.py ``_check_imex``) on a table: a GB200 compute
tray (4 GPUs, no NVSwitch of its own) whose ``imex`` (docs/facts.md) is as NVIDIA's IMEX
user's guide wants it, one trap at a time; the same facts on other GPUs say nothing; a
tray is never told to install Fabric Manager."""

import copy

import pytest

from bringup.config import Config
from bringup.plan.driver import driver_layer_findings
from tests.fixtures.facts.driver_layer.make import VERSION, changed, healthy_layer
from tests.unit.scenarios import converged, gpus

HEALTHY_IMEX = {
    "unit": {"load_state": "loaded", "active_state": "active", "unit_file_state": "enabled"},
    "packages": [{"name": "nvidia-imex", "version": f"{VERSION}-1", "held": True}],
    "nodes_config": {"present": True, "readable": True, "peers": 18},
    "channels_registered": True,
    "channels": ["channel0"],
}
NO_IMEX = {"unit": {"load_state": "not-found", "active_state": "inactive", "unit_file_state": ""}, "packages": [],
           "nodes_config": {"present": False, "readable": False, "peers": 0}, "channels_registered": True,
           "channels": []}
FABRIC_MANAGER = {"load_state": "loaded", "active_state": "failed", "unit_file_state": "enabled"}


def found(imex, layer=None, node_gpus=None):
    facts = dict(converged(), driver_layer=layer or healthy_layer(4), imex=imex,
                 gpus=node_gpus if node_gpus is not None else gpus("NVIDIA GB200", "10.0", 4))
    out = []
    driver_layer_findings(facts, Config(), out.append)
    return sorted(f"{finding.code}:{finding.severity}" for finding in out)


def test_a_healthy_tray_has_no_finding():
    assert found(HEALTHY_IMEX) == []


# name, the change to the healthy imex (path, value), the findings
TRAPS = [
    ("no imex at all", None, ["IMEX_MISSING:blocker", "IMEX_NO_CHANNEL:blocker"]),
    ("imex of another driver", [(("packages", 0, "version"), "580.82.07-1")], ["IMEX_VERSION:warning"]),
    ("imex of another branch's name", [(("packages", 0), {"name": "nvidia-imex-570", "version": "570.172.08-1",
                                                          "held": True})], ["IMEX_VERSION:warning"]),
    ("imex stopped", [(("unit", "active_state"), "failed")], ["IMEX_INACTIVE:blocker"]),
    ("no channel", [(("channels",), [])], ["IMEX_NO_CHANNEL:blocker"]),
    ("channel device not registered", [(("channels",), []), (("channels_registered",), False)],
     ["IMEX_NO_CHANNEL:blocker"]),
    ("nodes config missing, imex stopped", [(("nodes_config",), {"present": False, "readable": False, "peers": 0}),
                                             (("unit", "active_state"), "inactive")],
     ["IMEX_NODES_CONFIG_EMPTY:warning"]),
    ("nodes config without an address", [(("nodes_config", "peers"), 0)], ["IMEX_NODES_CONFIG_EMPTY:warning"]),
    ("nodes config missing", [(("nodes_config",), {"present": False, "readable": False, "peers": 0})],
     ["IMEX_NODES_CONFIG_EMPTY:warning"]),
    ("unit without the package", [(("packages",), [])], []),
]


@pytest.mark.parametrize("name,changes,expected", TRAPS, ids=[t[0] for t in TRAPS])
def test_each_trap_alone(name, changes, expected):
    imex = NO_IMEX if changes is None else changed(HEALTHY_IMEX, changes)
    assert found(imex) == expected
    # On a B200 or an RTX PRO node the same facts say nothing.
    assert found(imex, node_gpus=gpus("NVIDIA B200", "10.0", 8)) == []


def test_gb300_and_a_tray_without_a_driver_known_by_the_bus():
    assert found(NO_IMEX, node_gpus=gpus("NVIDIA GB300", "10.3", 4)) == ["IMEX_MISSING:blocker",
                                                                         "IMEX_NO_CHANNEL:blocker"]
    no_module = changed(healthy_layer(4), [(("module",), {"loaded": False, "version": None, "flavour": None,
                                                           "banner": None})])
    facts = dict(converged(), driver_layer=no_module, imex=dict(NO_IMEX, channels_registered=False), gpus=[],
                 driver=None,
                 pci_gpus=[{"bus_id": f"0008:0{n}:00.0", "vendor": "10de", "device": "2941", "class": "0302"}
                           for n in range(4)])
    out = []
    driver_layer_findings(facts, Config(), out.append)
    severities = {finding.code: finding.severity for finding in out}
    assert "IMEX_MISSING" in severities
    # No driver loaded, so no channel can exist yet: the driver comes first (deploy's driver
    # step, or the operator), and the plan made with it loaded blocks if none is made then.
    assert severities["IMEX_NO_CHANNEL"] == "warning", severities


@pytest.mark.parametrize("imex", [None, {}], ids=["older probe", "empty"])
def test_an_older_report_says_nothing(imex):
    assert found(imex) == []


def test_a_tray_is_never_told_to_install_fabric_manager():
    """Even if the tray listed NVSwitches, no FABRIC_MANAGER_* or NVLSM finding: the switch
    trays run the fabric. A Fabric Manager installed or enabled there is a warning."""
    layer = healthy_layer(4)
    layer["nvswitch_count"] = 2
    assert found(HEALTHY_IMEX, layer) == []
    layer["units"]["nvidia-fabricmanager"] = copy.deepcopy(FABRIC_MANAGER)
    assert found(HEALTHY_IMEX, layer) == ["FABRIC_MANAGER_NOT_ON_GB200:warning"]


def test_the_fixes_cite_the_guide_and_name_the_channel_commands():
    facts = dict(converged(), driver_layer=healthy_layer(4), imex=NO_IMEX, gpus=gpus("NVIDIA GB200", "10.0", 4))
    out = []
    driver_layer_findings(facts, Config(), out.append)
    fixes = {finding.code: finding.fix for finding in out}
    assert "nvidia-imex=580.95.05*" in fixes["IMEX_MISSING"]
    assert "NVreg_CreateImexChannel0=1" in fixes["IMEX_NO_CHANNEL"] and "mknod" in fixes["IMEX_NO_CHANNEL"]
    assert all("imex-guide" in fix for fix in fixes.values())
