"""bringup/xid.py: NVIDIA's Xid catalog as a table, and the parser of the driver's Xid lines,
on public samples (tests/fixtures/xid/, each file quoting one public report and citing it in
its first line)."""

import re
from pathlib import Path

import pytest

from bringup import xid
from bringup.xid import XidEvent, event_action, normalise_bus_id, parse_xid_line, parse_xid_lines, xid_action

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "fixtures" / "xid"
QUOTED = re.compile(r"^# Quoted from (?:public report|NVIDIA's documentation) (https://\S+) \(not recorded here\)$")

# sample -> its events: (bus id, Xid, pid, the action of event_action), in log order.
EXPECTED = {
    "open-gpu-kernel-modules-1151": [("0000:01:00.0", 79, None, "reboot"), ("0000:01:00.0", 154, None, "reset_gpu")],
    "nvsentinel-155": [("0000:44:00.0", 79, None, "reboot")],
    "vllm-5901": [("0000:43:00.0", 13, None, "restart_app")] * 6,
    "gpud-46": [("0000:cb:00.0", 13, None, "restart_app")] * 3 + [("0000:cb:00.0", 109, 1797828, "reset_gpu")],
    "akash-support-244": [("0000:00:05.0", 43, 1045242, "none"), ("0000:00:05.0", 43, 1084984, "none"),
                          ("0000:00:07.0", 31, 2512125, "restart_app"), ("0000:00:08.0", 94, None, "restart_app")],
    "open-gpu-kernel-modules-1150": [
        (f"0000:{bus}:00.0", 45, pid, "follow_other")
        for bus, pid in [("dc", 1818990), ("ed", 1818992), ("ba", 1818989), ("97", 1818987), ("dc", 1818990),
                         ("ba", 1818989), ("ed", 1818992)]],
    "proton-8072": [("0000:01:00.0", 13, pid, "restart_app") for pid in (12770, 13692, 14559)],
    "bumblebee-677": [("0000:01:00.0", 32, None, "restart_app")] * 2 + [("0000:01:00.0", 31, None, "restart_app")],
    "nvidia-xid-docs": [("0000:03:00.0", 14, None, "none"), ("0000:5a:00.0", 79, None, "reboot")],
}
# sample -> the driver's message of its first event (what follows the Xid, pid and name).
FIRST_TEXT = {
    "open-gpu-kernel-modules-1151": "GPU has fallen off the bus.",
    "proton-8072": "Graphics Exception: channel 0x00000009, Class 0000c997, Offset 00000000, Data 00000000",
    "bumblebee-677": "Channel ID 00000000 intr 00004000",
    "open-gpu-kernel-modules-1150": "Ch 00000001 caused by previous Xid 149",
    "nvidia-xid-docs": "Channel 00000001",
}


def sample(name):
    return (SAMPLES / f"{name}.log").read_text()


