"""The GPUs on the PCI bus (the facts' ``pci_gpus``, bringup/gpu_ids.py) in the plan: a node
whose nvidia-smi lists none but whose bus shows NVIDIA's is DRIVER_NOT_LOADED naming them
and built for their SMs, never NO_GPU; facts without ``pci_gpus`` are judged as before.
Scenario tables through ``plan()``, and ``python -m bringup.plan`` on a no-driver fixture."""

import json
import subprocess
import sys

import pytest

from bringup.config import Config
from bringup.gpu_ids import MODELS, bus_summary, gpu_model, pci_gpus_sms
from bringup.plan import plan
from bringup.plan.driver import driver_layer_findings
from tests.fixtures.facts.driver_layer.make import PROPRIETARY_BANNER, changed
from tests.fixtures.facts.driver_layer.make import healthy_layer
from tests.unit.scenarios import FIXTURES, RTX_PRO, converged, varied

NO_SMI = {"present": False, "error": "nvidia-smi not found"}
NO_DEVICES = {"present": True, "error": "No devices were found"}


def bus(device, count=1, class_="0302"):
    return [{"bus_id": f"0000:{0x18 + 0x10 * i:02x}:00.0", "vendor": "10de", "device": device, "class": class_}
            for i in range(count)]


def driverless(pci_gpus, smi=NO_SMI, **changes):
    """The converged RTX PRO node with nvidia-smi listing nothing, and ``pci_gpus`` (the
    key left out for ``...``: an older report)."""
    facts = varied(converged(), gpus=[], driver=None, nvidia_smi=smi, **changes)
    if pci_gpus is not ...:
        facts["pci_gpus"] = pci_gpus
    return facts


# name, facts, settings, blockers, arch_list, words in DRIVER_NOT_LOADED's message, words in its fix
SCENARIOS = [
    ("no driver, 8x rtx pro 6000 on the bus", driverless(bus("2bb5", 8)), {}, ["DRIVER_NOT_LOADED"], "12.0f",
     [f"8 NVIDIA GPU(s): 8x {RTX_PRO} (compute capability 12.0)", "nvidia-smi not found"],
     ["open kernel modules"]),
    ("a module that refuses 8x b200", driverless(bus("2901", 8), NO_DEVICES), {}, ["DRIVER_NOT_LOADED"], "10.0a",
     ["8x NVIDIA B200 (compute capability 10.0)", "No devices were found"], ["open kernel modules"]),
    ("no driver, gb10", driverless(bus("2e12")), {}, ["DRIVER_NOT_LOADED"], "12.1a",
     ["1x NVIDIA GB10 (compute capability 12.1)"], ["open kernel modules"]),
    ("no driver, h100", driverless(bus("2330", 8)), {}, ["DRIVER_NOT_LOADED"], "9.0a",
     ["8x NVIDIA H100 80GB HBM3"], ["its kernel module"]),
    ("no driver, b200 and rtx pro", driverless(bus("2901") + bus("2bb5")), {}, ["DRIVER_NOT_LOADED"],
     "10.0a 12.0f", ["2 NVIDIA GPU(s): 1x NVIDIA B200"], ["open kernel modules"]),
    ("no driver, an id the table does not know", driverless(bus("ffff")), {}, ["DRIVER_NOT_LOADED"], "",
     ["1x unknown NVIDIA device 10de:ffff"], ["its kernel module"]),
    # The bus wins over target_sms: a node with GPUs on it is no GPU-less image builder.
    ("gpus on the bus and target_sms", driverless(bus("2bb5", 8)), {"target_sms": ["9.0"]}, ["DRIVER_NOT_LOADED"],
     "12.0f", ["8x " + RTX_PRO], []),
    ("empty bus", driverless([]), {}, ["NO_GPU"], "", [], []),
    ("unreadable sysfs", driverless(None), {}, ["NO_GPU"], "", [], []),
    ("older report without pci_gpus", driverless(...), {}, ["NO_GPU"], "", [], []),
    ("older report, driver unreachable", driverless(..., {"present": True, "error": "couldn't communicate"}), {},
     ["DRIVER_NOT_LOADED"], "", ["nvidia-smi fails: couldn't communicate"], []),
    ("gpu-less builder, empty bus", driverless([]), {"target_sms": ["12.0"]}, [], "12.0f", [], []),
    ("listed by nvidia-smi and on the bus", varied(converged(), pci_gpus=bus("2bb5", 8)), {}, [], "12.0f", [], []),
]


@pytest.mark.parametrize("name,facts,settings,blockers,arch_list,message,fix", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_scenarios(name, facts, settings, blockers, arch_list, message, fix):
    node = plan(facts, Config.from_data(settings))
    assert sorted(set(node.codes("blocker"))) == blockers, node.findings
    assert node.arch_list == arch_list
    if "NO_GPU" not in blockers:
        assert "NO_GPU" not in node.codes("blocker")
    shown = [finding for finding in node.findings if finding.code == "DRIVER_NOT_LOADED"]
    assert len(shown) == (1 if "DRIVER_NOT_LOADED" in blockers else 0), node.findings
    for words in message:
        assert words in shown[0].message, shown[0].message
    for words in fix:
        assert words in shown[0].fix, shown[0].fix


def test_plan_cli_on_a_node_without_a_driver():
    """``python -m bringup.plan`` on tests/fixtures/facts/debian13-x86_64-rtx-pro-6000-no-driver.json
    (the Debian 13 node's document with no nvidia-smi and its eight GPUs on the bus)."""
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json",
                             str(FIXTURES / "facts" / "debian13-x86_64-rtx-pro-6000-no-driver.json")],
                            capture_output=True, text=True, cwd=FIXTURES.parents[1])
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    printed = json.loads(result.stdout)
    blockers = [f for f in printed["findings"] if f["severity"] == "blocker"]
    assert [f["code"] for f in blockers] == ["DRIVER_NOT_LOADED"], blockers
    assert f"8 NVIDIA GPU(s): 8x {RTX_PRO} (compute capability 12.0)" in blockers[0]["message"]
    assert printed["ok"] is False and printed["arch_list"] == "12.0f"
    assert "FLASHINFER_CUDA_ARCH_LIST=12.0f" in "\n".join(f"{k}={v}" for k, v in printed["env"].items())


