"""The driver layer's findings (bringup/plan/driver.py) on a scenario table: a healthy
node's ``driver_layer`` (docs/facts.md), one trap at a time, each cleared by changing its
fact back, and traps together."""

import pytest

from bringup.config import Config
from bringup.plan.driver import driver_layer_findings, requested_gpus
from bringup.findings import BLOCKER, FIX, WARNING
from tests.fixtures.facts.driver_layer.make import changed as apply
from tests.fixtures.facts.driver_layer.make import healthy_layer as healthy
from tests.fixtures.facts.driver_layer.make import hgx_layer, PROPRIETARY_BANNER
from tests.unit.scenarios import RTX_PRO, converged, gpus


def hgx(sm="10.0", name="NVIDIA B200"):
    """An 8-GPU NVSwitch node of GPUs ``name`` (make.hgx_layer) and its gpus facts."""
    return hgx_layer(), gpus(name, sm, 8)


def found(layer, node_gpus=None, settings=None):
    facts = dict(converged(), driver_layer=layer)
    if node_gpus is not None:
        facts["gpus"] = node_gpus
    out = []
    driver_layer_findings(facts, Config(**(settings or {})), out.append)
    return out


def codes(findings):
    return sorted(f"{finding.code}:{finding.severity}" for finding in findings)


def test_healthy_nodes_have_no_finding():
    assert found(healthy()) == []
    layer, node_gpus = hgx()
    assert found(layer, node_gpus) == []


@pytest.mark.parametrize("layer", [None, {}], ids=["null", "empty"])
def test_an_older_report_says_nothing(layer):
    assert found(layer) == []


HGX, HGX_GPUS = hgx()
H100, H100_GPUS = hgx("9.0", "NVIDIA H100 80GB HBM3")

# name, the trap (path, value), the node's gpus (None: the RTX PRO 6000s), settings, exact findings
TRAPS = [
    ("proprietary module loaded on blackwell", [(("module", "flavour"), "proprietary"),
                                                (("module", "banner"), PROPRIETARY_BANNER)],
     None, {}, ["DRIVER_OPEN_MODULE_REQUIRED:blocker"]),
    ("proprietary module installed for the next boot", [(("installed_module", "flavour"), "proprietary"),
                                                        (("installed_module", "license"), "NVIDIA")],
     None, {}, ["DRIVER_OPEN_MODULE_REQUIRED:blocker"]),
    ("library moved past the module", [(("nvml_libraries",), ["580.105.08"])], None, {},
     ["DRIVER_LIBRARY_MISMATCH:blocker"]),
    ("nouveau loaded and blacklisted", [(("nouveau", "loaded"), True)], None, {}, ["NOUVEAU_LOADED:blocker"]),
    ("nouveau not blacklisted", [(("nouveau", "blacklisted"), False)], None, {}, ["NOUVEAU_NOT_BLACKLISTED:warning"]),
    ("driver not held", [(("packages", 0, "held"), False)], None, {}, ["DRIVER_NOT_HELD:warning"]),
    ("persistence off", [(("gpus", 3, "persistence_mode"), "Disabled")], None, {}, ["PERSISTENCE_OFF:warning"]),
    ("dkms not built, module loaded", [(("dkms", 0, "status"), "added")], None, {}, ["DKMS_NOT_BUILT:warning"]),
    ("dkms not built, no module", [(("dkms", 0, "kernel"), "6.1.0-27-amd64"), (("module",), {"loaded": False,
     "version": None, "flavour": None, "banner": None})], None, {}, ["DKMS_NOT_BUILT:blocker"]),
    ("headers missing, module loaded", [(("kernel", "headers"), False)], None, {}, ["KERNEL_HEADERS_MISSING:warning"]),
    ("reboot pending for the driver", [(("reboot_required",), {"required": True, "packages": ["libnvidia-compute",
                                                                                              "libc6"]})],
     None, {}, ["REBOOT_PENDING:warning"]),
    ("acs redirect on a pcie node", [(("acs", 0, "redirect"), True),
                                     (("acs", 0, "ctl"), "SrcValid+ ReqRedir+ CmpltRedir+")],
     None, {}, ["P2P_ACS_REDIRECT:warning"]),
    ("iommu translation on a pcie node", [(("iommu_args",), ["intel_iommu=on"])], None, {}, ["P2P_IOMMU:warning"]),
    ("mig on one gpu", [(("gpus", 7, "mig_mode"), "Enabled")], None, {"service_args": "--tp 4"},
     ["MIG_ENABLED:warning"]),
    ("mig on one gpu, tp 8", [(("gpus", 7, "mig_mode"), "Enabled")], None, {"service_args": "--tp-size 8"},
     ["MIG_ENABLED:blocker"]),
    ("mig on one gpu, tp 4 x dp 2", [(("gpus", 7, "mig_mode"), "Enabled")], None,
     {"service_args": "--tp=4 --data-parallel-size 2"}, ["MIG_ENABLED:blocker"]),
]
NVSWITCH_TRAPS = [
    ("fabric manager missing", HGX, HGX_GPUS, [(("packages",), HGX["packages"][:2] + HGX["packages"][3:]),
                                              (("units", "nvidia-fabricmanager", "load_state"), "not-found")],
     ["FABRIC_MANAGER_MISSING:blocker"]),
    ("fabric manager at another version", HGX, HGX_GPUS, [(("packages", 2, "version"), "580.82.07-1")],
     ["FABRIC_MANAGER_VERSION:blocker"]),
    ("fabric manager inactive", HGX, HGX_GPUS, [(("units", "nvidia-fabricmanager", "active_state"), "failed")],
     ["FABRIC_MANAGER_INACTIVE:blocker"]),
    ("nvlsm missing on nvlink5", HGX, HGX_GPUS, [(("packages",), HGX["packages"][:3]),
                                                 (("units", "nvlsm", "load_state"), "not-found")],
     ["NVLSM_MISSING:blocker"]),
    ("fabric in progress", HGX, HGX_GPUS, [(("gpus", 2, "fabric_state"), "In Progress")],
     ["FABRIC_NOT_READY:blocker"]),
]


