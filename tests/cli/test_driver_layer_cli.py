"""``python -m bringup.plan FACTS --config X`` on the driver layer's facts documents
(tests/fixtures/facts/driver_layer/): each trap's code, severity and fix line, the plan
refused for a blocker, and the same node with its healthy driver layer cleared."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.facts.driver_layer import make

ROOT = Path(__file__).resolve().parents[2]
DRIVER_CODES = {"DRIVER_OPEN_MODULE_REQUIRED", "DRIVER_LIBRARY_MISMATCH", "FABRIC_MANAGER_MISSING",
                "FABRIC_MANAGER_VERSION", "FABRIC_MANAGER_INACTIVE", "NVLSM_MISSING", "FABRIC_NOT_READY",
                "NOUVEAU_LOADED", "NOUVEAU_NOT_BLACKLISTED", "DRIVER_NOT_HELD", "PERSISTENCE_OFF", "DKMS_NOT_BUILT",
                "KERNEL_HEADERS_MISSING", "KERNEL_HEADERS_PENDING", "NOUVEAU_INITRAMFS_STALE", "REBOOT_PENDING", "P2P_ACS_REDIRECT", "P2P_IOMMU", "MIG_ENABLED"}

# file stem, settings, the driver layer's findings (code:severity, in the plan's order),
# a command its fix line names
SCENARIOS = [
    ("healthy-rtx-pro-6000", {}, [], None),
    ("healthy-b200-hgx", {}, [], None),
    ("proprietary-module", {}, ["DRIVER_OPEN_MODULE_REQUIRED:blocker"], "apt-get install --autoremove --purge nvidia-open`"),
    ("library-mismatch", {}, ["DRIVER_LIBRARY_MISMATCH:blocker"], "modprobe -r nvidia_uvm"),
    ("fabric-manager-missing", {}, ["FABRIC_MANAGER_MISSING:blocker", "FABRIC_NOT_READY:blocker"],
     "apt-get install 'nvidia-fabricmanager=580.95.05*'"),
    ("fabric-manager-version", {}, ["FABRIC_MANAGER_VERSION:blocker"], "apt-mark hold nvidia-fabricmanager"),
    ("fabric-manager-inactive", {}, ["FABRIC_MANAGER_INACTIVE:blocker"], "systemctl enable --now nvidia-fabricmanager"),
    ("nvlsm-missing", {}, ["NVLSM_MISSING:blocker"], "apt-get install nvlsm"),
    ("nouveau-loaded", {}, ["NOUVEAU_LOADED:blocker", "NOUVEAU_NOT_BLACKLISTED:warning"], "blacklist nouveau"),
    ("nouveau-not-blacklisted", {}, ["NOUVEAU_NOT_BLACKLISTED:warning"], "update-initramfs -u"),
    ("driver-not-held", {}, ["DRIVER_NOT_HELD:warning"], "apt-mark hold nvidia-open libnvidia-compute"),
    ("persistence-off", {}, ["PERSISTENCE_OFF:warning"], "systemctl enable --now nvidia-persistenced"),
    ("dkms-not-built", {}, ["DKMS_NOT_BUILT:warning"], "dkms autoinstall -k 6.12.48+deb13-amd64"),
    ("headers-missing", {}, ["KERNEL_HEADERS_MISSING:warning"], "apt-get install linux-headers-6.12.48+deb13-amd64"),
    ("headers-pending", {}, ["KERNEL_HEADERS_PENDING:warning"],
     "apt-get install linux-headers-6.12.57+deb13-amd64`, then `dkms autoinstall -k 6.12.57+deb13-amd64`"),
    ("nouveau-initramfs-stale", {}, ["NOUVEAU_INITRAMFS_STALE:warning"], "update-initramfs -u -k 6.12.48+deb13-amd64"),
    ("reboot-pending", {}, ["REBOOT_PENDING:warning"], "systemctl reboot"),
    ("acs-redirect", {}, ["P2P_ACS_REDIRECT:warning"], "NCCL_P2P_DISABLE=1"),
    ("iommu", {}, ["P2P_IOMMU:warning"], "iommu=pt"),
    ("mig", {"service_args": "--tp 4"}, ["MIG_ENABLED:warning"], "nvidia-smi -i 7 -mig 0"),
    ("mig", {"service_args": "--tp 8"}, ["MIG_ENABLED:blocker"], "nvidia-smi -i 7 -mig 0"),
    ("mig", {"service_args": "--tp-size 4 --dp-size 2"}, ["MIG_ENABLED:blocker"], "--dp-size"),
    ("together", {"service_args": "--tp 8"},
     ["DRIVER_OPEN_MODULE_REQUIRED:blocker", "DRIVER_LIBRARY_MISMATCH:blocker", "NOUVEAU_LOADED:blocker",
      "NOUVEAU_NOT_BLACKLISTED:warning", "DRIVER_NOT_HELD:warning", "PERSISTENCE_OFF:warning", "P2P_ACS_REDIRECT:warning",
      "P2P_IOMMU:warning", "MIG_ENABLED:blocker"], None),
    ("together-hgx", {}, ["FABRIC_MANAGER_VERSION:blocker", "NVLSM_MISSING:blocker", "FABRIC_NOT_READY:blocker"], None),
]


def plan_cli(facts_path, settings, tmp_path):
    config = tmp_path / "settings.yaml"
    config.write_text(json.dumps(settings))  # JSON is YAML
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(facts_path), "--config", str(config)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    return json.loads(result.stdout)


def driver_findings(printed):
    return [finding for finding in printed["findings"] if finding["code"] in DRIVER_CODES]


def test_the_documents_are_make_pys():
    """The committed documents are what make.py writes (rerun it after changing it)."""
    for stem in make.DOCUMENTS:
        path = make.HERE / f"{stem}.json"
        assert json.loads(path.read_text()) == make.document(stem), f"{path.name}: rerun make.py"


@pytest.mark.parametrize("stem,settings,expected,command", SCENARIOS,
                         ids=[f"{s[0]}{'-' + s[1]['service_args'].replace(' ', '') if s[1] else ''}" for s in SCENARIOS])
def test_trap_through_the_planner_cli(stem, settings, expected, command, tmp_path):
    printed = plan_cli(make.HERE / f"{stem}.json", settings, tmp_path)
    found = driver_findings(printed)
    assert [f"{finding['code']}:{finding['severity']}" for finding in found] == expected, found
    assert printed["ok"] is not any(item.endswith(":blocker") for item in expected)
    if command:
        assert any(command in finding["fix"] for finding in found), [finding["fix"] for finding in found]
    # Cleared: the same node with its healthy driver layer says nothing of the driver layer.
    base, healthy, _ = make.DOCUMENTS[stem]
    cleared = tmp_path / "cleared.json"
    cleared.write_text(json.dumps(dict(json.loads((make.FACTS / base).read_text()), driver_layer=healthy)))
    again = plan_cli(cleared, settings, tmp_path)
    assert driver_findings(again) == [] and again["ok"], driver_findings(again)


def test_a_report_without_the_driver_layer_says_nothing_new(tmp_path):
    """An older report (no driver_layer) plans as before."""
    for base in (make.RTX, make.B200):
        printed = plan_cli(make.FACTS / base, {}, tmp_path)
        assert driver_findings(printed) == [] and printed["ok"]
