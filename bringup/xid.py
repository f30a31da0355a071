"""NVIDIA's Xid catalog as one table: what an Xid the driver logged means and what NVIDIA
says to do about it, and the parser of the driver's ``NVRM: Xid`` kernel-log lines.

Every row is a row of NVIDIA's "Analyzing Xid Errors with the Xid Catalog" (``CATALOG``,
the catalog for Ampere and newer GPUs): the Xid, NVIDIA's short description and its
"Resolution Bucket (Immediate Action)", kept literally as ``bucket``. The action is that
bucket in this project's small vocabulary (``ACTIONS``), and the severity follows the
action: a GPU that needs a reset, a reboot or hands on the hardware is a ``blocker``.
Only the catalog's rows marked used on some product (A100, H100, B100, GB200) with an
immediate bucket are here; the "Unused" ones (CONTACT_SUPPORT in the catalog) and the
newest rows without a bucket (162-172) fall to ``xid_action``'s default, which says so.

    >>> row = xid_action(79)
    >>> row.name, row.action, row.severity
    ('GPU has fallen off the bus', 'reboot', 'blocker')
    >>> row.source
    'docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (read 2026-12-05): Xid 79, immediate action RESTART_BM'
    >>> [event.xid for event in parse_xid_lines("[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")]
    [79]

A new row: one line in ``ROWS`` (the Xid, the catalog's description, its immediate
bucket as the catalog spells it), and its case in ``tests/unit/test_xid.py``.
"""

import re
from dataclasses import dataclass

CATALOG = "docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (read 2026-12-05)"

INFO, WARNING, BLOCKER = "info", "warning", "blocker"

# The vocabulary: action -> (severity, what to do). Each is one or more of NVIDIA's
# immediate-action buckets (``BUCKETS``); the words in brackets are NVIDIA's.
ACTIONS = {
    "none": (INFO, "none: NVIDIA asks for no action (IGNORE)"),
    "restart_app": (WARNING, "restart the application that hit it; the GPU needs no reset (RESTART_APP)"),
    "reset_gpu": (BLOCKER, "drain the GPU and reset it (`nvidia-smi -r -i <bus id>` with nothing using it, or "
                           "reboot) before it serves again; if it recurs, contact support (RESET_GPU)"),
    "reboot": (BLOCKER, "restart the node (a cold power cycle where the GPU stays off the bus); if it recurs, "
                        "contact the hardware vendor (RESTART_BM)"),
    "check_mechanicals": (BLOCKER, "power the node off and check the GPU's seating and power connectors "
                                   "(CHECK_MECHANICALS)"),
    "contact_support": (WARNING, "contact your support organisation (CONTACT_SUPPORT)"),
    "update_driver": (WARNING, "update the driver and firmware to their latest versions (UPDATE_SWFW)"),
    "follow_other": (INFO, "act on the other Xid logged with it; alone, restart Fabric Manager (WORKFLOW_XID_45)"),
    "decode_nvlink": (WARNING, "decode the NVLink registers in the line with the catalog's \"XID 144-150 "
                               "Decode\" sheet: its fatal subcodes need a GPU reset, and the driver then logs "
                               "Xid 154 naming it (WORKFLOW_NVLINK5_ERR)"),
    "follow_recovery_action": (WARNING, "the recovery action the line names (XID_154)"),
}

# NVIDIA's immediate-action bucket -> the action. Where a bucket is a workflow, why it
# maps where it does.
BUCKETS = {
    "IGNORE": "none",
    "RESTART_APP": "restart_app",
    "RESET_GPU": "reset_gpu",
    "RESTART_BM": "reboot",
    # Xid 151 (key rotation, confidential computing): the driver that logs it runs in the VM
    # owning the GPU, so that VM is the node to restart.
    "RESTART_VM": "reboot",
    "CHECK_MECHANICALS": "check_mechanicals",
    "CONTACT_SUPPORT": "contact_support",
    "UPDATE_SWFW": "update_driver",
    "WORKFLOW_XID_45": "follow_other",
    # Xid 48: "Solo: RESET_GPU; w/ 63 or 64: DRAIN_AND_RESET", a reset either way.
    "WORKFLOW_XID_48": "reset_gpu",
    # Xid 74: its trigger conditions say "A GPU reset or node reboot is needed to clear this error".
    "WORKFLOW_NVLINK_ERR": "reset_gpu",
    "WORKFLOW_NVLINK5_ERR": "decode_nvlink",
    "XID_154": "follow_recovery_action",
    # Xid 159: "If UVM/vGPU is being utilized, RESET_GPU; otherwise IGNORE": every CUDA
    # process of a serving node uses nvidia-uvm.
    "CHECK_UVM": "reset_gpu",
}

