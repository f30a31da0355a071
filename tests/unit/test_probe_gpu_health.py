"""The probe's gpu_health section (files/probe.d/gpu_health.sh), the real script run here
against a scratch root (PROBE_FS_ROOT, as tests/unit/test_probe_driver.py runs the driver
layer) with stand-in tools on the base PATH; its parser on public samples
(tests/fixtures/health/, each citing its source). The parser and schema are the product's."""

from pathlib import Path

import pytest

from facts.sections.gpu_health import FIELDS, parse_health_rows, parse_remapped_rows, parse_xid_lines
from tests.unit.test_probe_driver import replay, run_probe_section, standin

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "health"
OS = {"id": "debian", "version_id": "12", "arch": "x86_64"}
HEALTHY = "0, 00000000:18:00.0, 0, 0, [N/A], 1, 5, 16, 16, Active, Not Active, Not Active, Not Active, Not Active, 32, 55"


def sample(name):
    return (FIXTURES / name).read_text().split("#---\n", 1)[1]


def test_the_fields_asked_are_the_parsers():
    """The probe asks exactly the fields the parser reads, in its order."""
    script = (Path(__file__).resolve().parents[2] / "files" / "probe.d" / "gpu_health.sh").read_text()
    asked = "".join(line.split("=", 1)[1].replace("$HEALTH_FIELDS,", "") + ","
                    for line in script.splitlines() if line.startswith("HEALTH_FIELDS=")).rstrip(",")
    assert asked.split(",") == [field for field, _ in FIELDS]


def test_a_node_without_nvidia_smi_or_a_journal(tmp_path):
    """No nvidia-smi, no systemd, no dmesg: facts, not failures."""
    _, health = run_probe_section(tmp_path, "gpu_health", OS)
    assert health == {"query_error": "nvidia-smi not found", "gpus": [],
                      "kernel_log": {"source": "none", "read_error": "no kernel log reader found", "xid": []}}


def test_a_healthy_gpu_and_a_journal_without_xid(tmp_path):
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    replay(bin_dir, "nvidia-smi", HEALTHY + "\n")
    replay(bin_dir, "journalctl", "nvidia 0000:18:00.0: enabling device\nNVRM: loading NVIDIA UNIX Open Kernel Module\n")
    _, health = run_probe_section(tmp_path, "gpu_health", OS)
    assert health["query_error"] is None and health["kernel_log"] == {"source": "journal", "read_error": None,
                                                                      "xid": []}
    gpu = health["gpus"][0]
    assert (gpu["bus_id"], gpu["ecc_uncorrected_volatile"], gpu["retired_pages_pending"], gpu["pcie_gen_current"],
            gpu["idle"], gpu["hw_slowdown"], gpu["remapped_rows"]) == ("0000:18:00.0", 0, None, 1, True, False, None)


def test_the_journal_bounded_to_its_last_xid_lines(tmp_path):
    """A node that logs an Xid in a loop sends the first line of each GPU's each Xid and its
    newest 200 lines, with their GPUs: a flood of Xid 31 does not push an earlier Xid 95 out."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    replay(bin_dir, "nvidia-smi", HEALTHY + "\n")
    lines = "".join(f"NVRM: Xid (PCI:0000:18:00): 31, pid={pid}, name=python3, Ch 00000008, MMU Fault\n"
                    for pid in range(300))
    replay(bin_dir, "journalctl", "NVRM: Xid (PCI:0000:18:00): 95, pid=7, name=python3, Uncontained ECC error\n"
           + lines + sample("xid-lines.txt"))
    _, health = run_probe_section(tmp_path, "gpu_health", OS)
    events = health["kernel_log"]["xid"]
    assert [event["xid"] for event in events[:2]] == [95, 31] and len(events) == 202, len(events)
    assert events[-1]["xid"] == 79 and events[-1]["bus_id"] == "0000:c6:00.0"


def test_a_process_name_of_any_bytes_does_not_cut_the_probe(tmp_path):
    """Any user names the process an Xid line carries: a byte that is no UTF-8 must not end
    pyinfra's reading of the probe (the sections after it lost); it comes as '?'."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    replay(bin_dir, "nvidia-smi", HEALTHY + "\n")
    standin(bin_dir, "journalctl", "printf 'NVRM: Xid (PCI:0000:18:00): 31, pid=9, name=a\\377b, MMU Fault\\n'\n")
    out, health = run_probe_section(tmp_path, "gpu_health", OS)
    assert "name=a?b" in out and health["kernel_log"]["xid"] == [
        {"bus_id": "0000:18:00.0", "xid": 31, "text": "MMU Fault"}]


