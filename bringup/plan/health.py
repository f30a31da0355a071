"""The GPUs' hardware health: the findings on the facts' ``gpu_health`` (docs/facts.md;
files/probe.d/gpu_health.sh), ``pci_gpus`` and the GPUs nvidia-smi lists, each with the GPU
by index and bus id, what was seen, and the action NVIDIA documents. Pure functions of the
facts and the settings.

A GPU that needs a reset, a reboot or a replacement serves wrong answers, or none: its
finding is a blocker, so deploy changes nothing on that node, unless the operator accepts
it (``gpu_health_accept``: a code, or a code on one GPU), which makes it a warning that
says so. What only costs speed (a narrow link, a slowdown) is a warning.

NVIDIA's sources:

- "GPU Memory Error Management" (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/): an
  uncorrectable error marks its row for remapping, which "will be applied on the next GPU
  reset" (row remapping pending); a remapping failure is one of the RMA criteria;
- "Dynamic Page Retirement" (docs.nvidia.com/deploy/dynamic-page-retirement/): before
  Ampere, pages are retired at the next driver load (a reboot or a GPU reset);
- the Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): each
  Xid's resolution bucket (RESTART_APP, RESET_GPU, RESTART_BM, CONTACT_SUPPORT...);
- ``nvidia-smi --help-query-gpu``: the PCIe generation and width "may be reduced when the
  GPU is not in use", HW Slowdown is "reducing the core clocks by a factor of 2 or more".
"""

from bringup.findings import BLOCKER, INFO, WARNING, Finding
from bringup.gpu_ids import bus_gpus, passed_through_gpus
from bringup.health_accept import accepted, same_gpu
from bringup.xid import XidEvent, event_action

MEMORY_ERRORS = "NVIDIA's \"GPU Memory Error Management\", docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/"
PAGE_RETIREMENT = "NVIDIA's \"Dynamic Page Retirement\", docs.nvidia.com/deploy/dynamic-page-retirement/"
NVML_RESET = ("NVML API reference, nvmlReturn_t NVML_ERROR_RESET_REQUIRED: \"The GPU requires a reset before it can "
              "be used again\"")
XID_CATALOG = "NVIDIA's Xid catalog, docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
# The actions of the findings on nvidia-smi's answers, in words an operator runs: what each
# asks of the GPU at ``{index}`` (an Xid's come from the catalog, bringup/xid.py).
ACTIONS = {
    "none": "nothing",
    "reset_gpu": "reset the GPU with nothing running on it (`nvidia-smi -r -i {index}`), or reboot the node",
    "reboot": "reboot the node",
    "drain_rma": "drain the node and contact NVIDIA support to replace the board (RMA)",
}


def gpu_label(gpu):
    """A GPU as the findings name it: its index and bus id.

    >>> gpu_label({"index": 3, "bus_id": "0000:48:00.0"}), gpu_label({"index": None, "bus_id": "0000:88:00.0"})
    ('GPU 3 (0000:48:00.0)', 'the GPU at 0000:88:00.0')
    """
    return f"GPU {gpu['index']} ({gpu['bus_id']})" if gpu.get("index") is not None else f"the GPU at {gpu['bus_id']}"


def report(config, add, code, severity, gpu, seen, action, source, xid=None):
    """One health finding: ``seen`` on ``gpu``, NVIDIA's ``action`` and its ``source``; a
    blocker the operator accepted is a warning that names the acceptance (``xid``: the Xid
    of a ``GPU_XID``, which an acceptance may name)."""
    what = f"{gpu_label(gpu)}: {seen}"
    entry = accepted(config, code, gpu.get("bus_id"), xid) if severity == BLOCKER else None
    if entry:
        severity, what = WARNING, f"{what} (accepted by gpu_health_accept {entry}: deploy goes on)"
    # A catalog's action word, else the text itself; {index} is the GPU's (replaced, not
    # formatted: a catalog's text may hold braces).
    index = gpu.get("index")
    fix = ACTIONS.get(action, action).replace("{index}", str(index) if index is not None else "<index>")
    add(Finding(code, severity, what, f"NVIDIA's action: {fix} ({source})"))


def check_reset_required(gpu, config, add):
    """A GPU nvidia-smi answers "[GPU requires reset]" for: NVML refuses it until it is reset
    (NVML_ERROR_RESET_REQUIRED), so CUDA cannot use it either."""
    if gpu.get("reset_required"):
        report(config, add, "GPU_RESET_REQUIRED", BLOCKER, gpu,
               "nvidia-smi answers \"[GPU requires reset]\" for it: the driver refuses it until it is reset, so the "
               "service cannot use it", "reset_gpu", NVML_RESET)