# (Xid, NVIDIA's description, the catalog's "Resolution Bucket (Immediate Action)").
ROWS = (
    (8, "GPU stopped processing", "RESTART_APP"),
    (11, "Invalid or corrupted push buffer stream", "RESTART_APP"),
    (13, "Graphics Engine Exception", "RESTART_APP"),
    (14, "Fake or injected error from userspace", "IGNORE"),
    (25, "Invalid or illegal push buffer stream", "RESTART_APP"),
    (31, "GPU memory page fault", "RESTART_APP"),
    (32, "Invalid or corrupted push buffer stream", "RESTART_APP"),
    (37, "Driver firmware error", "IGNORE"),
    (38, "Driver firmware error", "IGNORE"),
    (39, "Copy Engine Exception", "RESTART_APP"),
    (40, "Copy Engine Exception", "RESTART_APP"),
    (41, "Copy Engine Exception", "RESTART_APP"),
    (43, "GPU stopped processing", "IGNORE"),
    (44, "Graphics Engine fault during context switch", "IGNORE"),
    (45, "Preemptive cleanup, due to previous errors", "WORKFLOW_XID_45"),
    (46, "GPU stopped processing", "RESET_GPU"),
    (48, "Double Bit ECC Error", "WORKFLOW_XID_48"),
    (54, "Auxiliary power is not connected to the GPU board", "CHECK_MECHANICALS"),
    (60, "Video processor exception", "RESTART_APP"),
    (62, "Internal micro-controller halt", "RESET_GPU"),
    (63, "GPU memory remapping event", "IGNORE"),
    (64, "GPU memory remapping failure", "RESET_GPU"),
    (66, "Illegal access by driver", "IGNORE"),
    (67, "Illegal access by driver", "IGNORE"),
    (68, "NVDEC0 Exception", "RESTART_APP"),
    (69, "Graphics Engine class error", "RESTART_APP"),
    (70, "CE3: Unknown Error", "RESTART_APP"),
    (71, "CE4: Unknown Error", "RESTART_APP"),
    (72, "CE5: Unknown Error", "RESTART_APP"),
    (74, "NVLINK Error", "WORKFLOW_NVLINK_ERR"),
    (75, "CE6: Unknown Error", "RESTART_APP"),
    (76, "CE7: Unknown Error", "RESTART_APP"),
    (77, "CE8: Unknown Error", "RESTART_APP"),
    (78, "vGPU Start Error", "UPDATE_SWFW"),
    (79, "GPU has fallen off the bus", "RESTART_BM"),
    (80, "Corrupted data sent to GPU", "RESTART_APP"),
    (82, "NVJPG0 Error", "RESTART_APP"),
    (83, "NVDEC1 Error", "RESTART_APP"),
    (84, "NVDEC2 Error", "RESTART_APP"),
    (85, "CE9: Unknown Error", "RESTART_APP"),
    (86, "OFA Exception", "RESTART_APP"),
    (88, "NVDEC3 Error", "RESTART_APP"),
    (89, "NVDEC4 Error", "RESTART_APP"),
    (92, "High single-bit ECC error rate", "IGNORE"),
    (93, "Non-fatal violation of provisioned InfoROM wear limit", "IGNORE"),
    (94, "Contained memory error", "RESTART_APP"),
    (95, "Uncontained memory error", "RESET_GPU"),
    (96, "NVDEC5 Error", "RESTART_APP"),
    (97, "NVDEC6 Error", "RESTART_APP"),
    (98, "NVDEC7 Error", "RESTART_APP"),
    (99, "NVJPG1 Error", "RESTART_APP"),
    (100, "NVJPG2 Error", "RESTART_APP"),
    (101, "NVJPG3 Error", "RESTART_APP"),
    (102, "NVJPG4 Error", "RESTART_APP"),
    (103, "NVJPG5 Error", "RESTART_APP"),
    (104, "NVJPG6 Error", "RESTART_APP"),
    (105, "NVJPG7 Error", "RESTART_APP"),
    (106, "SMBPBI Test Message", "IGNORE"),
    (107, "SMBPBI Test Message Silent", "IGNORE"),
    (108, "NVLink remote translation error (unused)", "IGNORE"),
    (109, "Context Switch Timeout Error", "RESET_GPU"),
    (110, "Security Fault Error", "RESET_GPU"),
    (119, "GSP RPC Timeout", "RESET_GPU"),
    (120, "GSP Error", "RESET_GPU"),
    (121, "C2C Error", "IGNORE"),
    (126, "CE10: Unknown Error", "RESTART_APP"),
    (127, "CE11: Unknown Error", "RESTART_APP"),
    (128, "CE12: Unknown Error", "RESTART_APP"),
    (129, "CE13: Unknown Error", "RESTART_APP"),
    (130, "CE14: Unknown Error", "RESTART_APP"),
    (131, "CE15: Unknown Error", "RESTART_APP"),
    (132, "CE16: Unknown Error", "RESTART_APP"),
    (133, "CE17: Unknown Error", "RESTART_APP"),
    (134, "CE18: Unknown Error", "RESTART_APP"),
    (135, "CE19: Unknown Error", "RESTART_APP"),
    (136, "Link Training Failed", "RESET_GPU"),
    (137, "NVLink Privilege Error", "IGNORE"),
    (139, "OFA1 Error", "RESTART_APP"),
    (140, "ECC Unrecovered Error", "RESET_GPU"),
    (141, "CUDA Fast Path Error", "IGNORE"),
    (142, "NVENC3 Error", "CONTACT_SUPPORT"),
    (143, "GPU Initialization Error", "RESET_GPU"),
    (144, "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR"),
    (145, "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR"),
    (146, "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR"),
    (147, "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR"),
    (148, "NVLINK: NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR"),
    (149, "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR"),
    (150, "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR"),
    (151, "Key rotation Error", "RESTART_VM"),
    (154, "GPU Recovery Action Changed", "XID_154"),
    (155, "NVLINK: SW Defined Error", "RESET_GPU"),
    (156, "Resource Retirement Event", "RESET_GPU"),
    (157, "Resource Retirement Failure", "IGNORE"),
    (158, "GPU Fatal Timeout", "RESET_GPU"),
    (159, "CHI Non-Data Error", "CHECK_UVM"),
    (160, "Channel Retirement Event", "IGNORE"),
    (161, "Channel Retirement Failure", "IGNORE"),
)