@pytest.mark.parametrize("name,changes,node_gpus,settings,expected", TRAPS, ids=[t[0] for t in TRAPS])
def test_each_trap_alone(name, changes, node_gpus, settings, expected):
    result = found(apply(healthy(), changes), node_gpus, settings)
    assert codes(result) == expected, [finding.message for finding in result]
    assert found(healthy(), node_gpus, settings) == [], "the healthy node with the same settings says nothing"
    for finding in result:
        assert finding.fix and finding.message


@pytest.mark.parametrize("name,base,node_gpus,changes,expected", NVSWITCH_TRAPS, ids=[t[0] for t in NVSWITCH_TRAPS])
def test_each_nvswitch_trap_alone(name, base, node_gpus, changes, expected):
    assert codes(found(apply(base, changes), node_gpus)) == expected
    assert found(base, node_gpus) == []


def test_a_gpu_without_a_fabric_state_is_not_waiting():
    """A100s under NVSwitches report no fabric state ("N/A"): nothing to wait for."""
    a100 = apply(H100, [(("gpus", i, "fabric_state"), "N/A") for i in range(8)])
    assert found(a100, gpus("NVIDIA A100-SXM4-80GB", "8.0", 8)) == []


def test_nvlsm_is_not_asked_of_hopper():
    layer = apply(H100, [(("packages",), H100["packages"][:3]), (("units", "nvlsm", "load_state"), "not-found")])
    assert found(layer, H100_GPUS) == []


def test_the_fabric_rules_need_nvswitches():
    layer = apply(HGX, [(("nvswitch_count",), 0), (("packages",), HGX["packages"][:2]),
                        (("units", "nvidia-fabricmanager", "load_state"), "not-found"),
                        (("gpus", 0, "fabric_state"), "Not Started")])
    assert found(layer, HGX_GPUS) == []


@pytest.mark.parametrize("changes", [
    [(("acs", 0, "redirect"), True), (("iommu_args",), ["amd_iommu=on"])],
], ids=["acs and iommu"])
def test_p2p_rules_are_for_pcie_multi_gpu_nodes_only(changes):
    pcie = apply(healthy(), changes)
    assert codes(found(pcie)) == ["P2P_ACS_REDIRECT:warning", "P2P_IOMMU:warning"]
    one_gpu = apply(healthy(1), changes)
    assert found(one_gpu, gpus(RTX_PRO, "12.0", 1)) == []
    nvlink = apply(HGX, changes)
    assert found(nvlink, HGX_GPUS) == []
    passthrough = apply(pcie, [(("iommu_args",), ["amd_iommu=on", "iommu=pt"])])
    assert codes(found(passthrough)) == ["P2P_ACS_REDIRECT:warning"]


