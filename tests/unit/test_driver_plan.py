"""The driver step's plan (bringup/plan/driver_step.py) on a scenario table: a
node after a deploy (tests/unit/scenarios.py, Debian 12) with a driver layer (docs/facts.md)
of its own: no driver, the proprietary module on Blackwell, an NVSwitch node without
Fabric Manager, a node converged and held; the lock is made by the lock resolver from the
fixture index (tests/fixtures/driver-repo/)."""

import copy
from pathlib import Path

import pytest

from bringup import driver_packages
from bringup.deb_index import parse_index
from bringup.driver_locks import DriverInput, driver_lock_header, driver_lock_name, driver_lock_text, resolve_driver
from bringup.locks import LockFiles
from bringup.config import Config
from bringup.findings import Finding
from bringup.plan import driver_step, plan
from bringup.steps import DEPLOY_STEPS
from control.locks import dpkg_compare
from tests.fixtures.facts.driver_layer.make import PROPRIETARY_BANNER, hgx_layer, layer_gpus
from tests.fixtures.facts.driver_layer.make import changed as apply
from tests.fixtures.facts.driver_layer.make import healthy_layer as healthy
from tests.unit.scenarios import converged, gpus

ROOT = Path(__file__).resolve().parents[2]
INDEX = (ROOT / "tests" / "fixtures" / "driver-repo" / "Packages-debian12-amd64").read_text()
LOCK_NAME = driver_lock_name("580", "debian12", "x86_64")
WANTED = DriverInput("580", "580.95.05")
LOCKED = resolve_driver(WANTED, driver_packages.names("debian", "580", "580.95.05"), parse_index(INDEX),
                        "amd64", dpkg_compare)
LOCK_TEXT = driver_lock_text(driver_lock_header("driver-580.in", b"", "debian12", "amd64", "fixture", WANTED), LOCKED)
OPEN_PINS = tuple(f"{name}={version}" for name, version in LOCKED["open"].items())
MANAGE = {"driver_manage": True}


class Locks(LockFiles):
    """The checkout's locks, and the driver lock made from the fixture index (or none)."""

    def __init__(self, driver=LOCK_TEXT):
        super().__init__(root=str(ROOT))
        self.driver = driver

    def read(self, path):
        return self.driver if path == LOCK_NAME else super().read(path)


def held_lock_packages(role="open"):
    """The role's packages and the pinning package, installed at the lock's versions and held."""
    return [{"name": name, "version": version, "held": True}
            for name, version in {**LOCKED["pinning"], **LOCKED[role]}.items()]


def converged_layer():
    """A driver layer at the lock: the open flavour's packages held, the module loaded."""
    layer = healthy()
    layer["packages"] = held_lock_packages()
    return layer


def no_driver_layer():
    layer = apply(healthy(), [(("module",), {"loaded": False, "version": None, "flavour": None, "banner": None}),
                              (("installed_module",), None), (("nvml_libraries",), []), (("packages",), []),
                              (("nouveau", "blacklisted"), False), (("gpus",), []), (("dkms",), None),
                              (("kernel", "headers"), False), (("topology",), None)])
    for unit in layer["units"].values():
        unit.update(load_state="not-found", active_state="inactive", unit_file_state="")
    return layer


def no_driver_facts():
    facts = dict(converged(), driver=None, gpus=[], nvidia_smi={"present": False, "error": "nvidia-smi not found"},
                 driver_layer=no_driver_layer())
    facts["pci_gpus"] = [{"bus_id": f"0000:{0x17 + i:02x}:00.0", "vendor": "10de", "device": "2bb5",
                          "class": "0302"} for i in range(8)]
    return facts


def proprietary_facts():
    layer = apply(converged_layer(), [(("module", "flavour"), "proprietary"), (("module", "banner"), PROPRIETARY_BANNER),
                                      (("installed_module", "flavour"), "proprietary"),
                                      (("installed_module", "license"), "NVIDIA"),
                                      (("packages",), held_lock_packages("proprietary"))])
    return dict(converged(), driver_layer=layer)


def nvswitch_facts():
    layer = hgx_layer()
    layer["packages"] = held_lock_packages()
    layer["units"]["nvidia-fabricmanager"] = {"load_state": "not-found", "active_state": "inactive",
                                              "unit_file_state": ""}
    layer["units"]["nvlsm"] = dict(layer["units"]["nvidia-fabricmanager"])
    return dict(converged(), gpus=gpus("NVIDIA B200", "10.0", 8), driver_layer=layer)


