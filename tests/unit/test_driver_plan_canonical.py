"""Canonical's NVIDIA driver on Ubuntu (``ubuntu-drivers install [--gpgpu]``), table-driven:
the recorded Ubuntu 24.04 B200 facts (tests/fixtures/facts/ubuntu2404-x86_64-b200.json) with a
driver layer holding Canonical's packages in each shape (bringup/canonical_driver.py), planned
with and without ``driver_manage`` against the shipped lock
(files/locks/driver-580-ubuntu2404-x86_64.txt): DRIVER_CANONICAL names it; the plan adopts it
(nothing installed, Canonical's held) or replaces it (Canonical's purged in the apt run that
installs NVIDIA's locked packages), and never leaves both."""

import copy
import json
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.driver_locks import driver_lock_name, parse_driver_lock
from bringup.locks import LockFiles
from bringup.plan import plan
from bringup.plan.driver_step import blacklist_pattern
from tests.fixtures.facts.driver_layer.make import PROPRIETARY_BANNER, changed, hgx_layer, healthy_layer

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts"
KERNEL = "6.8.0-84-generic"
LOCK = parse_driver_lock((ROOT / driver_lock_name("580", "ubuntu2404", "x86_64")).read_text())
NOBLE = "0ubuntu0.24.04.2"


def packages(names, version):
    return [{"name": name, "version": version, "held": False} for name in names]


def server_open(version="580.95.05", branch="580"):
    """``ubuntu-drivers install --gpgpu`` on a kernel flavour without prebuilt modules: DKMS."""
    return packages([f"nvidia-driver-{branch}-server-open", f"libnvidia-compute-{branch}-server",
                     f"nvidia-utils-{branch}-server", f"nvidia-compute-utils-{branch}-server",
                     f"nvidia-kernel-common-{branch}-server", f"nvidia-dkms-{branch}-server-open",
                     f"nvidia-kernel-source-{branch}-server-open"], f"{version}-{NOBLE}")


def server_proprietary(version="580.95.05"):
    return packages(["nvidia-driver-580-server", "libnvidia-compute-580-server", "nvidia-utils-580-server",
                     "nvidia-kernel-common-580-server", "nvidia-dkms-580-server"], f"{version}-{NOBLE}")


def server_prebuilt(version="580.95.05"):
    """``ubuntu-drivers install --gpgpu`` on the generic kernel: Canonical's signed modules."""
    user = packages(["nvidia-headless-no-dkms-580-server-open", "libnvidia-compute-580-server",
                     "nvidia-utils-580-server", "nvidia-kernel-common-580-server"], f"{version}-{NOBLE}")
    return user + packages(["linux-modules-nvidia-580-server-open-generic",
                            f"linux-modules-nvidia-580-server-open-{KERNEL}",
                            f"linux-objects-nvidia-580-server-open-{KERNEL}"], "6.8.0-84.84")


def desktop_open(version="580.95.05"):
    """``ubuntu-drivers install``: the desktop series, under NVIDIA's own Ubuntu names at Canonical's revision."""
    return packages(["nvidia-driver-580-open", "libnvidia-compute-580", "nvidia-utils-580", "nvidia-compute-utils-580",
                     "nvidia-kernel-common-580", "nvidia-dkms-580-open", "libnvidia-gl-580"], f"{version}-{NOBLE}")


def layer(found, version="580.95.05", flavour="open", hgx=False):
    base = hgx_layer() if hgx else healthy_layer()
    changes = [(("kernel",), {"release": KERNEL, "headers": True,
                              "installed": [{"release": KERNEL, "headers": True, "initramfs": "current"}]}),
               (("module", "version"), version), (("installed_module", "version"), version),
               (("nvml_libraries",), [version]), (("module", "flavour"), flavour),
               (("dkms",), [{"module": "nvidia", "version": version, "kernel": KERNEL, "status": "installed"}])]
    if flavour == "proprietary":
        changes += [(("module", "banner"), PROPRIETARY_BANNER.replace("580.95.05", version)),
                    (("installed_module", "flavour"), "proprietary"), (("installed_module", "license"), "NVIDIA")]
    found_layer = changed(base, changes)
    kept = [package for package in found_layer["packages"] if "fabricmanager" in package["name"]
            or package["name"] == "nvlsm"]
    found_layer["packages"] = sorted(found + kept, key=lambda package: package["name"])
    return found_layer