def test_open_module_needs_a_blackwell_gpu():
    layer = apply(healthy(), [(("module", "flavour"), "proprietary")])
    assert found(layer, gpus("NVIDIA H100 80GB HBM3", "9.0", 8)) == []
    assert codes(found(layer, gpus("NVIDIA B200", "10.0", 8))) == ["DRIVER_OPEN_MODULE_REQUIRED:blocker"]


def test_open_module_on_blackwell_that_lists_no_gpu_is_known_from_target_sms():
    """The proprietary module on Blackwell: nvidia-smi lists no GPU, target_sms say what the node has."""
    layer = apply(healthy(), [(("module", "flavour"), "proprietary"), (("gpus",), [])])
    assert found(layer, []) == []
    result = found(layer, [], {"target_sms": ["12.0"]})
    assert codes(result) == ["DRIVER_OPEN_MODULE_REQUIRED:blocker"]


def test_fixes_name_the_command():
    by_code = {finding.code: finding for finding in found(apply(healthy(), [
        (("module", "flavour"), "proprietary"), (("nvml_libraries",), ["580.105.08"]),
        (("installed_module", "version"), "580.105.08"), (("packages", 1, "held"), False), (("gpus", 0, "persistence_mode"), "Disabled"),
        (("acs", 0, "redirect"), True), (("gpus", 1, "mig_mode"), "Enabled")]), settings={"service_args": "--tp 8"})}
    assert "apt-get install --autoremove --purge nvidia-open`" in by_code["DRIVER_OPEN_MODULE_REQUIRED"].fix
    assert "reboot" in by_code["DRIVER_LIBRARY_MISMATCH"].fix and "modprobe -r" in by_code["DRIVER_LIBRARY_MISMATCH"].fix
    assert "580.105.08" in by_code["DRIVER_LIBRARY_MISMATCH"].message
    assert "apt-mark hold libnvidia-compute" in by_code["DRIVER_NOT_HELD"].fix
    assert "systemctl enable --now nvidia-persistenced" in by_code["PERSISTENCE_OFF"].fix
    fix = by_code["P2P_ACS_REDIRECT"].fix
    assert "iommu=pt" in fix and "setpci -s 0000:16:00.0" in fix
    assert "NCCL_P2P_DISABLE=1" in fix and "--disable-custom-all-reduce" in fix and "costs" in fix
    assert "nvidia-smi -i 1 -mig 0" in by_code["MIG_ENABLED"].fix
    fm = found(apply(HGX, [(("packages", 2, "version"), "580.82.07-1")]), HGX_GPUS)[0]
    assert "nvidia-fabricmanager=580.95.05*" in fm.fix and "580.82.07" in fm.message


def test_traps_together():
    layer = apply(healthy(), [(("module", "flavour"), "proprietary"), (("nvml_libraries",), ["580.105.08"]),
                              (("nouveau",), {"loaded": True, "blacklisted": False}),
                              (("packages", 0, "held"), False), (("gpus", 0, "persistence_mode"), "Disabled"),
                              (("kernel", "headers"), False), (("dkms", 0, "status"), "added"),
                              (("reboot_required",), {"required": True, "packages": ["nvidia-open"]}),
                              (("acs", 0, "redirect"), True), (("iommu_args",), ["intel_iommu=on"]),
                              (("gpus", 5, "mig_mode"), "Enabled")])
    assert codes(found(layer, settings={"service_args": "--tp 8"})) == sorted([
        "DRIVER_OPEN_MODULE_REQUIRED:blocker", "DRIVER_LIBRARY_MISMATCH:blocker", "NOUVEAU_LOADED:blocker",
        "NOUVEAU_NOT_BLACKLISTED:warning", "DRIVER_NOT_HELD:warning", "PERSISTENCE_OFF:warning", "DKMS_NOT_BUILT:warning",
        "KERNEL_HEADERS_MISSING:warning", "REBOOT_PENDING:warning", "P2P_ACS_REDIRECT:warning", "P2P_IOMMU:warning",
        "MIG_ENABLED:blocker"])
    fabric = apply(HGX, [(("packages", 2, "version"), "580.82.07-1"), (("packages",), HGX["packages"][:3]),
                         (("units", "nvlsm", "load_state"), "not-found"), (("gpus", 0, "fabric_state"), "Not Started")])
    fabric = apply(fabric, [(("packages", 2, "version"), "580.82.07-1")])
    assert codes(found(fabric, HGX_GPUS)) == ["FABRIC_MANAGER_VERSION:blocker", "FABRIC_NOT_READY:blocker",
                                              "NVLSM_MISSING:blocker"]