def planned(facts, settings=None, lock=LOCK_TEXT):
    return plan(copy.deepcopy(facts), Config(**{**MANAGE, **(settings or {})}), Locks(lock))


def codes(node, only=None):
    return [f"{finding.code}:{finding.severity}" for finding in node.findings if only is None or finding.code in only]


DRIVER_CODES = set(driver_step.CURES) | {"DRIVER_REBOOT_NEEDED", "DRIVER_LOCK_MISSING", "DRIVER_TOO_OLD", "NO_GPU"}


def test_no_driver_installs_the_open_flavour_and_needs_a_reboot():
    node = planned(no_driver_facts())
    driver = node.driver
    assert (driver.manage, driver.flavour, driver.version, driver.lock) == (True, "open", "580.95.05", LOCK_NAME)
    assert driver.install == ("nvidia-driver-pinning-580.95.05=580.95.05-1",) + OPEN_PINS
    assert driver.hold == tuple(pin.split("=")[0] for pin in driver.install)
    assert driver.headers == ("linux-headers-6.12.48+deb13-amd64",)
    assert driver.units == ("nvidia-persistenced",) and driver.remove == ()
    assert (driver.blacklist_file, driver.blacklist) == (driver_step.NOUVEAU_FILE, driver_step.NOUVEAU_TEXT)
    assert driver.reboot_for == "loaded: none; installed after deploy: 580.95.05 open"
    assert '"^nvidia-kernel-open-dkms$";' in driver.unattended
    # The GPUs on the bus (eight RTX PRO 6000, device 2bb5: bringup/gpu_ids.py) are built for.
    assert codes(node, DRIVER_CODES) == ["DRIVER_NOT_LOADED:fix", "NOUVEAU_NOT_BLACKLISTED:fix",
                                         "DRIVER_REBOOT_NEEDED:warning"]
    assert node.arch_list == "12.0f"
    fix = next(f for f in node.findings if f.code == "DRIVER_NOT_LOADED").fix
    assert fix == f"deploy installs NVIDIA driver 580.95.05 (open kernel module, built by DKMS; {LOCK_NAME}), then a reboot"
    assert "blacklist nouveau (/etc/modprobe.d/gpu-bringup-nouveau.conf) and update the initramfs" in driver.changes
    reboot = next(f for f in node.findings if f.code == "DRIVER_REBOOT_NEEDED")
    assert reboot.message.startswith(f"deploy installs NVIDIA driver 580.95.05 (open kernel module, built by DKMS; "
                                     f"{LOCK_NAME}); the module changes at the next boot")
    assert "`needs reboot` (driver_reboot: never)" in reboot.message
    assert driver.changes[-1] == "leave the host `needs reboot` (loaded: none; installed after deploy: 580.95.05 open)"


def test_a_driverless_node_with_unknown_gpus_is_planned_open():
    facts = no_driver_facts()
    for gpu in facts["pci_gpus"]:
        gpu["device"] = "ffff"
    node = planned(facts)
    assert node.driver.flavour == "open" and node.driver.install[1:] == OPEN_PINS


def test_a_pre_turing_node_is_moved_to_the_proprietary_flavour():
    """Open modules drive Turing (7.5) and newer: a V100 node's open module is swapped."""
    facts = dict(converged(), gpus=gpus("Tesla V100-SXM2-32GB", "7.0", 8), driver_layer=converged_layer())
    node = planned(facts)
    assert node.driver.flavour == "proprietary" and "nvidia-kernel-dkms=580.95.05-1" in node.driver.install
    assert node.driver.remove == ("nvidia-kernel-open-dkms",)
    assert node.driver.reboot_for == "loaded: 580.95.05 open; installed after deploy: 580.95.05 proprietary"


def test_driver_not_loaded_becomes_the_install():
    """bringup/plan/gpus.py says DRIVER_NOT_LOADED for GPUs on the bus without a driver (or
    nvidia-smi failing); the driver step's plan turns it into the install, then a reboot."""
    node = planned(no_driver_facts())
    not_loaded = Finding("DRIVER_NOT_LOADED", "blocker", "no driver", "install it")
    (fixed, reboot) = driver_step.as_fixes([not_loaded], node.driver)
    assert (fixed.code, fixed.severity) == ("DRIVER_NOT_LOADED", "fix")
    assert fixed.fix.startswith("deploy installs NVIDIA driver 580.95.05 (open kernel module")
    assert reboot.code == "DRIVER_REBOOT_NEEDED"