def check_memory(gpu, config, add):
    """Uncorrectable ECC errors since the driver loaded, pages pending retirement (before
    Ampere), rows pending remapping and a remapping failure."""
    volatile, aggregate = gpu.get("ecc_uncorrected_volatile"), gpu.get("ecc_uncorrected_aggregate")
    if volatile:
        lifetime = f", {aggregate} in its lifetime" if aggregate is not None else ""
        report(config, add, "GPU_ECC_UNCORRECTABLE", BLOCKER, gpu,
               f"{volatile} uncorrectable ECC error(s) since the driver loaded{lifetime}: the processes that touched "
               "the memory were stopped and the GPU's memory is in doubt until it is reset", "reset_gpu", MEMORY_ERRORS)
    if gpu.get("retired_pages_pending"):
        report(config, add, "GPU_PAGE_RETIREMENT_PENDING", BLOCKER, gpu,
               "memory pages are pending retirement: until the driver reloads they can still be allocated (\"may "
               "cause further reliability issues\")", "reset_gpu", PAGE_RETIREMENT)
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure"):
        report(config, add, "GPU_ROW_REMAP_FAILED", BLOCKER, gpu,
               f"row remapping failed ({rows.get('uncorrectable')} row(s) remapped for uncorrectable errors): the "
               "GPU can no longer repair its memory", "drain_rma", MEMORY_ERRORS + ", \"RMA Policy Thresholds\"")
    elif rows.get("pending"):
        report(config, add, "GPU_ROW_REMAP_PENDING", BLOCKER, gpu,
               f"memory rows are pending remapping ({rows.get('uncorrectable')} for uncorrectable errors, "
               f"{rows.get('correctable')} for correctable ones): the remapping is applied at the next GPU reset",
               "reset_gpu", MEMORY_ERRORS)


def check_link(gpu, config, add):
    """The PCIe link narrower than its maximum; its generation below the maximum only while
    the GPU is busy (the generation drops when it is idle: nvidia-smi's help)."""
    width, width_max = gpu.get("pcie_width_current"), gpu.get("pcie_width_max")
    gen, gen_max = gpu.get("pcie_gen_current"), gpu.get("pcie_gen_max")
    seen = []
    if width is not None and width_max is not None and width < width_max:
        seen.append(f"its PCIe link trained at x{width}, its maximum is x{width_max}")
    if gpu.get("idle") is False and gen is not None and gen_max is not None and gen < gen_max:
        seen.append(f"busy, its PCIe link runs at generation {gen}, its maximum is {gen_max}")
    if seen:
        report(config, add, "GPU_PCIE_LINK_DEGRADED", WARNING, gpu,
               " and ".join(seen) + ": host-to-GPU copies (loading weights, KV cache offload, P2P over PCIe) run at "
               "a fraction of the link's bandwidth",
               "reseat the board, check its riser, cable and slot (and the slot's width and generation in the "
               "BIOS), then compare `nvidia-smi -q -i {index}`'s GPU Link Info", "nvidia-smi --help-query-gpu, "
               "pcie.link.width.current against pcie.link.width.max")


def check_slowdown(gpu, config, add):
    """A hardware, thermal or power-brake slowdown engaged, or the GPU at its slowdown
    temperature (T.Limit, its margin to the threshold, at or below 0)."""
    names = {"hw_slowdown": "HW Slowdown", "hw_thermal_slowdown": "HW Thermal Slowdown",
             "hw_power_brake_slowdown": "HW Power Brake Slowdown", "sw_thermal_slowdown": "SW Thermal Slowdown"}
    active = [label for key, label in names.items() if gpu.get(key)]
    margin = gpu.get("slowdown_margin_c")
    if margin is not None and margin <= 0:
        active.append(f"{gpu.get('temperature_c')} C, {-margin} C past its slowdown temperature")
    if active:
        report(config, add, "GPU_SLOWDOWN", WARNING, gpu,
               f"clocks held down: {', '.join(active)} (a hardware slowdown cuts the core clocks by a factor of 2 or "
               "more): it serves at a fraction of its speed",
               "check the cooling (fans, airflow, inlet temperature) and the power supply (a power brake is asserted "
               "by the system); `nvidia-smi -q -d PERFORMANCE,TEMPERATURE -i {index}` names the reason",
               "nvidia-smi --help-query-gpu, clocks_event_reasons")


def check_missing(facts, health_gpus, config, add):
    """GPUs on the PCI bus that nvidia-smi does not list while it lists others (with none
    listed, DRIVER_NOT_LOADED says so): the driver lost them, Xid 79's "fallen off the bus"."""
    listed = [gpu["bus_id"] for gpu in health_gpus] or [
        gpu.get("bus_id") or "" for gpu in (facts.get("driver_layer") or {}).get("gpus") or []]
    on_bus = bus_gpus(facts)
    if not listed or not facts.get("gpus") or len(on_bus) <= len(facts["gpus"]):
        return
    missing = [gpu for gpu in on_bus if not any(same_gpu(gpu["bus_id"], bus) for bus in listed if bus)]
    for gpu in missing:
        report(config, add, "GPU_MISSING_FROM_DRIVER", BLOCKER, {"index": None, "bus_id": gpu["bus_id"]},
               f"on the PCI bus but not listed by nvidia-smi ({len(facts['gpus'])} of {len(on_bus)} GPUs listed): the "
               "driver lost it (Xid 79, \"GPU has fallen off the bus\"), and a service sized for the node's GPUs "
               "does not start", "reboot",
               XID_CATALOG + " (Xid 79: RESTART_BM); reseat the board and check its power if it recurs")


