"""The driver layer's traps on sandbox nodes in the driver states
(sandbox/field_states.py; stand-ins for the driver only): each shown by the real
``pyinfra ... validate.py`` with its code, severity, exit status and fix line, then
cleared by changing that state on the node, as an operator would, and validated again.

Three light nodes: the PCIe Blackwell node carries five traps at once (none masks
another), the HGX nodes one Fabric Manager state each (the fabric states mask one
another: a Fabric Manager at another version is never "inactive")."""

import pytest

from bringup.findings import BLOCKER, WARNING
from tests.cli.test_driver_layer_cli import DRIVER_CODES
from tests.sandbox_fixtures import run_ssh, validate

pytestmark = pytest.mark.sandbox

GPU_DATA = "/usr/share/sandbox-gpu"
BANNER = "/proc/driver/nvidia/version"
FM_AT_DRIVER = "/var/cache/sandbox-gpu/nvidia-fabricmanager_580.95.05-1.deb"


def driver_findings(report):
    """{code: finding} of the driver layer's findings in a validate report."""
    return {f["code"]: f for f in report["plan"]["findings"] if f["code"] in DRIVER_CODES}


def severities(report):
    return {code: finding["severity"] for code, finding in driver_findings(report).items()}


def refused_line(result):
    return next(line for line in result.output.splitlines() if "validate refused, nothing changed" in line)


@pytest.fixture(scope="module")
def pcie_node(sandbox_node):
    """8x RTX PRO 6000 (Blackwell, PCIe): the proprietary module loaded, user space at
    580.105.08 under a 580.95.05 module, nouveau loaded, MIG on GPU 0, ACS redirect on the
    root ports above the GPUs."""
    entry = sandbox_node("drv-pcie", "127.0.0.161", gpu="rtx-pro-6000-x8", toolkit="none",
                         states=("proprietary-module", "library-mismatch", "nouveau-loaded", "mig-on", "acs-redirect"))
    return dict(entry, name="drv-pcie")


@pytest.fixture(scope="module")
def fm_inactive_node(sandbox_node):
    entry = sandbox_node("drv-fm-off", "127.0.0.162", gpu="h100-x8", toolkit="none", states=("nvswitch-fm-inactive",))
    return dict(entry, name="drv-fm-off")


@pytest.fixture(scope="module")
def fm_version_node(sandbox_node):
    entry = sandbox_node("drv-fm-ver", "127.0.0.163", gpu="h100-x8", toolkit="none",
                         states=("nvswitch-fm-other-version",))
    return dict(entry, name="drv-fm-ver")


def test_five_traps_on_one_node_each_cleared(pcie_node):
    result, report = validate(pcie_node["name"], expect_rc=1)
    found = driver_findings(report)
    assert severities(report) == {"DRIVER_OPEN_MODULE_REQUIRED": BLOCKER, "DRIVER_LIBRARY_MISMATCH": BLOCKER,
                                  "NOUVEAU_LOADED": BLOCKER, "MIG_ENABLED": WARNING, "P2P_ACS_REDIRECT": WARNING}, \
        report["plan"]["findings"]
    assert "apt-get install --autoremove --purge nvidia-open" in found["DRIVER_OPEN_MODULE_REQUIRED"]["fix"]
    refused = refused_line(result)
    assert "580.95.05" in found["DRIVER_LIBRARY_MISMATCH"]["message"]
    assert "580.105.08" in found["DRIVER_LIBRARY_MISMATCH"]["message"]
    assert "modprobe -r nvidia_uvm" in found["DRIVER_LIBRARY_MISMATCH"]["fix"]
    assert "blacklist nouveau" in found["NOUVEAU_LOADED"]["fix"]
    assert "nvidia-smi -i 0 -mig 0" in found["MIG_ENABLED"]["fix"]
    # The node's real lspci (pciutils from Debian's archive) read the stand-in's config spaces.
    assert "on 8 bridge(s)" in found["P2P_ACS_REDIRECT"]["message"]
    assert "0000:17:01.1 above GPU 0000:18:00.0" in found["P2P_ACS_REDIRECT"]["message"]
    assert "ECAP_ACS+6.w=0000" in found["P2P_ACS_REDIRECT"]["fix"]
    assert "NCCL_P2P_DISABLE=1" in found["P2P_ACS_REDIRECT"]["fix"]
    assert "--disable-custom-all-reduce" in found["P2P_ACS_REDIRECT"]["fix"]
    assert "P2P_ACS_REDIRECT" not in refused
    assert all(code in refused for code in ("DRIVER_OPEN_MODULE_REQUIRED", "DRIVER_LIBRARY_MISMATCH",
                                            "NOUVEAU_LOADED")), refused
    layer = report["facts"]["driver_layer"]
    assert layer["module"]["flavour"] == "proprietary" and layer["nvml_libraries"] == ["580.105.08"]
    assert {"name": "libnvidia-compute-580", "version": "580.105.08-0ubuntu1", "held": True} in layer["packages"]
    # No driver daemon on this node: the unit is the one every node had.
    assert report["plan"]["service"]["after_units"] == []
    # The PCI stand-in (node-init.sh): the profile's eight GPUs on the node's bus, the host's
    # devices hidden; and the sandbox's declaration said in the report.
    assert [(gpu["bus_id"], gpu["device"]) for gpu in report["facts"]["pci_gpus"]] == \
        [(f"0000:{0x18 + 0x10 * index:02x}:00.0", "2bb5") for index in range(8)]
    assert "GPU_STANDIN" in [f["code"] for f in report["plan"]["findings"] if f["severity"] == "info"]

    # The open module at the same version (flavours switched, rebooted), nouveau unloaded, MIG off:
    # the mismatch stays, alone.
    run_ssh(pcie_node, f"cp {GPU_DATA}/proc-version-open {BANNER} && rm -r /sys/module/nouveau && "
                       "nvidia-smi -i 0 -mig 0")
    result, report = validate(pcie_node["name"], expect_rc=1)
    assert severities(report) == {"DRIVER_LIBRARY_MISMATCH": BLOCKER, "P2P_ACS_REDIRECT": WARNING}, \
        report["plan"]["findings"]
    assert report["facts"]["driver_layer"]["module"]["flavour"] == "open"

    # Rebooted into the installed user space's module: the ACS warning alone, validate passes.
    run_ssh(pcie_node, f"sed 's/580.95.05/580.105.08/' {GPU_DATA}/proc-version-open > {BANNER}")
    result, report = validate(pcie_node["name"])
    assert severities(report) == {"P2P_ACS_REDIRECT": WARNING}, report["plan"]["findings"]
    assert report["facts"]["driver_layer"]["module"]["version"] == "580.105.08"

    # ACS cleared on every bridge as NCCL's troubleshooting guide does (BIOS or kernel arguments
    # leave the same bits after a reboot): nothing left.
    run_ssh(pcie_node, "for bdf in $(lspci -D -d ::0604 | cut -d' ' -f1); do setpci -s $bdf ECAP_ACS+6.w=0000; done")
    result, report = validate(pcie_node["name"])
    assert severities(report) == {}, report["plan"]["findings"]
    assert {entry["redirect"] for entry in report["facts"]["driver_layer"]["acs"]} == {False}