@pytest.mark.parametrize("args,expected", [
    ("", 1), ("--tp 8", 8), ("--tp-size=2 --dp-size 2", 4), ("--tensor-parallel-size 4 --dp 2", 8),
    ("--tp 2 --tp 4", 4), ("--tp nonsense", 1), ("--model-path x --port 30000", 1),
])
def test_requested_gpus(args, expected):
    assert requested_gpus(args) == expected


def test_severities_are_the_documented_ones():
    assert {BLOCKER, FIX, WARNING} >= {finding.severity for finding in found(apply(healthy(), [
        (("nouveau", "blacklisted"), False)]))}


def test_a_mismatch_a_reboot_cannot_cure_says_so():
    """User space moved, the installed module did not: a reboot loads the old module again."""
    moved = apply(healthy(), [(("nvml_libraries",), ["580.105.08"])])
    assert "reboot, which loads the installed module" not in found(moved)[0].fix
    assert "not the user space's version" in found(moved)[0].fix
    both = apply(moved, [(("installed_module", "version"), "580.105.08")])
    assert "reboot, which loads the installed module (580.105.08)" in found(both)[0].fix
    unknown = apply(moved, [(("installed_module",), None)])
    assert "modprobe -r" in found(unknown)[0].fix


def test_the_open_module_switch_is_the_distributions():
    """NVIDIA's guide switches flavours with nvidia-open on Debian, and nvidia-driver-open beside it on Ubuntu."""
    layer = apply(healthy(), [(("module", "flavour"), "proprietary")])
    debian = found(layer)[0].fix
    facts = dict(converged(), os={"id": "ubuntu", "version_id": "24.04", "arch": "x86_64"}, driver_layer=layer)
    ubuntu = []
    driver_layer_findings(facts, Config(), ubuntu.append)
    assert "`apt-get install --autoremove --purge nvidia-open`" in debian
    assert "`apt-get install --autoremove --purge nvidia-open nvidia-driver-open`" in ubuntu[0].fix


@pytest.mark.parametrize("name, version", [("nvidia-cuda-toolkit", "11.8.89~11.8.0-5~deb12u1"),
                                           ("nvidia-cuda-dev", "11.8.89~11.8.0-5~deb12u1"),
                                           ("libnvidia-ml-dev", "11.8.86~11.8.0-5~deb12u1"),
                                           ("nvidia-profiler", "11.8.87~11.8.0-5~deb12u1"),
                                           ("nvidia-openjdk-8-jre", "9.+8u342-b07-1~deb12u1")])
def test_the_distributions_toolkit_is_not_the_driver(name, version):
    """Debian's nvidia-cuda-toolkit family matches the probe's nvidia-*/libnvidia-* patterns:
    unheld, it is no DRIVER_NOT_HELD; its version is no user-space driver version (with no
    NVML library file, a toolkit's 11.8 would read as a library mismatch)."""
    layer = healthy()
    layer["packages"] = [*layer["packages"], {"name": name, "version": version, "held": False}]
    assert found(layer) == []
    layer["nvml_libraries"] = []
    assert "DRIVER_LIBRARY_MISMATCH" not in codes(found(layer))


def test_a_node_without_nvidia_needs_no_nouveau_blacklist():
    """No GPU listed, no module, no driver package: nothing to keep nouveau off (a GPU-less
    builder); the same node with a GPU listed is told."""
    layer = healthy()
    layer["nouveau"]["blacklisted"] = False
    layer["module"] = {"loaded": False, "version": None, "flavour": None, "banner": None}
    layer["installed_module"] = None
    layer["packages"] = []
    assert "NOUVEAU_NOT_BLACKLISTED" not in codes(found(layer, node_gpus=[]))
    assert "NOUVEAU_NOT_BLACKLISTED:warning" in codes(found(layer))