def check_passed_through(facts, add):
    """GPUs bound to vfio-pci: handed to virtual machines, so neither counted among this
    host's GPUs nor missing from its driver; said, so a count that looks short is explained."""
    gone = passed_through_gpus(facts)
    if gone:
        add(Finding("GPU_PASSED_THROUGH", INFO,
                    f"{len(gone)} NVIDIA GPU(s) on the PCI bus are bound to vfio-pci (handed to virtual machines): "
                    f"{', '.join(gpu['bus_id'] for gpu in gone)}; the plan counts only the host's GPUs",
                    "nothing, if they are meant for virtual machines; else unbind them from vfio-pci (and drop their "
                    "ids from vfio-pci.ids= on the kernel command line) so the nvidia module takes them"))


def check_unread(health, add):
    """What the probe could not read is said, not taken for health: a query nvidia-smi refused
    or did not answer in time (a driver older than R535's field names; a GPU that fell off the
    bus hangs it), a kernel log that could not be read."""
    unread = [f"nvidia-smi's health query: {health['query_error']}" if health.get("query_error") else "",
              f"the kernel log: {(health.get('kernel_log') or {}).get('read_error')}"
              if (health.get("kernel_log") or {}).get("read_error") else ""]
    unread = [part for part in unread if part]
    if unread:
        add(Finding("GPU_HEALTH_UNREAD", WARNING,
                    f"the GPUs' health could not be read ({'; '.join(unread)}): no health finding is made of it",
                    "run the query by hand (`nvidia-smi -q`; `journalctl -k -b | grep 'NVRM: Xid'`); an nvidia-smi "
                    "that does not answer often means a GPU that needs a reset or a reboot; nvidia-smi R535 or newer "
                    "knows the fields asked"))


def check_xids(facts, health_gpus, config, add):
    """This boot's Xids, one finding per GPU and Xid: how often, the last line, and the
    catalog's action."""
    seen = {}
    for event in ((facts.get("gpu_health") or {}).get("kernel_log") or {}).get("xid") or []:
        seen.setdefault((event["bus_id"], event["xid"]), []).append(event)
    for (bus, number), events in seen.items():
        listed = next((gpu for gpu in health_gpus if same_gpu(gpu["bus_id"], bus)), None)
        gpu = {"index": listed["index"] if listed else None, "bus_id": listed["bus_id"] if listed else bus}
        # The catalog's row (bringup/xid.py); Xid 154's own line names its action.
        action = event_action(XidEvent(gpu["bus_id"], number, None, events[-1]["text"]))
        report(config, add, "GPU_XID", action.severity, gpu,
               f"Xid {number} ({action.name}) {len(events)} time(s) among this boot's kernel log lines read, last: "
               f"{events[-1]['text'][:200]}",
               action.advice.replace("<bus id>", gpu["bus_id"]) + "; the kernel log keeps this boot's Xids, so the "
               "finding stays until a reboot: after NVIDIA's action, reboot, or accept it "
               f"(gpu_health_accept: GPU_XID:{number}@{gpu['bus_id']})", action.source, xid=number)


def health_findings(facts, config, add):
    """The GPU health findings of a node.

    + facts: the facts document; ``gpu_health`` absent or null (an older probe) says nothing
    + config: the settings (``gpu_health_accept``)
    + add: called with each ``Finding``

    >>> from bringup.config import Config
    >>> found = []
    >>> gpu = {"index": 0, "bus_id": "0000:18:00.0", "remapped_rows": {"pending": True, "failure": False,
    ...        "correctable": 0, "uncorrectable": 1}}
    >>> health_findings({"gpus": [{}], "gpu_health": {"gpus": [gpu]}}, Config(), found.append)
    >>> [(finding.code, finding.severity) for finding in found]
    [('GPU_ROW_REMAP_PENDING', 'blocker')]
    """
    check_passed_through(facts, add)
    health = facts.get("gpu_health")
    if not health:
        return
    check_unread(health, add)
    gpus = health.get("gpus") or []
    for gpu in gpus:
        check_reset_required(gpu, config, add)
        check_memory(gpu, config, add)
        check_link(gpu, config, add)
        check_slowdown(gpu, config, add)
    check_missing(facts, gpus, config, add)
    check_xids(facts, gpus, config, add)