def test_fabric_manager_inactive_then_started(fm_inactive_node):
    result, report = validate(fm_inactive_node["name"], expect_rc=1)
    found = driver_findings(report)
    assert severities(report) == {"FABRIC_MANAGER_INACTIVE": BLOCKER, "FABRIC_NOT_READY": BLOCKER}, \
        report["plan"]["findings"]
    assert "systemctl enable --now nvidia-fabricmanager" in found["FABRIC_MANAGER_INACTIVE"]["fix"]
    assert "In Progress" in found["FABRIC_NOT_READY"]["message"]
    assert "FABRIC_MANAGER_INACTIVE" in refused_line(result)
    layer = report["facts"]["driver_layer"]
    assert layer["nvswitch_count"] == 4
    assert layer["units"]["nvidia-fabricmanager"]["load_state"] == "loaded"
    assert layer["units"]["nvidia-fabricmanager"]["active_state"] == "inactive"
    # The node has Fabric Manager's unit: the SGLang unit starts after it (and no nvidia-persistenced).
    assert report["plan"]["service"]["after_units"] == ["nvidia-fabricmanager.service"]

    run_ssh(fm_inactive_node, "systemctl enable --now nvidia-fabricmanager")
    result, report = validate(fm_inactive_node["name"])
    assert severities(report) == {}, report["plan"]["findings"]
    assert {gpu["fabric_state"] for gpu in report["facts"]["driver_layer"]["gpus"]} == {"Completed"}


def test_fabric_manager_at_another_version_then_fixed_then_removed(fm_version_node):
    # Its unit starts with the node, beside sshd: it has failed before validate looks.
    run_ssh(fm_version_node, "for i in $(seq 100); do systemctl is-failed --quiet nvidia-fabricmanager && exit 0; "
                             "sleep 0.1; done; exit 1")
    result, report = validate(fm_version_node["name"], expect_rc=1)
    found = driver_findings(report)
    assert severities(report) == {"FABRIC_MANAGER_VERSION": BLOCKER, "FABRIC_NOT_READY": BLOCKER}, \
        report["plan"]["findings"]
    assert "nvidia-fabricmanager 580.105.08-1" in found["FABRIC_MANAGER_VERSION"]["message"]
    assert "apt-get install 'nvidia-fabricmanager=580.95.05*'" in found["FABRIC_MANAGER_VERSION"]["fix"]
    assert "FABRIC_MANAGER_VERSION" in refused_line(result)
    assert report["facts"]["driver_layer"]["units"]["nvidia-fabricmanager"]["active_state"] == "failed"
    # The unit really ran and refused, in nv-fabricmanager's words (bringup.explain's signature).
    journal = run_ssh(fm_version_node, "journalctl -u nvidia-fabricmanager -o cat --no-pager").stdout
    assert ("fabric manager NVIDIA GPU driver interface version 580.105.08 don't match with driver version "
            "580.95.05") in journal

    # Fabric Manager at the driver's version, held again (dpkg -i drops the hold), restarted: nothing left.
    run_ssh(fm_version_node, f"dpkg -i --force-hold {FM_AT_DRIVER} && apt-mark hold nvidia-fabricmanager && "
                             "systemctl restart nvidia-fabricmanager")
    result, report = validate(fm_version_node["name"])
    assert severities(report) == {}, report["plan"]["findings"]

    # Removed (the nvswitch-no-fm state): missing, and the fabric waits again.
    run_ssh(fm_version_node, "systemctl disable --now nvidia-fabricmanager && "
                             "dpkg --purge --force-hold nvidia-fabricmanager && systemctl daemon-reload")
    result, report = validate(fm_version_node["name"], expect_rc=1)
    found = driver_findings(report)
    assert severities(report) == {"FABRIC_MANAGER_MISSING": BLOCKER, "FABRIC_NOT_READY": BLOCKER}, \
        report["plan"]["findings"]
    assert "apt-get install 'nvidia-fabricmanager=580.95.05*'" in found["FABRIC_MANAGER_MISSING"]["fix"]
    assert report["plan"]["service"]["after_units"] == []