def test_the_service_is_ordered_after_the_units_the_driver_step_starts():
    node = planned(nvswitch_facts())
    assert {"nvidia-persistenced.service", "nvidia-fabricmanager.service"} <= set(node.service.after_units)
    assert plan(copy.deepcopy(nvswitch_facts()), Config(), Locks()).service.after_units == \
        ("nvidia-persistenced.service",)


def test_proprietary_on_blackwell_is_moved_to_open():
    node = planned(proprietary_facts())
    driver = node.driver
    assert driver.flavour == "open" and driver.remove == ("nvidia-kernel-dkms",)
    assert "nvidia-kernel-open-dkms=580.95.05-1" in driver.install
    assert driver.reboot_for == "loaded: 580.95.05 proprietary; installed after deploy: 580.95.05 open"
    assert codes(node, DRIVER_CODES) == ["DRIVER_OPEN_MODULE_REQUIRED:fix", "DRIVER_REBOOT_NEEDED:warning"]
    assert driver.changes[0] == "purge the other kernel module flavour's packages: nvidia-kernel-dkms"


def test_nvswitch_without_fabric_manager_gets_it_at_the_drivers_version():
    node = planned(nvswitch_facts())
    driver = node.driver
    assert driver.units == ("nvidia-persistenced", "nvidia-fabricmanager")
    assert {"nvidia-fabricmanager=580.95.05-1", "libnvidia-nscq=580.95.05-1", "nvlsm=2025.06.10-1"} <= set(driver.install)
    assert {"nvidia-fabricmanager", "libnvidia-nscq", "nvlsm"} <= set(driver.hold)
    assert driver.reboot_for == ""
    assert codes(node, DRIVER_CODES) == ["FABRIC_MANAGER_MISSING:fix", "NVLSM_MISSING:fix"]
    fix = next(f for f in node.findings if f.code == "FABRIC_MANAGER_MISSING").fix
    assert "nvidia-fabricmanager=580.95.05-1" in fix and "enables and starts nvidia-fabricmanager" in fix


def test_a_converged_held_node_reports_nothing_new():
    facts = dict(converged(), driver_layer=converged_layer())
    managed, unmanaged = planned(facts), plan(copy.deepcopy(facts), Config(), Locks())
    assert managed.findings == unmanaged.findings
    assert managed.driver.changes == () and managed.driver.reboot_for == ""
    assert managed.driver.blacklist_file == "" and managed.driver.install == ("nvidia-driver-pinning-580.95.05="
                                                                             "580.95.05-1",) + OPEN_PINS


@pytest.mark.parametrize("facts", [no_driver_facts(), proprietary_facts(), nvswitch_facts()],
                         ids=["no driver", "proprietary", "nvswitch"])
def test_driver_manage_false_changes_nothing(facts):
    node = plan(copy.deepcopy(facts), Config(), Locks())
    assert node.driver == driver_step.DriverPlan(manage=False)
    assert all(f.severity != "fix" for f in node.findings if f.code in DRIVER_CODES)
    assert node.as_dict()["driver"]["manage"] is False


@pytest.mark.parametrize("lock,message", [
    (None, f"no driver lock {LOCK_NAME} for driver_branch 580"),
    ("open a=1\n", "cannot be read: no '# branch:'"),
    ("# branch: 580\n# version: 580.95.05\nproprietary a=580.95.05-1\n", "holds no packages of the open"),
], ids=["absent", "unreadable", "no open flavour"])
def test_a_missing_lock_blocks_and_names_make_lock(lock, message):
    node = planned(proprietary_facts(), lock=lock)
    missing = [f for f in node.findings if f.code == "DRIVER_LOCK_MISSING"]
    assert len(missing) == 1 and missing[0].severity == "blocker" and message in missing[0].message
    assert "make lock CUDA_REPO_URL=" in missing[0].fix and "CUDA_PLATFORMS=debian12-x86_64" in missing[0].fix
    # Without a lock nothing is a fix: the driver layer's blocker stays one.
    assert "DRIVER_OPEN_MODULE_REQUIRED:blocker" in codes(node)


