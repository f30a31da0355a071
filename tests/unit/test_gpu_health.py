"""The GPU health findings (bringup/plan/health.py) as a scenario table: facts in (one GPU's
health row changed from a healthy one, the bus, the kernel log's Xids), findings out, each
with its GPU, NVIDIA's action and its severity; ``gpu_health_accept`` turning a blocker into
a named warning; and the same through the whole planner."""

import pytest

from bringup.config import Config
from bringup.findings import BLOCKER, WARNING
from bringup.plan import plan
from bringup.plan.health import health_findings
from tests.unit.scenarios import converged

BUS = [f"0000:{n}8:00.0" for n in range(1, 9)]


def healthy_gpu(index):
    return {"index": index, "bus_id": BUS[index], "reset_required": False, "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
            "retired_pages_pending": None, "pcie_gen_current": 1, "pcie_gen_max": 5, "pcie_width_current": 16,
            "pcie_width_max": 16, "idle": True, "hw_slowdown": False, "hw_thermal_slowdown": False,
            "hw_power_brake_slowdown": False, "sw_thermal_slowdown": False, "temperature_c": 32,
            "slowdown_margin_c": 55,
            "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}}


def node(change=None, listed=8, xid=(), index=3):
    """An 8-GPU node, GPU ``index`` changed by ``change``, nvidia-smi listing ``listed``."""
    gpus = [healthy_gpu(n) for n in range(listed)]
    if change:
        gpus[index] = {**gpus[index], **change}
    bus = [{"bus_id": bus, "vendor": "10de", "device": "2bb5", "class": "0302"} for bus in BUS]
    return {"gpus": [{"index": n} for n in range(listed)], "pci_gpus": bus,
            "gpu_health": {"query_error": None, "gpus": gpus,
                           "kernel_log": {"source": "journal", "read_error": None, "xid": [
                               {"bus_id": bus, "xid": number, "text": "x"}
                               for bus, number in xid]}}}


def findings(facts, accept=()):
    found = []
    health_findings(facts, Config.from_data({"gpu_health_accept": list(accept)}), found.append)
    return found


REMAP = {"correctable": 0, "uncorrectable": 2, "pending": True, "failure": False}
# name, facts, [(code, severity, words in the message, words in the fix)]
SCENARIOS = [
    ("healthy", node(), []),
    ("healthy, no facts from an older probe", {"gpus": [{}]}, []),
    ("lifetime errors alone", node({"ecc_uncorrected_aggregate": 3}), []),
    ("uncorrectable ECC", node({"ecc_uncorrected_volatile": 2, "ecc_uncorrected_aggregate": 5}),
     [("GPU_ECC_UNCORRECTABLE", BLOCKER, "GPU 3 (0000:48:00.0): 2 uncorrectable", "nvidia-smi -r -i 3")]),
    ("pages pending retirement", node({"retired_pages_pending": True}),
     [("GPU_PAGE_RETIREMENT_PENDING", BLOCKER, "GPU 3 (0000:48:00.0): memory pages", "dynamic-page-retirement")]),
    ("row remap pending", node({"remapped_rows": REMAP}),
     [("GPU_ROW_REMAP_PENDING", BLOCKER, "applied at the next GPU reset", "a100-gpu-mem-error-mgmt")]),
    ("row remap failure", node({"remapped_rows": {**REMAP, "failure": True}}),
     [("GPU_ROW_REMAP_FAILED", BLOCKER, "row remapping failed", "replace the board (RMA)")]),
    ("link at x8", node({"pcie_width_current": 8}),
     [("GPU_PCIE_LINK_DEGRADED", WARNING, "trained at x8, its maximum is x16", "reseat the board")]),
    ("idle at gen 1: power saving, not a fault", node({"pcie_gen_current": 1, "idle": True}), []),
    ("busy at gen 4 of 5", node({"pcie_gen_current": 4, "idle": False}),
     [("GPU_PCIE_LINK_DEGRADED", WARNING, "generation 4, its maximum is 5", "reseat")]),
    ("hardware slowdown", node({"hw_slowdown": True, "hw_power_brake_slowdown": True}),
     [("GPU_SLOWDOWN", WARNING, "HW Slowdown, HW Power Brake Slowdown", "power supply")]),
    ("at its slowdown temperature", node({"temperature_c": 90, "slowdown_margin_c": -1}),
     [("GPU_SLOWDOWN", WARNING, "90 C, 1 C past its slowdown temperature", "cooling")]),
    ("unsupported fields", node({key: None for key in healthy_gpu(0) if key not in ("index", "bus_id")}), []),
    ("seven of eight listed", node(listed=7),
     [("GPU_MISSING_FROM_DRIVER", BLOCKER, "the GPU at 0000:88:00.0: on the PCI bus but not listed by nvidia-smi "
       "(7 of 8", "reboot the node")]),
    ("GPU 7 handed to a VM: not missing", {**node(listed=7), "pci_gpus": [
        {"bus_id": bus, "vendor": "10de", "device": "2bb5", "class": "0302",
         "driver": "vfio-pci" if bus == BUS[7] else "nvidia"} for bus in BUS]},
     [("GPU_PASSED_THROUGH", "info", "bound to vfio-pci (handed to virtual machines): 0000:88:00.0", "unbind")]),
    ("Xid 79 twice on GPU 7", node(xid=[("0000:88:00", 79), ("0000:88:00", 79)]),
     [("GPU_XID", BLOCKER, "GPU 7 (0000:88:00.0): Xid 79", "restart the node")]),
    ("Xid 94 contained", node(xid=[("0000:18:00", 94)]),
     [("GPU_XID", WARNING, "GPU 0 (0000:18:00.0): Xid 94", "restart the application")]),
    ("Xid 95 uncontained: the GPU's reset by its bus id", node(xid=[("0000:48:00", 95)]),
     [("GPU_XID", BLOCKER, "GPU 3 (0000:48:00.0): Xid 95", "nvidia-smi -r -i 0000:48:00.0")]),
    ("nvidia-smi answers [GPU requires reset]", node({"reset_required": True, "ecc_uncorrected_volatile": None}),
     [("GPU_RESET_REQUIRED", BLOCKER, "GPU 3 (0000:48:00.0): nvidia-smi answers \"[GPU requires reset]\"",
       "nvidia-smi -r -i 3")]),
    ("Xid 63: the catalog asks for nothing", node(xid=[("0000:48:00", 63)]),
     [("GPU_XID", "info", "GPU 3 (0000:48:00.0): Xid 63", "NVIDIA asks for no action")]),
]


@pytest.mark.parametrize("name, facts, expected", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_health_findings(name, facts, expected):
    found = findings(facts)
    assert [(f.code, f.severity) for f in found] == [(code, severity) for code, severity, _, _ in expected], found
    for finding, (_, _, seen, fix) in zip(found, expected):
        assert seen in finding.message, finding.message
        assert fix in finding.fix and (finding.code == "GPU_PASSED_THROUGH" or finding.fix.startswith("NVIDIA's action: ")), \
            finding.fix


@pytest.mark.parametrize("accept, severity", [
    (("GPU_ROW_REMAP_PENDING",), WARNING),
    (("GPU_ROW_REMAP_PENDING@0000:48:00.0",), WARNING),
    (("GPU_ROW_REMAP_PENDING@0000:48:00",), WARNING),
    (("GPU_ROW_REMAP_PENDING@0000:18:00.0",), BLOCKER),  # another GPU's
    (("GPU_ROW_REMAP_FAILED",), BLOCKER),  # another code
    (("GPU_XID:63",), BLOCKER),  # GPU_XID:<n> names an Xid, never another code
])
def test_an_accepted_blocker_is_a_warning_that_says_so(accept, severity):
    found = findings(node({"remapped_rows": REMAP}), accept)
    assert [(f.code, f.severity) for f in found] == [("GPU_ROW_REMAP_PENDING", severity)]
    assert ("accepted by gpu_health_accept" in found[0].message) == (severity == WARNING)


def test_the_planner_blocks_a_node_whose_gpu_needs_a_reset_and_accepting_it_lets_it_through():
    facts = {**node({"remapped_rows": REMAP}), **converged()}
    blocked = plan(facts, Config())
    assert blocked.codes("blocker") == ["GPU_ROW_REMAP_PENDING"]
    let_through = plan(facts, Config.from_data({"gpu_health_accept": "GPU_ROW_REMAP_PENDING@0000:48:00.0"}))
    assert let_through.codes("blocker") == [] and "GPU_ROW_REMAP_PENDING" in let_through.codes("warning")


def test_a_healthy_node_has_no_health_finding_through_the_planner():
    facts = {**node(), **converged()}
    assert not [f for f in plan(facts, Config()).findings if f.code.startswith("GPU_")]


@pytest.mark.parametrize("query_error, read_error, said", [
    ('Field "temperature.gpu.tlimit" is not a valid field to query.', None, "nvidia-smi's health query: Field"),
    ("nvidia-smi exited 124", None, "nvidia-smi exited 124"),
    (None, "the journal reader exited 124 (timed out)", "the kernel log: the journal reader exited 124"),
])
def test_what_could_not_be_read_is_said_not_taken_for_health(query_error, read_error, said):
    facts = node()
    facts["gpu_health"] = {**facts["gpu_health"], "query_error": query_error,
                           "gpus": [] if query_error else facts["gpu_health"]["gpus"],
                           "kernel_log": {**facts["gpu_health"]["kernel_log"], "read_error": read_error}}
    found = findings(facts)
    assert [(f.code, f.severity) for f in found] == [("GPU_HEALTH_UNREAD", WARNING)], found
    assert said in found[0].message, found[0].message


def test_an_xid_finding_says_the_kernel_log_keeps_it_until_a_reboot():
    [found] = findings(node(xid=[("0000:48:00.0", 95)]))
    assert "stays until a reboot" in found.fix and "gpu_health_accept: GPU_XID:95@0000:48:00.0" in found.fix, found.fix


@pytest.mark.parametrize("accept, accepted_xids", [
    (("GPU_XID:95@0000:48:00.0",), {95}),  # the one the finding names: the later Xid 79 still blocks
    (("GPU_XID:95",), {95}),
    (("GPU_XID@0000:48:00.0",), {95, 79}),  # every Xid of the GPU
    (("GPU_XID:95@0000:18:00.0",), set()),  # another GPU's
])
def test_an_xid_acceptance_names_one_xid_or_all_of_a_gpu(accept, accepted_xids):
    found = findings(node(xid=[("0000:48:00", 95), ("0000:48:00", 79)]), accept)
    severities = {int(f.message.split("Xid ")[1].split()[0]): f.severity for f in found}
    assert severities == {xid: WARNING if xid in accepted_xids else BLOCKER for xid in (95, 79)}, found