def test_a_kernel_log_that_cannot_be_read_is_not_one_without_xids(tmp_path):
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    replay(bin_dir, "nvidia-smi", HEALTHY + "\n")
    standin(bin_dir, "journalctl", "echo 'No journal files were found.' >&2; exit 1\n")
    _, health = run_probe_section(tmp_path, "gpu_health", OS)
    assert health["kernel_log"]["read_error"] == "the journal reader exited 1" and health["kernel_log"]["xid"] == []


def test_dmesg_where_systemd_does_not_run(tmp_path):
    bin_dir = tmp_path / "bin"
    replay(bin_dir, "nvidia-smi", HEALTHY + "\n")
    replay(bin_dir, "dmesg", "[ 1843.3] NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\n")
    _, health = run_probe_section(tmp_path, "gpu_health", OS)
    assert health["kernel_log"]["source"] == "dmesg"
    assert [(event["bus_id"], event["xid"]) for event in health["kernel_log"]["xid"]] == [("0000:44:00.0", 79)]


def test_an_older_nvidia_smi_that_refuses_a_field(tmp_path):
    """A driver whose nvidia-smi does not know a field (older than R535) fails the query:
    its words are the fact, and nothing is inferred from them."""
    standin(tmp_path / "bin", "nvidia-smi", 'echo \'Field "temperature.gpu.tlimit" is not a valid field to query.\'\n'
                                            "exit 2\n")
    _, health = run_probe_section(tmp_path, "gpu_health", OS)
    assert health["gpus"] == [] and "not a valid field" in health["query_error"]


@pytest.mark.parametrize("line, expected", [
    ("NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus", ("0000:44:00.0", 79, "GPU has fallen off the bus")),
    ("NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error",
     ("0000:9b:00.0", 94, "Contained ECC error")),
    ("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 "
     "0x00000000 0x00000000)", ("0019:01:00.0", 149, "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 "
                                                      "0x00000000 0x00000000 0x00000000)")),
    ("NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.",
     ("0000:c6:00.0", 79, "GPU has fallen off the bus.")),
    ("NVRM: Xid (PCI:0000:65:00): 64, pid='<unknown>', name=<unknown>, Row Remapper: Failed",
     ("0000:65:00.0", 64, "Row Remapper: Failed")),
    # An Intel VMD domain (five hex digits) stays whole: it names another GPU than 0000:01:00.
    ("NVRM: Xid (PCI:10000:01:00): 79, GPU has fallen off the bus", ("10000:01:00.0", 79,
                                                                      "GPU has fallen off the bus")),
    ("NVRM: GPU at PCI:0000:44:00: GPU-1c2d", None),
])
def test_xid_lines(line, expected):
    """One parser with explain's (bringup/xid.py); the process's pid and name are left out."""
    events = parse_xid_lines([line])
    assert [(e["bus_id"], e["xid"], e["text"]) for e in events] == ([expected] if expected else [])


def test_every_public_xid_sample_parses():
    lines = [line for line in sample("xid-lines.txt").splitlines() if line]
    assert [event["xid"] for event in parse_xid_lines(lines)] == [79, 94, 149, 79]


def test_the_public_remapped_rows_sample():
    assert parse_remapped_rows(sample("smi-q-remapped-rows.txt")) == {
        "0000:18:00.0": {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": None}}


@pytest.mark.parametrize("cell, field, expected", [
    ("[N/A]", "ecc_uncorrected_volatile", None),
    ("[Not Supported]", "hw_slowdown", None),
    ("Yes", "retired_pages_pending", True),
    ("Active", "hw_power_brake_slowdown", True),
    ("-2", "slowdown_margin_c", -2),
    ("8", "pcie_width_current", 8),
])
def test_a_cell_a_gpu_does_not_support_is_none_never_an_error(cell, field, expected):
    position = [name for _, name in FIELDS].index(field)
    cells = [cell.strip() for cell in HEALTHY.split(",")]
    cells[position] = cell
    assert parse_health_rows([", ".join(cells)])[0][field] == expected


def test_a_row_of_another_shape_is_an_error():
    with pytest.raises(ValueError, match="unexpected nvidia-smi health row"):
        parse_health_rows(["0, 00000000:18:00.0, 0"])


def test_an_answer_of_another_shape_is_the_query_error_not_a_failed_host(tmp_path):
    """An nvidia-smi that answers with another row shape (a stand-in of an older release)
    leaves the other facts standing."""
    replay(tmp_path / "bin", "nvidia-smi", "0, NVIDIA B200, 10.0, 183359, 580.82.07\n")
    _, health = run_probe_section(tmp_path, "gpu_health", OS)
    assert health["gpus"] == [] and "unexpected nvidia-smi health row" in health["query_error"]
