"""The driver step on a GB200 compute tray (bringup/plan/driver_step.py): IMEX, never
Fabric Manager. With a lock that has the ``imex`` role (nvidia-imex at the driver's
version, as bringup/driver_locks.py resolves it from NVIDIA's index), deploy installs and
holds it and starts nvidia-imex, and IMEX_MISSING is a fix; the channel and the nodes
config stay the administrator's. Without the role (a lock made from an index that serves
no nvidia-imex) the IMEX findings stay as they are."""

from bringup import driver_packages
from tests.unit.test_driver_plan import LOCK_TEXT, codes, converged_layer, planned
from tests.unit.scenarios import converged, gpus

IMEX_LOCK = LOCK_TEXT + "imex nvidia-imex=580.95.05-1\n"
NO_IMEX = {"unit": {"load_state": "not-found", "active_state": "inactive", "unit_file_state": ""}, "packages": [],
           "nodes_config": {"present": False, "readable": False, "peers": 0}, "channels_registered": True,
           "channels": []}
IMEX_CODES = {"IMEX_MISSING", "IMEX_NO_CHANNEL", "IMEX_VERSION", "IMEX_INACTIVE", "IMEX_NODES_CONFIG_EMPTY",
              "FABRIC_MANAGER_MISSING", "FABRIC_MANAGER_NOT_ON_GB200", "NVLSM_MISSING"}


def tray_facts(switches=0):
    layer = converged_layer()
    layer["nvswitch_count"] = switches
    return dict(converged(), gpus=gpus("NVIDIA GB200", "10.0", 4), driver_layer=layer, imex=NO_IMEX)


def test_a_tray_gets_imex_at_the_drivers_version_and_never_fabric_manager():
    """Installed and held; started only once the nodes config lists the domain (the service
    does not start without it): IMEX_NODES_CONFIG_EMPTY says so meanwhile."""
    node = planned(tray_facts(switches=2), lock=IMEX_LOCK + "fabric nvidia-fabricmanager=580.95.05-1\n")
    driver = node.driver
    assert "nvidia-imex=580.95.05-1" in driver.install and "nvidia-imex" in driver.hold
    assert not any("fabricmanager" in pin for pin in driver.install)
    assert driver.units == ("nvidia-persistenced",)
    assert codes(node, IMEX_CODES) == ["IMEX_MISSING:fix", "IMEX_NO_CHANNEL:blocker"]
    fix = next(f for f in node.findings if f.code == "IMEX_MISSING").fix
    assert "nvidia-imex=580.95.05-1" in fix and "starts nvidia-imex once its nodes config lists the domain" in fix
    assert "docs.nvidia.com/multi-node-nvlink-systems/imex-guide/" in fix

    facts = tray_facts(switches=2)
    facts["imex"] = {**NO_IMEX, "nodes_config": {"present": True, "readable": True, "peers": 18}}
    node = planned(facts, lock=IMEX_LOCK)
    assert node.driver.units == ("nvidia-persistenced", "nvidia-imex")
    assert "enable and start nvidia-imex" in node.driver.changes
    assert "enables and starts nvidia-imex" in next(f for f in node.findings if f.code == "IMEX_MISSING").fix


def test_without_the_imex_role_the_findings_stay():
    node = planned(tray_facts())
    assert not any(pin.startswith("nvidia-imex") for pin in node.driver.install)
    assert node.driver.units == ("nvidia-persistenced",)
    assert codes(node, IMEX_CODES) == ["IMEX_MISSING:blocker", "IMEX_NO_CHANNEL:blocker"]


def test_a_running_imex_is_not_started_again():
    facts = tray_facts()
    facts["imex"] = {**NO_IMEX, "unit": {"load_state": "loaded", "active_state": "active",
                                         "unit_file_state": "enabled"},
                     "packages": [{"name": "nvidia-imex", "version": "580.95.05-1", "held": True}],
                     "nodes_config": {"present": True, "readable": True, "peers": 18}, "channels": ["channel0"]}
    # The driver layer's dpkg-query lists it too (its nvidia-* pattern).
    facts["driver_layer"]["packages"] += facts["imex"]["packages"]
    node = planned(facts, lock=IMEX_LOCK)
    assert node.driver.changes == ()
    assert node.driver.units == ("nvidia-persistenced", "nvidia-imex")
    assert not any("nvidia-imex" in change for change in node.driver.changes)
    assert codes(node, IMEX_CODES) == []


def test_the_imex_package_names():
    assert driver_packages.names("ubuntu", "580", "580.95.05").imex == ("nvidia-imex",)
    assert driver_packages.names("debian", "570", "570.195.03").imex == ("nvidia-imex-570",)