def test_every_sample_is_expected():
    assert {path.stem for path in SAMPLES.glob("*.log")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_cites_its_source_and_its_header_holds_no_event(name):
    lines = sample(name).splitlines()
    assert QUOTED.match(lines[0]), lines[0]
    assert parse_xid_lines("\n".join(line for line in lines if line.startswith("#"))) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_parses_to_its_events(name):
    events = parse_xid_lines(sample(name))
    assert [(e.bus_id, e.xid, e.pid, event_action(e).action) for e in events] == EXPECTED[name]
    if name in FIRST_TEXT:
        assert events[0].text == FIRST_TEXT[name]


@pytest.mark.parametrize("number,name,action,severity", [
    (79, "GPU has fallen off the bus", "reboot", "blocker"),
    (48, "Double Bit ECC Error", "reset_gpu", "blocker"),
    (95, "Uncontained memory error", "reset_gpu", "blocker"),
    (64, "GPU memory remapping failure", "reset_gpu", "blocker"),
    (119, "GSP RPC Timeout", "reset_gpu", "blocker"),
    (74, "NVLINK Error", "reset_gpu", "blocker"),
    (54, "Auxiliary power is not connected to the GPU board", "check_mechanicals", "blocker"),
    (151, "Key rotation Error", "reboot", "blocker"),
    (94, "Contained memory error", "restart_app", "warning"),
    (13, "Graphics Engine Exception", "restart_app", "warning"),
    (31, "GPU memory page fault", "restart_app", "warning"),
    (78, "vGPU Start Error", "update_driver", "warning"),
    (142, "NVENC3 Error", "contact_support", "warning"),
    (149, "NVLINK: NETIR Error", "decode_nvlink", "warning"),
    (154, "GPU Recovery Action Changed", "follow_recovery_action", "warning"),
    (63, "GPU memory remapping event", "none", "info"),
    (43, "GPU stopped processing", "none", "info"),
    (92, "High single-bit ECC error rate", "none", "info"),
    (45, "Preemptive cleanup, due to previous errors", "follow_other", "info"),
])
def test_catalog_rows(number, name, action, severity):
    row = xid_action(number)
    assert (row.xid, row.name, row.action, row.severity) == (number, name, action, severity)
    assert row.source.startswith(xid.CATALOG) and f"Xid {number}," in row.source


def test_every_row_maps_a_bucket_to_an_action_with_its_severity():
    assert len(xid.TABLE) == len(xid.ROWS) >= 90
    for number, _, bucket in xid.ROWS:
        row = xid.TABLE[number]
        assert row.action == xid.BUCKETS[bucket] and row.severity == xid.ACTIONS[row.action][0]
        assert row.source.endswith(f"immediate action {bucket}")
        assert row.advice
    assert set(xid.BUCKETS.values()) <= set(xid.ACTIONS)
    assert {severity for severity, _ in xid.ACTIONS.values()} == {"info", "warning", "blocker"}
    # A GPU that needs a reset, a reboot or hands on it blocks; nothing else does.
    assert {a for a, (s, _) in xid.ACTIONS.items() if s == "blocker"} == {"reset_gpu", "reboot", "check_mechanicals"}


@pytest.mark.parametrize("value", [0, 1, 9999, -5, None, "x", "79x", 3.5, [79]])
def test_an_xid_not_in_the_table_gets_the_default(value):
    row = xid_action(value)
    assert (row.action, row.severity) == ("contact_support", "warning")
    assert "not in this project's Xid table" in row.name and "not a used row" in row.source


@pytest.mark.parametrize("text,action", [
    ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "reboot"),
    ("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "reset_gpu"),
    ("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", "none"),
    ("GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", "reset_gpu"),
    ("GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)", "reset_gpu"),
    ("GPU recovery action changed from 0x0 (None) to 0x9 (Something New)", "follow_recovery_action"),
    ("", "follow_recovery_action"),
])
def test_xid_154_takes_the_action_its_line_names(text, action):
    row = event_action(XidEvent("0000:01:00.0", 154, None, text))
    assert row.action == action and row.severity == xid.ACTIONS[action][0]


def test_only_xid_154_reads_its_text():
    assert event_action(XidEvent("0000:01:00.0", 13, None, "to 0x2 (Node Reboot Required)")).action == "restart_app"


@pytest.mark.parametrize("given,expected", [
    ("00000000:3B:00.0", "0000:3b:00.0"),          # nvidia-smi's
    ("0000:3b:00.0", "0000:3b:00.0"),              # sysfs's (pci_gpus)
    ("PCI:0000:3b:00", "0000:3b:00.0"),            # the Xid line's: no function
    ("0000:03:00", "0000:03:00.0"),
    ("3b:00.1", "0000:3b:00.1"),
    ("0001:C1:00.0", "0001:c1:00.0"),
    ("10000:01:00", "10000:01:00.0"),              # a VMD domain keeps its fifth digit
    ("  00000000:18:00.0\n", "0000:18:00.0"),
    ("not a bus id", "not a bus id"),
    ("", ""),
    (None, ""),
])
def test_normalise_bus_id(given, expected):
    assert normalise_bus_id(given) == expected


@pytest.mark.parametrize("line", [
    "NVRM: GPU at PCI:0000:01:00: GPU-5f7a9ad6-8a58-1f45-473a-76281b72153c",
    "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:01:00): , GPU has fallen off the bus.",
    "NVRM: Xid (PCI:zz:01:00): 79, x",
    "NVRM: Xid (PCI:0000:01:00): 1234567, x",
    "NVRM Xid (PCI:0000:01:00): 79, x",
    "",
])
def test_lines_that_are_not_xid_lines(line):
    assert parse_xid_line(line) is None


@pytest.mark.parametrize("junk", [
    None, 42, b"\xff\xfe\x00NVRM: Xid (PCI:\x00", "\x00" * 1000, "NVRM: Xid (" * 10000, ["NVRM: Xid"],
    "\r\n".join(["NVRM: Xid (PCI:0000:01:00): 79"] * 3),
])
def test_junk_never_raises(junk):
    events = parse_xid_lines(junk)
    assert isinstance(events, list) and all(isinstance(event, XidEvent) for event in events)


def test_carriage_returns_and_a_missing_message():
    events = parse_xid_lines("NVRM: Xid (PCI:0000:01:00): 79\r\nNVRM: Xid (PCI:0000:02:00): 79, \r\n")
    assert [(e.bus_id, e.xid, e.text) for e in events] == [("0000:01:00.0", 79, ""), ("0000:02:00.0", 79, "")]


def test_a_long_line_is_cut_before_it_is_read():
    far = "x" * xid.MAX_LINE + " NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus."
    near = "NVRM: Xid (PCI:0000:01:00): 79, " + "y" * (10 * xid.MAX_LINE)
    assert parse_xid_lines(far) == []
    [event] = parse_xid_lines(near)
    assert event.xid == 79 and len(event.text) < xid.MAX_LINE


def test_a_flood_of_one_xid_never_hides_another():
    flood = ["[1.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=7, name=python3, Graphics Exception"] * 10000
    log = "\n".join(flood[:5000] + ["[2.0] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."]
                    + ["[3.0] NVRM: Xid (PCI:0000:5e:00): 13, pid=8, name=python3, Graphics Exception"] + flood[5000:])
    events = parse_xid_lines(log)
    assert len(events) == xid.MAX_EVENTS
    assert [(e.bus_id, e.xid) for e in events if (e.bus_id, e.xid) != ("0000:3b:00.0", 13)] == [
        ("0000:3b:00.0", 79), ("0000:5e:00.0", 13)]
    # In log order: the first repeats, then the later firsts.
    assert [e.xid for e in events[-2:]] == [79, 13]


def test_the_bound_is_on_distinct_events_too():
    log = "\n".join(f"NVRM: Xid (PCI:0000:{n % 256:02x}:00): {8 + n // 256}, x" for n in range(3000))
    assert len(parse_xid_lines(log)) == xid.MAX_EVENTS
    assert len(parse_xid_lines(log, limit=3)) == 3 and parse_xid_lines(log, limit=0) == []


def test_describe_names_the_xid_the_gpu_and_the_action():
    [event] = parse_xid_lines(sample("nvsentinel-155"))
    assert xid.describe(event) == ("the driver logged Xid 79 on GPU 0000:44:00.0: GPU has fallen off the bus; "
                                   "NVIDIA's action: reboot")