def facts(driver_layer):
    return dict(json.loads((FACTS / "ubuntu2404-x86_64-b200.json").read_text()), driver_layer=driver_layer)


OPEN = LOCK.pins("pinning", "open")
# id, the driver layer, the plan's canonical choice, what is purged (the Canonical part), DRIVER_CANONICAL's severity
SCENARIOS = [
    ("580-server-open by DKMS at the lock's version: adopted", lambda: layer(server_open()), "adopt", (), "info"),
    ("580-server-open at another version: replaced", lambda: layer(server_open("580.105.08"), "580.105.08"),
     "replace", tuple(sorted(p["name"] for p in server_open())), "fix"),
    ("580-server proprietary on Blackwell: replaced", lambda: layer(server_proprietary(), flavour="proprietary"),
     "replace", tuple(sorted(p["name"] for p in server_proprietary())), "fix"),
    ("570-server-open, another branch: replaced", lambda: layer(server_open("570.195.03", "570"), "570.195.03"),
     "replace", tuple(sorted(p["name"] for p in server_open("570.195.03", "570"))), "fix"),
    # Signed for Secure Boot by Canonical: not replaced by a DKMS module no key signs (blocker).
    ("580-server-open prebuilt linux-modules: refused", lambda: layer(server_prebuilt()), "replace",
     tuple(sorted(p["name"] for p in server_prebuilt())), "blocker"),
    ("580-open desktop series at the lock's version: adopted", lambda: layer(desktop_open()), "adopt", (), "info"),
    ("580-open desktop series at another version: replaced", lambda: layer(desktop_open("580.82.09"), "580.82.09"),
     "replace", ("libnvidia-gl-580", "nvidia-driver-580-open"), "fix"),
    ("580-server-open on an NVSwitch node: replaced", lambda: layer(server_open(), hgx=True), "replace",
     tuple(sorted(p["name"] for p in server_open())), "fix"),
]


def canonical_findings(node):
    return [f for f in node.findings if f.code == "DRIVER_CANONICAL"]


@pytest.mark.parametrize("make, choice, purged, severity", [row[1:] for row in SCENARIOS],
                         ids=[row[0] for row in SCENARIOS])
def test_canonical_s_driver_is_adopted_or_replaced_never_kept_beside_nvidia_s(make, choice, purged, severity):
    found = make()
    node = plan(copy.deepcopy(facts(found)), Config(driver_manage=True), LockFiles(root=str(ROOT)))
    driver = node.driver
    assert driver.canonical == choice, driver.canonical_reason
    [finding] = canonical_findings(node)
    assert finding.severity == severity
    canonical = {pin.split("=")[0] for pin in driver.canonical_packages}
    installing = {pin.split("=")[0] for pin in driver.install}
    assert not installing & set(driver.remove), "apt cannot install and purge one package"
    if choice == "adopt":
        assert driver.install == () and driver.remove == ()
        assert set(driver.hold) == canonical and "deploy adopts it" in finding.fix
        assert not driver.reboot_for and "DRIVER_REBOOT_NEEDED" not in {f.code for f in node.findings}
        assert all(f"^{blacklist_pattern(name)}$" in driver.unattended for name in canonical)
    else:
        # Every Canonical package is purged, or moved to NVIDIA's version under the same name.
        assert canonical <= set(driver.remove) | installing
        assert tuple(name for name in driver.remove if name in canonical) == purged
        assert {f"{name}={version}" for name, version in OPEN.items()} <= set(driver.install)
        assert set(driver.hold) == set(LOCK.pins(*driver_roles(driver)))
        assert any(change.startswith("replace Canonical's NVIDIA driver") for change in driver.changes)
        if severity == "blocker":
            assert "prebuilt, signed" in finding.fix and "mokutil --import" in finding.fix and not node.ok
        else:
            assert driver.canonical_reason in finding.fix and "purges" in finding.fix
    assert "DRIVER_LOCK_MISSING" not in {f.code for f in node.findings}


