"""The ``gpu_health`` section: is each GPU's hardware sound (files/probe.d/gpu_health.sh
``probe_gpu_health``, and the Remapped Rows lines of the driver layer's ``nvidia-smi -q``)
-> the facts document's ``gpu_health`` (docs/facts.md).

The fields are nvidia-smi's, by the names ``nvidia-smi --help-query-gpu`` gives them (R535:
``ecc.errors.uncorrected.volatile.total`` "errors detected since the last driver load",
``...aggregate.total`` the lifetime counter, ``retired_pages.pending`` "pending retirement on
the next reboot", ``pcie.link.gen.gpucurrent`` / ``pcie.link.width.current`` "may be reduced
when the GPU is not in use", ``clocks_event_reasons.hw_slowdown`` "reducing the core clocks by
a factor of 2 or more", ``temperature.gpu.tlimit`` the GPU's T.Limit temperature: its margin
to the slowdown threshold). Row remapping (NVIDIA's "GPU Memory Error Management",
docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/) is not a ``--query-gpu`` field: its four
values are read from ``-q``'s "Remapped Rows" block. A field a GPU does not support reads
``[N/A]`` or ``[Not Supported]``: None here, never an error. A cell reading ``[GPU requires
reset]`` is NVML's ``NVML_ERROR_RESET_REQUIRED`` ("the GPU requires a reset before it can be
used again", NVML API reference, nvmlReturn_t; nvidia-smi prints an NVML error in brackets):
the GPU's ``reset_required``, whatever field it stood in.

The Xid lines are kept as the driver printed them, with the GPU's PCI address and the Xid
number read out (``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.``);
what an Xid means and asks for is the planner's (bringup/plan/health.py).
"""

import re

from bringup.facts_kinds import BOOL, INT, OPT_STR, STR, Items, Optional
from bringup.xid import normalise_bus_id, parse_xid_line
from facts.probe_framing import Key, ProbeSection

# The --query-gpu fields, in the order files/probe.d/gpu_health.sh asks for them, and the
# document's name of each.
FIELDS = (
    ("index", "index"), ("pci.bus_id", "bus_id"),
    ("ecc.errors.uncorrected.volatile.total", "ecc_uncorrected_volatile"),
    ("ecc.errors.uncorrected.aggregate.total", "ecc_uncorrected_aggregate"),
    ("retired_pages.pending", "retired_pages_pending"),
    ("pcie.link.gen.gpucurrent", "pcie_gen_current"), ("pcie.link.gen.max", "pcie_gen_max"),
    ("pcie.link.width.current", "pcie_width_current"), ("pcie.link.width.max", "pcie_width_max"),
    ("clocks_event_reasons.gpu_idle", "idle"),
    ("clocks_event_reasons.hw_slowdown", "hw_slowdown"),
    ("clocks_event_reasons.hw_thermal_slowdown", "hw_thermal_slowdown"),
    ("clocks_event_reasons.hw_power_brake_slowdown", "hw_power_brake_slowdown"),
    ("clocks_event_reasons.sw_thermal_slowdown", "sw_thermal_slowdown"),
    ("temperature.gpu", "temperature_c"), ("temperature.gpu.tlimit", "slowdown_margin_c"),
)
COUNTS = {"ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "pcie_gen_current", "pcie_gen_max",
          "pcie_width_current", "pcie_width_max", "temperature_c", "slowdown_margin_c"}
FLAGS = {"retired_pages_pending", "idle", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
         "sw_thermal_slowdown"}
# -q's yes/no words: Yes/No (pages, rows), Active/Not Active (clock event reasons).
TRUE_WORDS, FALSE_WORDS = {"yes", "active"}, {"no", "not active"}
# NVML_ERROR_RESET_REQUIRED as nvidia-smi prints it in a cell.
RESET_REQUIRED = "[gpu requires reset]"
REMAPPED = {"Correctable Error": "correctable", "Uncorrectable Error": "uncorrectable", "Pending": "pending",
            "Remapping Failure Occurred": "failure"}