@pytest.mark.parametrize("settings,active,severity,reboots", [
    ({"driver_reboot": "if-needed"}, False, "fix", True),
    ({"driver_reboot": "if-needed"}, True, "warning", False),
    ({"driver_reboot": "if-needed", "driver_reboot_serving": True}, True, "fix", True),
    ({}, False, "warning", False),
])
def test_reboot_settings(settings, active, severity, reboots):
    facts = proprietary_facts()
    if active:
        facts["service_unit"] = {"name": "sglang.service", "active_state": "active", "sub_state": "running",
                                 "result": "success", "restarts": 0, "journal": []}
    node = planned(facts, settings)
    reboot = [f for f in node.findings if f.code == "DRIVER_REBOOT_NEEDED"]
    assert [f.severity for f in reboot] == [severity]
    assert driver_step.will_reboot(node.driver) is reboots
    assert node.driver.service_active is active


def test_an_old_driver_is_a_fix_and_an_old_lock_a_blocker():
    facts = dict(proprietary_facts(), driver={"version": "570.86.15", "cuda_version": "12.8"})
    node = planned(facts)
    assert "DRIVER_TOO_OLD:fix" in codes(node) and "DRIVER_TOO_OLD:blocker" not in codes(node)
    old = "# branch: 580\n# version: 570.86.15\nopen a=570.86.15-1\npinning b=570.86.15-1\n"
    node = planned(facts, lock=old)
    blocker = [f for f in node.findings if f.code == "DRIVER_TOO_OLD" and f.severity == "blocker"]
    assert blocker and "the locked driver 570.86.15" in blocker[0].message
    assert "files/locks/driver-580.in" in blocker[0].fix


def test_proprietary_asked_for_blackwell_is_refused():
    node = planned(proprietary_facts(), {"driver_flavour": "proprietary"})
    refused = [f for f in node.findings if f.code == "DRIVER_OPEN_MODULE_REQUIRED"]
    assert [f.severity for f in refused] == ["blocker", "blocker"]
    assert refused[0].fix == "set driver_flavour: open (or auto)"


def test_open_asked_for_pre_turing_is_refused():
    """A V100 node (SM 7.0) with ``driver_flavour: open``: the open modules do not drive it."""
    facts = dict(converged(), gpus=gpus("Tesla V100-SXM2-32GB", "7.0", 8), driver_layer=converged_layer())
    refused = [f for f in planned(facts, {"driver_flavour": "open"}).findings
               if f.code == "DRIVER_PROPRIETARY_MODULE_REQUIRED"]
    assert [f.severity for f in refused] == ["blocker"]
    assert "compute capability 7.0" in refused[0].message
    assert refused[0].fix == "set driver_flavour: proprietary (or auto)"
    assert not [f for f in planned(facts).findings if f.code == "DRIVER_PROPRIETARY_MODULE_REQUIRED"]


@pytest.mark.parametrize("sms,setting,expected", [
    (("12.0",), "auto", "open"), (("9.0",), "auto", "open"), (("7.5",), "auto", "open"),
    (("7.0",), "auto", "proprietary"), (("6.0", "8.0"), "auto", "proprietary"), ((), "auto", "open"),
    (("12.0",), "open", "open"), (("8.0",), "proprietary", "proprietary"),
])
def test_flavour(sms, setting, expected):
    from packaging.version import Version
    assert driver_step.flavour_for(setting, tuple(Version(sm) for sm in sms)) == expected


def test_deploy_steps_without_the_driver_step_promise_no_driver_fix():
    steps = tuple(step for step in DEPLOY_STEPS if step != "driver")
    node = planned(no_driver_facts(), {"deploy_steps": steps})
    assert node.driver == driver_step.DriverPlan(manage=False)
    assert codes(node, DRIVER_CODES)[0] == "DRIVER_NOT_LOADED:blocker"


@pytest.mark.parametrize("fabric_manager_running,expected", [
    (False, ["FABRIC_MANAGER_MISSING:fix", "NVLSM_MISSING:fix", "FABRIC_NOT_READY:fix"]),
    (True, ["FABRIC_NOT_READY:blocker"]),
], ids=["deploy starts fabric manager", "fabric manager already runs"])
def test_a_fabric_waiting_for_fabric_manager_is_cured_with_it(fabric_manager_running, expected):
    facts = nvswitch_facts()
    layer = facts["driver_layer"]
    layer["gpus"] = layer_gpus(8, fabric_state="In Progress", fabric_status="N/A")
    if fabric_manager_running:
        layer["units"] = hgx_layer()["units"]
        layer["packages"] += [p for p in hgx_layer()["packages"] if p["name"] in ("nvlsm",)]
        layer["packages"] += [{"name": n, "version": v, "held": True} for n, v in LOCKED["fabric"].items()]
    node = planned(facts)
    assert codes(node, DRIVER_CODES | {"FABRIC_NOT_READY"}) == expected