@dataclass(frozen=True)
class XidAction:
    """What an Xid means and what NVIDIA says to do: ``name`` (NVIDIA's short
    description), ``action`` (a key of ``ACTIONS``), ``severity`` (``info``, ``warning``,
    ``blocker``) and the ``source`` the row rests on."""

    xid: int
    name: str
    action: str
    severity: str
    source: str

    @property
    def advice(self):
        """What to do, in words (``ACTIONS``)."""
        return ACTIONS[self.action][1]


def _action(xid, name, bucket, source=None):
    action = BUCKETS[bucket]
    return XidAction(xid, name, action, ACTIONS[action][0],
                     source or f"{CATALOG}: Xid {xid}, immediate action {bucket}")


TABLE = {xid: _action(xid, name, bucket) for xid, name, bucket in ROWS}
if len(TABLE) != len(ROWS):
    raise ValueError("bringup/xid.py: an Xid is listed twice")

# Not in the table: NVIDIA's own word for an Xid its catalog calls unused, and the
# conservative one for a newer Xid than the table's: look it up, a warning, not a blocker
# (a driver that adds an informational Xid must not stop a fleet's deploys).
UNKNOWN_NAME = "not in this project's Xid table (bringup/xid.py)"


def xid_action(xid):
    """The table's row for ``xid``; an Xid not in it gets ``contact_support`` (a warning)
    with a name that says it is not in the table. Never raises.

    >>> xid_action(95).action, xid_action(95).severity
    ('reset_gpu', 'blocker')
    >>> xid_action(13).action, xid_action(63).action
    ('restart_app', 'none')
    >>> unknown = xid_action(9999)
    >>> unknown.name, unknown.action, unknown.severity
    ("not in this project's Xid table (bringup/xid.py)", 'contact_support', 'warning')
    >>> xid_action("79").action
    'reboot'
    """
    try:
        number = int(xid)
    except (TypeError, ValueError, OverflowError):
        number = -1
    row = TABLE.get(number)
    if row is not None:
        return row
    return XidAction(number, UNKNOWN_NAME, "contact_support", ACTIONS["contact_support"][0],
                     f"{CATALOG}: not a used row of the catalog (or newer than the table)")