def value(text):
    """One cell as nvidia-smi prints it -> its text, None for what the GPU does not report
    (``[N/A]``, ``N/A``, ``[Not Supported]``, ``[Unknown Error]``...: any bracketed answer).

    >>> value(" 16 "), value("[N/A]"), value("[Not Supported]"), value("N/A")
    ('16', None, None, None)
    """
    text = text.strip()
    return None if not text or text == "N/A" or (text.startswith("[") and text.endswith("]")) else text


def number(text):
    """A count or degrees -> int; None when not reported or not a number.

    >>> number("0"), number("-3"), number("[N/A]"), number("4x")
    (0, -3, None, None)
    """
    text = value(text)
    return int(text) if text is not None and re.fullmatch(r"-?\d+", text) else None


def flag(text):
    """Yes/No, Active/Not Active -> bool; None when not reported.

    >>> flag("Yes"), flag("Not Active"), flag("[Not Supported]")
    (True, False, None)
    """
    text = (value(text) or "").lower()
    return True if text in TRUE_WORDS else False if text in FALSE_WORDS else None


def bus_id(text):
    """nvidia-smi's bus id (8-digit domain, upper case) -> sysfs's (``pci_gpus``), as
    bringup/xid.py's ``normalise_bus_id`` writes it, so every source names a GPU alike.

    >>> bus_id("00000000:18:00.0"), bus_id("0000:3B:00.0"), bus_id("00010000:01:00.0")
    ('0000:18:00.0', '0000:3b:00.0', '10000:01:00.0')
    """
    return normalise_bus_id(text)


def parse_health_rows(lines):
    """The ``--query-gpu`` rows -> one object per GPU; a row of another shape is an error
    (nvidia-smi printed something else: the section says so).

    >>> row = parse_health_rows(["0, 00000000:18:00.0, 0, 0, [N/A], 5, 5, 16, 16, Active, Not Active, "
    ...                          "Not Active, Not Active, Not Active, 32, 55"])[0]
    >>> row["bus_id"], row["retired_pages_pending"], row["pcie_width_current"], row["idle"], row["slowdown_margin_c"]
    ('0000:18:00.0', None, 16, True, 55)
    >>> parse_health_rows(["1, 00000000:28:00.0, [GPU requires reset], [GPU requires reset], [N/A], 5, 5, 16, 16, "
    ...                    "Active, Not Active, Not Active, Not Active, Not Active, 32, 55"])[0]["reset_required"]
    True
    """
    gpus = []
    for line in lines:
        if not line.strip():
            continue
        cells = line.split(",")
        if len(cells) != len(FIELDS) or number(cells[0]) is None:
            raise ValueError(f"unexpected nvidia-smi health row: {line[:120]!r}")
        row = {}
        for (_, name), cell in zip(FIELDS, cells):
            row[name] = (number(cell) if name in COUNTS else flag(cell) if name in FLAGS
                         else bus_id(cell) if name == "bus_id" else number(cell))
        row["reset_required"] = any(cell.strip().lower() == RESET_REQUIRED for cell in cells)
        gpus.append(row)
    return gpus


def parse_remapped_rows(text):
    """``nvidia-smi -q`` (whole, or as the driver layer cuts it) -> {bus id: its Remapped
    Rows}; a GPU without the block (pre-Ampere, GeForce) is absent.

    >>> parse_remapped_rows("GPU 00000000:18:00.0\\n    Remapped Rows\\n        Correctable Error : 0\\n"
    ...                     "        Pending                           : Yes\\n")["0000:18:00.0"]
    {'correctable': 0, 'uncorrectable': None, 'pending': True, 'failure': None}
    """
    found, current, block = {}, None, None
    for line in (text or "").splitlines():
        if line.startswith("GPU ") and not line.startswith("GPU  "):
            current, block = bus_id(line[4:]), None
            continue
        if current is None or not line.startswith("    "):
            continue
        key, sep, cell = line.strip().partition(":")
        if not line.startswith("        "):
            block = key.strip()
            continue
        name = REMAPPED.get(key.strip()) if block == "Remapped Rows" and sep else None
        if name:
            rows = found.setdefault(current, dict.fromkeys(REMAPPED.values()))
            rows[name] = number(cell) if name in ("correctable", "uncorrectable") else flag(cell)
    return found