PENDING = "6.12.57+deb13-amd64"


def test_a_pending_kernel_gets_its_headers_and_is_named():
    """Only linux-headers-$(uname -r) was installed: a newer kernel installed and pending a
    reboot got none, and its boot had no module. Now every installed kernel's headers."""
    layer = apply(converged_layer(), [(("kernel", "installed"), [
        {"release": "6.12.48+deb13-amd64", "headers": True, "initramfs": "current"},
        {"release": PENDING, "headers": False, "initramfs": "current"}])])
    managed = planned(dict(converged(), driver_layer=layer))
    assert managed.driver.headers == (f"linux-headers-{PENDING}",)
    assert f"install linux-headers-{PENDING} (DKMS builds the module against them)" in managed.driver.changes
    assert codes(managed, DRIVER_CODES) == ["KERNEL_HEADERS_PENDING:fix"]
    fix = next(f for f in managed.findings if f.code == "KERNEL_HEADERS_PENDING").fix
    assert fix == f"deploy installs linux-headers-{PENDING} before the DKMS build"
    unmanaged = plan(copy.deepcopy(dict(converged(), driver_layer=layer)), Config(), Locks())
    assert codes(unmanaged, DRIVER_CODES) == ["KERNEL_HEADERS_PENDING:warning"]


def test_an_older_kernel_without_headers_is_left_alone():
    """An older kernel is a fallback the boot menu keeps; Debian drops its headers from the
    archive, so asking for them failed every deploy (apt-get exit 100). Only the running
    kernel and newer ones (GRUB's default is the newest) get headers."""
    layer = apply(converged_layer(), [(("kernel", "installed"), [
        {"release": "6.12.40+deb13-amd64", "headers": False, "initramfs": "current"},
        {"release": "6.12.48+deb13-amd64", "headers": True, "initramfs": "current"}])])
    managed = planned(dict(converged(), driver_layer=layer))
    assert managed.driver.headers == ()
    assert codes(managed, DRIVER_CODES) == []


def test_an_initramfs_without_the_blacklist_is_updated_though_the_blacklist_is_there():
    """update-initramfs ran only when this run wrote the blacklist: a deploy killed between
    the two never rebuilt it. Now the initramfs the probe finds stale is updated."""
    layer = apply(converged_layer(), [(("kernel", "installed"), [
        {"release": "6.12.48+deb13-amd64", "headers": True, "initramfs": "stale"},
        {"release": PENDING, "headers": True, "initramfs": "current"}])])
    managed = planned(dict(converged(), driver_layer=layer))
    assert managed.driver.blacklist_file == "" and managed.driver.initramfs == ("6.12.48+deb13-amd64",)
    wanted = "update the initramfs of kernel 6.12.48+deb13-amd64 (it does not hold the nouveau blacklist)"
    assert managed.driver.changes == (wanted,)
    assert codes(managed, DRIVER_CODES) == ["NOUVEAU_INITRAMFS_STALE:fix"]
    fix = next(f for f in managed.findings if f.code == "NOUVEAU_INITRAMFS_STALE").fix
    assert fix == ("deploy updates the initramfs of kernel 6.12.48+deb13-amd64 (update-initramfs -u -k "
                   "6.12.48+deb13-amd64)")
    # A converged initramfs: nothing.
    assert planned(dict(converged(), driver_layer=converged_layer())).driver.initramfs == ()


def test_the_blacklist_written_now_updates_every_kernels_initramfs():
    layer = apply(converged_layer(), [(("nouveau", "blacklisted"), False), (("kernel", "installed"), [
        {"release": "6.12.48+deb13-amd64", "headers": True, "initramfs": "current"},
        {"release": PENDING, "headers": True, "initramfs": "none"}])])
    driver = planned(dict(converged(), driver_layer=layer)).driver
    assert driver.blacklist_file == driver_step.NOUVEAU_FILE and driver.initramfs == ("6.12.48+deb13-amd64",)