def test_a_proprietary_module_refusing_blackwell_is_named_from_the_bus():
    """nvidia-smi lists nothing (the module refuses the GPUs): the open module is still
    required, known from the bus, without target_sms."""
    layer = changed(healthy_layer(), [(("module", "flavour"), "proprietary"), (("module", "banner"), PROPRIETARY_BANNER),
                                      (("gpus",), [])])
    for pci_gpus, expected in ((bus("2bb5", 8), ["DRIVER_OPEN_MODULE_REQUIRED"]), (bus("2330", 8), []), ([], [])):
        found = []
        driver_layer_findings(driverless(pci_gpus, NO_DEVICES, driver_layer=layer), Config(), found.append)
        assert [f.code for f in found if f.severity == "blocker"] == expected, (pci_gpus[:1], found)


def test_a_bare_node_with_gpus_on_the_bus_needs_the_nouveau_blacklist():
    """No driver at all (no module, no package, nothing listed): GPUs on the bus still make
    a missing nouveau blacklist worth a warning; a bus without them does not."""
    bare = changed(healthy_layer(), [(("module",), {"loaded": False, "version": None, "flavour": None, "banner": None}),
                                     (("installed_module",), None), (("nvml_libraries",), []), (("packages",), []),
                                     (("nouveau", "blacklisted"), False), (("gpus",), []), (("dkms",), None),
                                     (("acs",), []), (("topology",), None)])
    for pci_gpus, expected in ((bus("2bb5", 8), ["NOUVEAU_NOT_BLACKLISTED:warning"]), ([], []), (None, [])):
        found = []
        driver_layer_findings(driverless(pci_gpus, driver_layer=bare), Config(), found.append)
        assert [f"{f.code}:{f.severity}" for f in found] == expected, (pci_gpus, found)


def test_gpu_standin_is_said_in_every_report_of_a_declared_node():
    assert "GPU_STANDIN" not in plan(converged(), Config()).codes("info")
    node = plan(converged(), Config.from_data({"gpu_standin": True}))
    standin, = [f for f in node.findings if f.code == "GPU_STANDIN"]
    assert standin.severity == "info" and "stand-in" in standin.message and node.ok


# device id, the name nvidia-smi prints, compute capability (bringup/gpu_archs.py's sources)
KNOWN = [
    ("2bb5", RTX_PRO, "12.0"),
    ("2bb1", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
    ("2bb4", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "12.0"),
    ("2b85", "NVIDIA GeForce RTX 5090", "12.0"),
    ("2e12", "NVIDIA GB10", "12.1"),
    ("2901", "NVIDIA B200", "10.0"),
    ("2941", "NVIDIA GB200", "10.0"),
    ("3182", "NVIDIA B300 SXM6 AC", "10.3"),
    ("2330", "NVIDIA H100 80GB HBM3", "9.0"),
    ("2331", "NVIDIA H100 PCIe", "9.0"),
    ("2321", "NVIDIA H100 NVL", "9.0"),
    ("2335", "NVIDIA H200", "9.0"),
    ("233b", "NVIDIA H200 NVL", "9.0"),
    ("2342", "NVIDIA GH200 120GB / 480GB", "9.0"),
    ("26b9", "NVIDIA L40S", "8.9"),
    ("27b8", "NVIDIA L4", "8.9"),
    ("20b2", "NVIDIA A100-SXM4-80GB", "8.0"),
    ("20b5", "NVIDIA A100 80GB PCIe", "8.0"),
]


@pytest.mark.parametrize("device,name,compute_cap", KNOWN, ids=[k[1] for k in KNOWN])
def test_the_table_names_each_supported_gpu(device, name, compute_cap):
    model = gpu_model({"vendor": "10de", "device": device.upper()})
    assert (model.name, model.compute_cap) == (name, compute_cap)


@pytest.mark.parametrize("gpu", [{"vendor": "10de", "device": "1db6"},   # V100: not in the table
                                 {"vendor": "10de", "device": "22a3"},   # H100 NVSwitch: no GPU
                                 {"vendor": "1002", "device": "2bb5"}],  # another vendor's id
                         ids=["unsupported nvidia id", "nvswitch", "other vendor"])
def test_an_id_the_table_does_not_hold_stays_unknown(gpu):
    assert gpu_model(gpu) is None
    assert pci_gpus_sms({"pci_gpus": [dict(gpu, **{"bus_id": "0000:18:00.0", "class": "0302"})]}) == ()
    if gpu["vendor"] == "10de":
        assert bus_summary([gpu]) == f"1 NVIDIA GPU(s): 1x unknown NVIDIA device 10de:{gpu['device']}"


def test_every_table_sm_is_one_the_cuda_tables_know():
    from bringup.cuda import FIRST_CUDA_FOR_SM
    from packaging.version import Version
    assert {Version(model.compute_cap) for model in MODELS.values()} <= set(FIRST_CUDA_FOR_SM)
    assert all(device == device.lower() and len(device) == 4 for device in MODELS)