def parse_xid_lines(lines):
    """The kernel log's NVRM Xid lines -> {"bus_id", "xid", "text"} each, oldest first, by
    bringup/xid.py's one parser (explain reads a journal with it too); a line that is not
    one is left out. The text is the driver's message after the Xid: the process's pid and
    name (any user's) stay on the node.

    >>> parse_xid_lines(["NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"])[0]["xid"]
    79
    >>> parse_xid_lines(["[ 12.3] NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error"])[0]
    {'bus_id': '0000:9b:00.0', 'xid': 94, 'text': 'Contained ECC error'}
    """
    events = (parse_xid_line(line) for line in lines)
    return [{"bus_id": event.bus_id, "xid": event.xid, "text": event.text} for event in events if event]


def gpu_health(by_name):
    """The ``health-*`` sections and the driver layer's ``driver-smi-q`` -> ``gpu_health``;
    None from a probe without them (an older release)."""
    query, xid = by_name.get("health-query"), by_name.get("health-xid")
    if query is None or xid is None:
        return None
    smi_q = by_name.get("driver-smi-q")
    remapped = parse_remapped_rows(smi_q.text) if smi_q is not None and smi_q.rc == 0 else {}
    error = None
    gpus = []
    if query.rc == 127:
        error = "nvidia-smi not found"
    elif query.rc != 0:
        error = query.text.strip()[:300] or f"nvidia-smi exited {query.rc}"
    else:
        try:
            gpus = parse_health_rows(query.lines)
        except ValueError as bad:
            # Health informs the plan; an answer of another shape must not fail the host's facts.
            error = str(bad)
        for gpu in gpus:
            gpu["remapped_rows"] = remapped.get(gpu["bus_id"])
    source = xid.attr[1] if xid.attr and xid.attr[0] == "source" else "none"
    # A log that could not be read (a reader that failed or timed out) is not a log without Xids.
    read_error = None if xid.rc == 0 else "no kernel log reader found" if xid.rc == 127 else \
        f"the {source} reader exited {xid.rc}" + (" (timed out)" if xid.rc == 124 else "")
    return {"query_error": error, "gpus": gpus,
            "kernel_log": {"source": source, "read_error": read_error,
                           "xid": parse_xid_lines(xid.lines) if xid.rc == 0 else []}}


GPU_KIND = {
    "index": INT, "bus_id": STR, "reset_required": BOOL,
    **{name: Optional(INT) for name in sorted(COUNTS)}, **{name: Optional(BOOL) for name in sorted(FLAGS)},
    "remapped_rows": Optional({"correctable": Optional(INT), "uncorrectable": Optional(INT), "pending": Optional(BOOL),
                               "failure": Optional(BOOL)}),
}

SECTION = ProbeSection(
    name="gpu_health",
    group=3,
    raw=("health-query", "health-xid"),
    reads={"gpu_health": ("gpu_health", "driver_layer")},
    keys={
        "gpu_health": Key(
            parse=gpu_health,
            schema=Optional({
                "query_error": OPT_STR,
                "gpus": Items(GPU_KIND),
                "kernel_log": {"source": STR, "read_error": OPT_STR,
                               "xid": Items({"bus_id": STR, "xid": INT, "text": STR})},
            }),
            meaning=(
                "each GPU's health as nvidia-smi reports it (whether it answers that it requires a reset, uncorrectable ECC errors since the driver loaded and "
                "lifetime, pages pending retirement, row remapping, the PCIe link against its maximum, the clock "
                "event reasons of a hardware or thermal slowdown, the temperature's margin to the slowdown "
                "threshold) and this boot's NVRM Xid lines of the kernel log (the first of each GPU's each Xid, then "
                "the newest 200), or why the log could not be read; null (or absent) from an older probe"
            ),
            example={"query_error": None, "gpus": [], "kernel_log": {"source": "journal", "read_error": None,
                                                                      "xid": []}},
        ),
    },
)
