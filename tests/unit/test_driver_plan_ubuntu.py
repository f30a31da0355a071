"""The driver step's plan on Ubuntu (bringup/plan/driver_step.py), table-driven: recorded
Ubuntu facts (tests/fixtures/facts/: a B200 node on 24.04, an H100 node on 22.04, and the
B200 document as 22.04) with an NVSwitch driver layer (tests/fixtures/facts/driver_layer/
make.py) and ``driver_manage: true``, planned against the checkout's shipped driver locks
(files/locks/driver-580-ubuntu2204-x86_64.txt, ...-ubuntu2404-...): NVIDIA's Ubuntu names
at the lock's versions, Fabric Manager at the driver's, no DRIVER_LOCK_MISSING."""

import copy
import json
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.driver_locks import driver_lock_name, parse_driver_lock
from bringup.locks import LockFiles
from bringup.plan import plan
from tests.fixtures.facts.driver_layer.make import PROPRIETARY_BANNER, changed, hgx_layer

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts"
KERNEL = "6.8.0-84-generic"


def bare_hgx():
    """An NVSwitch node the vendor shipped without a driver: no module, no package, no unit."""
    layer = changed(hgx_layer(), [
        (("module",), {"loaded": False, "version": None, "flavour": None, "banner": None}),
        (("installed_module",), None), (("nvml_libraries",), []), (("packages",), []), (("gpus",), []),
        (("dkms",), None), (("nouveau", "blacklisted"), False),
        (("kernel",), {"release": KERNEL, "headers": False,
                       "installed": [{"release": KERNEL, "headers": False, "initramfs": "current"}]})])
    for unit in layer["units"].values():
        unit.update(load_state="not-found", active_state="inactive", unit_file_state="")
    return layer


def proprietary_hgx(distro):
    """The proprietary flavour of the lock installed and held, its module loaded (Blackwell refuses it)."""
    lock = shipped(distro)
    layer = changed(hgx_layer(), [
        (("module", "flavour"), "proprietary"), (("module", "banner"), PROPRIETARY_BANNER),
        (("installed_module", "flavour"), "proprietary"), (("installed_module", "license"), "NVIDIA"),
        (("kernel",), {"release": KERNEL, "headers": True,
                       "installed": [{"release": KERNEL, "headers": True, "initramfs": "current"}]})])
    layer["packages"] = [{"name": name, "version": version, "held": True}
                         for name, version in lock.pins("pinning", "proprietary", "fabric", "nvlink5").items()]
    return layer


def facts(document, layer, version_id=None):
    found = json.loads((FACTS / document).read_text())
    if version_id:
        found["os"]["version_id"] = version_id
    return dict(found, driver_layer=layer)


def shipped(distro):
    return parse_driver_lock((ROOT / driver_lock_name("580", distro, "x86_64")).read_text())


# id, facts, the lock's distro, NVLink5 (NVLSM joins), the packages purged, the driver findings
SCENARIOS = [
    ("b200 on 24.04, no driver", lambda: facts("ubuntu2404-x86_64-b200.json", bare_hgx()), "ubuntu2404", True, (),
     ["FABRIC_MANAGER_MISSING:fix", "NVLSM_MISSING:fix", "NOUVEAU_NOT_BLACKLISTED:fix",
      "DRIVER_REBOOT_NEEDED:warning"]),
    ("b200 on 24.04, proprietary module", lambda: facts("ubuntu2404-x86_64-b200.json", proprietary_hgx("ubuntu2404")),
     "ubuntu2404", True, ("nvidia-dkms-580",), ["DRIVER_OPEN_MODULE_REQUIRED:fix", "DRIVER_REBOOT_NEEDED:warning"]),
    ("b200 on 22.04, no driver", lambda: facts("ubuntu2404-x86_64-b200.json", bare_hgx(), "22.04"), "ubuntu2204",
     True, (), ["FABRIC_MANAGER_MISSING:fix", "NVLSM_MISSING:fix", "NOUVEAU_NOT_BLACKLISTED:fix",
                "DRIVER_REBOOT_NEEDED:warning"]),
    ("h100 on 22.04, no driver", lambda: facts("ubuntu2204-x86_64-h100.json", bare_hgx()), "ubuntu2204", False, (),
     ["FABRIC_MANAGER_MISSING:fix", "NOUVEAU_NOT_BLACKLISTED:fix", "DRIVER_REBOOT_NEEDED:warning"]),
]


def driver_codes(node):
    return [f"{f.code}:{f.severity}" for f in node.findings
            if f.code.startswith(("DRIVER_", "FABRIC_", "NVLSM_", "NOUVEAU_"))]


@pytest.mark.parametrize("make, distro, nvlink5, purged, expected", [row[1:] for row in SCENARIOS],
                         ids=[row[0] for row in SCENARIOS])
def test_ubuntu_plans_the_open_module_at_the_ubuntu_lock(make, distro, nvlink5, purged, expected):
    node = plan(copy.deepcopy(make()), Config(driver_manage=True), LockFiles(root=str(ROOT)))
    driver, lock = node.driver, shipped(distro)
    assert (driver.manage, driver.flavour, driver.version) == (True, "open", "580.95.05")
    assert driver.lock == driver_lock_name("580", distro, "x86_64")
    roles = ("pinning", "open", "fabric") + (("nvlink5",) if nvlink5 else ())
    assert driver.install == tuple(f"{name}={version}" for name, version in lock.pins(*roles).items())
    assert driver.hold == tuple(lock.pins(*roles))
    # NVIDIA's Ubuntu names and revisions: the driver's 0ubuntu1, Fabric Manager's -1 at the driver's version.
    assert {"nvidia-driver-pinning-580.95.05=580.95.05-0ubuntu1", "libnvidia-compute-580=580.95.05-0ubuntu1",
            "nvidia-utils-580=580.95.05-0ubuntu1", "nvidia-compute-utils-580=580.95.05-0ubuntu1",
            "nvidia-dkms-580-open=580.95.05-0ubuntu1", "nvidia-fabricmanager=580.95.05-1",
            "libnvidia-nscq=580.95.05-1"} <= set(driver.install)
    assert ("nvlsm=2025.06.10-1" in driver.install) is nvlink5
    assert not [pin for pin in driver.install if pin.startswith(("nvidia-kernel-open-dkms", "nvidia-driver-cuda"))]
    assert driver.units == ("nvidia-persistenced", "nvidia-fabricmanager")
    assert driver.remove == purged
    assert driver_codes(node) == expected
    assert "DRIVER_LOCK_MISSING" not in {f.code for f in node.findings}


def test_the_fixes_name_the_ubuntu_lock_and_fabric_manager_at_the_driver_s_version():
    node = plan(facts("ubuntu2404-x86_64-b200.json", bare_hgx()), Config(driver_manage=True),
                LockFiles(root=str(ROOT)))
    fix = next(f for f in node.findings if f.code == "FABRIC_MANAGER_MISSING").fix
    assert "nvidia-fabricmanager=580.95.05-1" in fix
    assert driver_lock_name("580", "ubuntu2404", "x86_64") in " ".join(node.driver.changes)
    assert node.driver.headers == (f"linux-headers-{KERNEL}",)