# Xid 154's line names the new recovery action ("... changed from 0x0 (None) to 0x2 (Node
# Reboot Required)"); the catalog lists its words: None, Drain P2P, Drain and Reset, GPU
# Reset Required, Node Reboot Required. Draining is before a reset: a reset either way.
RECOVERY_ACTIONS = {
    "none": "none",
    "drain p2p": "reset_gpu",
    "drain and reset": "reset_gpu",
    "gpu reset required": "reset_gpu",
    "node reboot required": "reboot",
    # Not in the catalog's list, but what the driver writes after an Xid 79
    # (NVIDIA/open-gpu-kernel-modules#1151): a function-level reset of the GPU.
    "pf flr": "reset_gpu",
}
RECOVERY = re.compile(r"\bto 0x[0-9a-fA-F]+ \(([^)]*)\)")


def event_action(event):
    """``xid_action`` for an event, where Xid 154's own text names the action.

    >>> event_action(XidEvent("0000:3b:00.0", 154, None, "GPU recovery action changed from 0x0 (None) to "
    ...                       "0x2 (Node Reboot Required)")).action
    'reboot'
    >>> event_action(XidEvent("0000:3b:00.0", 154, None, "something else")).action
    'follow_recovery_action'
    """
    row = xid_action(event.xid)
    if event.xid != 154:
        return row
    found = RECOVERY.search(event.text)
    action = RECOVERY_ACTIONS.get(found.group(1).strip().lower()) if found else None
    if action is None:
        return row
    return XidAction(row.xid, row.name, action, ACTIONS[action][0],
                     f"{row.source}; the recovery action the line names ({found.group(1).strip()})")


# ---- the driver's lines ----------------------------------------------------------------

# Lines kept: the first MAX_EVENTS events, each GPU's first of each Xid before any repeat,
# so that a flood of one Xid (an application's Xid 13s) never hides another (its GPU's 79).
MAX_EVENTS = 256
# A line longer than this is cut before it is read: the driver's lines are far shorter.
MAX_LINE = 2048

# NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
# NVRM: Xid (0000:03:00): 14, Channel 00000001          (older drivers: no "PCI:", no pid)
XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-7])?)\): "
    r"(?P<xid>\d{1,6})\b,?\s*(?P<rest>.*)")
# pid=1234 / pid='<unknown>' / pid='N/A' / pid=<unknown>, then name=..., as the driver writes them.
PID_NAME = re.compile(r"^pid=(?P<pid>'[^']*'|<[^>]*>|[^,\s]+),\s*(?:name=(?P<name>.*?),\s*)?")
BUS_ID = re.compile(r"^(?:PCI:)?(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
                    r"(?P<device>[0-9a-fA-F]{1,2})(?:\.(?P<function>[0-7]))?$")