def driver_roles(driver):
    return ("pinning", "open") + (("fabric", "nvlink5") if "nvidia-fabricmanager" in " ".join(driver.install) else ())


@pytest.mark.parametrize("make", [row[1] for row in SCENARIOS], ids=[row[0] for row in SCENARIOS])
def test_without_driver_manage_canonical_s_driver_is_named_and_left_alone(make):
    node = plan(copy.deepcopy(facts(make())), Config(), LockFiles(root=str(ROOT)))
    [finding] = canonical_findings(node)
    assert finding.severity == "info" and "driver_manage: false (the default) leaves it as it is" in finding.fix
    assert node.driver.manage is False and node.driver.install == () and node.driver.remove == ()


def test_the_finding_names_series_flavour_and_module_source():
    [finding] = canonical_findings(plan(facts(layer(server_prebuilt())), Config(), LockFiles(root=str(ROOT))))
    assert "the 580-server series (ubuntu-drivers --gpgpu), open kernel module, Canonical's prebuilt, signed " \
           "modules (linux-modules-nvidia-580-server-open-6.8.0-84-generic, " \
           "linux-modules-nvidia-580-server-open-generic)" in finding.message
    assert f"libnvidia-compute-580-server=580.95.05-{NOBLE}" in finding.message
    [finding] = canonical_findings(plan(facts(layer(server_proprietary(), flavour="proprietary")), Config(),
                                        LockFiles(root=str(ROOT))))
    assert "proprietary kernel module, built by DKMS (nvidia-dkms-580-server)" in finding.message


def test_nvidia_s_own_packages_are_not_canonical_s():
    node = plan(facts(layer([{"name": name, "version": version, "held": True} for name, version in OPEN.items()])),
                Config(driver_manage=True), LockFiles(root=str(ROOT)))
    assert canonical_findings(node) == [] and node.driver.canonical == ""


def test_the_recorded_ubuntu_drivers_node():
    """The facts validate recorded on a sandbox node in the ubuntu-drivers field state
    (tests/fixtures/facts/ubuntu2404-x86_64-rtx-pro-6000-ubuntu-drivers.json): prebuilt
    modules for its kernel, so driver_manage replaces them; without it, an info only."""
    recorded = json.loads((FACTS / "ubuntu2404-x86_64-rtx-pro-6000-ubuntu-drivers.json").read_text())
    [left] = canonical_findings(plan(copy.deepcopy(recorded), Config(), LockFiles(root=str(ROOT))))
    assert left.severity == "info" and "0ubuntu0.24.04.2" in left.message
    node = plan(recorded, Config(driver_manage=True), LockFiles(root=str(ROOT)))
    assert node.driver.canonical == "replace" and "prebuilt" in node.driver.canonical_reason
    assert "linux-modules-nvidia-580-server-open-generic" in node.driver.remove
    assert not {pin.split("=")[0] for pin in node.driver.install} & set(node.driver.remove)


@pytest.mark.parametrize("make, held_at", [(lambda: layer(server_open()), "at their versions (Canonical's driver, adopted)"),
                                           (lambda: layer(server_open("580.82.07"), "580.82.07"),
                                            "at the lock's versions")],
                         ids=["adopted", "replaced"])
def test_the_holds_fix_says_at_which_versions_the_driver_is_held(make, held_at):
    """An adopted driver is held at Canonical's own versions (580.95.05-0ubuntu0.24.04.2), not
    the lock's (580.95.05-0ubuntu1): DRIVER_NOT_HELD's fix must not promise the lock's."""
    node = plan(copy.deepcopy(facts(make())), Config(driver_manage=True), LockFiles(root=str(ROOT)))
    [held] = [f for f in node.findings if f.code == "DRIVER_NOT_HELD"]
    assert held.severity == "fix" and f"{' '.join(node.driver.hold)} {held_at} and keeps" in held.fix, held.fix