def normalise_bus_id(text):
    """A PCI bus id in sysfs's form, the facts' ``pci_gpus`` one (``0000:3b:00.0``: the
    domain in 4 hex digits, lower case, with the function), from nvidia-smi's
    (``00000000:3B:00.0``), the Xid line's (``PCI:0000:3b:00``, no function: the GPU's is 0)
    or sysfs's own. Anything else is returned stripped, unchanged.

    >>> normalise_bus_id("00000000:3B:00.0"), normalise_bus_id("PCI:0000:3b:00"), normalise_bus_id("0000:3b:00.0")
    ('0000:3b:00.0', '0000:3b:00.0', '0000:3b:00.0')
    >>> normalise_bus_id("3b:00.1"), normalise_bus_id("10000:01:00"), normalise_bus_id(" junk ")
    ('0000:3b:00.1', '10000:01:00.0', 'junk')
    """
    text = str(text or "").strip()
    found = BUS_ID.match(text)
    if not found:
        return text
    domain = int(found.group("domain") or "0", 16)
    return (f"{domain:04x}:{int(found.group('bus'), 16):02x}:{int(found.group('device'), 16):02x}."
            f"{found.group('function') or '0'}")


@dataclass(frozen=True)
class XidEvent:
    """One Xid the driver logged: the GPU's ``bus_id`` (``normalise_bus_id``), the
    ``xid``, the process's ``pid`` where the line names one, and ``text``, the driver's
    message after the Xid (and its pid and name)."""

    bus_id: str
    xid: int
    pid: int | None
    text: str


def parse_xid_line(line):
    """One log line -> its XidEvent, or None when it is no driver Xid line.

    >>> parse_xid_line("Dec 05 01:02:03 gpu1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, "
    ...                "GPU has fallen off the bus.")
    XidEvent(bus_id='0000:3b:00.0', xid=79, pid=1234, text='GPU has fallen off the bus.')
    >>> parse_xid_line("[ 5.1] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception")
    XidEvent(bus_id='0000:cb:00.0', xid=13, pid=None, text='Graphics Exception')
    >>> parse_xid_line("NVRM: GPU at PCI:0000:3b:00: GPU-b850f46d") is None
    True
    """
    if not isinstance(line, str):
        return None
    found = XID_LINE.search(line[:MAX_LINE])
    if not found:
        return None
    rest = found.group("rest").strip()
    pid = None
    owner = PID_NAME.match(rest)
    if owner:
        rest = rest[owner.end():]
        pid = int(owner.group("pid")) if owner.group("pid").isdigit() else None
    return XidEvent(normalise_bus_id(found.group("bus")), int(found.group("xid")), pid, rest.strip())


def parse_xid_lines(text, limit=MAX_EVENTS):
    """The driver's Xid events in a log's text (the kernel's ring buffer, ``journalctl -k``,
    a service's journal), in log order: at most ``limit``, every GPU's first of each Xid
    kept before any repeat. Lines may carry any prefix (a kernel timestamp, journalctl's
    date, host and ``kernel:``); lines longer than MAX_LINE are cut. Never raises: bytes
    are decoded, anything else is no event.

    >>> log = "\\n".join(["[1.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=7, name=x, Graphics Exception"] * 3
    ...                   + ["[2.0] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."])
    >>> [event.xid for event in parse_xid_lines(log, limit=2)]
    [13, 79]
    >>> parse_xid_lines(None), parse_xid_lines(b"\\xff\\x00 junk")
    ([], [])
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str) or limit <= 0:
        return []
    firsts, repeats, seen = [], [], set()
    for number, line in enumerate(text.splitlines()):
        if "NVRM: Xid" not in line[:MAX_LINE]:
            continue
        event = parse_xid_line(line)
        if event is None:
            continue
        key = (event.bus_id, event.xid)
        if key not in seen and len(firsts) < limit:
            seen.add(key)
            firsts.append((number, event))
        elif len(repeats) < limit:
            repeats.append((number, event))
        if len(firsts) >= limit:
            break
    kept = firsts + repeats[:limit - len(firsts)]
    return [event for _, event in sorted(kept, key=lambda item: item[0])]


def describe(event):
    """One sentence for an event: the Xid, its GPU, NVIDIA's description and action.

    >>> describe(XidEvent("0000:3b:00.0", 79, None, "GPU has fallen off the bus."))
    "the driver logged Xid 79 on GPU 0000:3b:00.0: GPU has fallen off the bus; NVIDIA's action: reboot"
    """
    row = event_action(event)
    return f"the driver logged Xid {event.xid} on GPU {event.bus_id}: {row.name}; NVIDIA's action: {row.action}"
