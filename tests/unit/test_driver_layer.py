"""facts/sections/driver_layer.py's parsers on real tool output (tests/fixtures/driver: each file's
header names its source): nvidia-smi -q and topo -m as NVIDIA's tools print them, the
module's banner, the bridges' ACS controls above each GPU, dkms status."""

from pathlib import Path

import pytest

from facts.sections.driver_layer import (acs_paths, loaded_module, parse_dkms_status, parse_modinfo,
                                         parse_module_banner, parse_smi_query, parse_topology)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "driver"


def sample(name):
    """A recorded output without its header (the "# " lines up to "#---")."""
    text = (FIXTURES / name).read_text()
    return text.split("#---\n", 1)[1]


H100_BUSES = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
              "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]


@pytest.mark.parametrize("name,buses,persistence,mig,fabric", [
    ("smi-q-h100-sxm-x8.txt", H100_BUSES, "Enabled", "Disabled", ("Completed", "Success")),
    ("smi-q-h100-nvl-x2.txt", None, "Enabled", "Disabled", ("N/A", "N/A")),
    ("smi-q-h20-mig.txt", ["00000000:BA:00.0"], "Enabled", "Enabled", (None, None)),
])
def test_smi_query(name, buses, persistence, mig, fabric):
    gpus = parse_smi_query(sample(name))
    if buses is not None:
        assert [gpu["bus_id"] for gpu in gpus] == buses
    assert [gpu["index"] for gpu in gpus] == list(range(len(gpus))) and gpus
    for gpu in gpus:
        assert (gpu["persistence_mode"], gpu["mig_mode"]) == (persistence, mig)
        assert (gpu["fabric_state"], gpu["fabric_status"]) == fabric


def test_smi_query_without_devices_is_no_gpu():
    assert parse_smi_query(sample("smi-no-devices.txt")) == []


def test_smi_query_reads_the_mig_mode_not_another_blocks_current():
    """Many blocks have a "Current" (Driver Model, GPU Operation Mode, ECC Mode): only MIG Mode's counts."""
    text = sample("smi-q-h100-sxm-x8.txt").replace("    MIG Mode\n        Current                           : Disabled",
                                                   "    MIG Mode\n        Current                           : Enabled", 1)
    assert [gpu["mig_mode"] for gpu in parse_smi_query(text)] == ["Enabled"] + ["Disabled"] * 7


@pytest.mark.parametrize("name,pairs", [
    ("topo-pxb-pix-sys-x4.txt", {(0, 1): "PXB", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS",
                                 (2, 3): "PIX"}),
    ("topo-nv3-x2.txt", {(0, 1): "NV3"}),
    ("topo-phb-x2-rtx-pro-6000.txt", {(0, 1): "PHB"}),
    ("topo-phb-x2-gpu-numa-id.txt", {(0, 1): "PHB"}),
])
def test_topology(name, pairs):
    assert {(pair["a"], pair["b"]): pair["link"] for pair in parse_topology(sample(name))} == pairs


def test_topology_header_in_terminal_escapes():
    """nvidia-smi underlines the header with escapes (as collect_env reports show it)."""
    text = "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\x1b[0m\n" + sample("topo-nv3-x2.txt").split("\n", 1)[1]
    assert parse_topology(text) == [{"a": 0, "b": 1, "link": "NV3"}]


@pytest.mark.parametrize("text", ["", "Failed to initialize NVML: Driver/library version mismatch"])
def test_topology_without_a_matrix_is_none(text):
    assert parse_topology(text) is None


@pytest.mark.parametrize("name,version,flavour", [
    ("proc-version-open.txt", "565.57.01", "open"),
    ("proc-version-open-jetson.txt", "35.3.1", "open"),
    ("proc-version-proprietary.txt", "515.76", "proprietary"),
])
def test_module_banner(name, version, flavour):
    banner, parsed_version, parsed_flavour = parse_module_banner(sample(name))
    assert (parsed_version, parsed_flavour) == (version, flavour)
    assert banner.startswith("NVRM version: ") and "\n" not in banner


@pytest.mark.parametrize("proc,sys_version,expected", [
    (None, None, {"loaded": False, "version": None, "flavour": None, "banner": None}),
    (None, "580.95.05\n", {"loaded": True, "version": "580.95.05", "flavour": None, "banner": None}),
    ("garbled", "580.95.05", {"loaded": True, "version": "580.95.05", "flavour": None, "banner": "garbled"}),
    (None, "not a version", {"loaded": True, "version": None, "flavour": None, "banner": None}),
])
def test_loaded_module(proc, sys_version, expected):
    assert loaded_module(proc, sys_version) == expected


@pytest.mark.parametrize("text,expected", [
    ("filename:       /lib/modules/6.8.0-45-generic/kernel/nvidia-580srv/nvidia.ko\nversion:        580.95.05\n"
     "license:        NVIDIA", {"version": "580.95.05", "license": "NVIDIA", "flavour": "proprietary"}),
    ("version:        580.95.05\nlicense:        Dual MIT/GPL",
     {"version": "580.95.05", "license": "Dual MIT/GPL", "flavour": "open"}),
    ("modinfo: ERROR: Module nvidia not found.", None),
])
def test_modinfo(text, expected):
    assert parse_modinfo(text) == expected


def test_acs_paths_join_the_bridges_with_their_controls():
    # The controls as the probe's driver_acs reads them from lspci (tests/unit/test_probe_driver.py).
    controls = {
        "0000:00:01.2": "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-",
        "0000:02:08.0": "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-",
        "0000:00:02.0": "SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-",
    }
    entries = acs_paths(["0000:03:00.0 0000:00:02.0", "0000:83:00.0 0000:00:01.2 0000:02:08.0",
                         "0000:04:00.0 0000:00:01.0"], controls)
    assert [(entry["bridge"], entry["redirect"]) for entry in entries] == [
        ("0000:00:02.0", False), ("0000:00:01.2", True), ("0000:02:08.0", True), ("0000:00:01.0", False)]
    # Read without root, lspci shows no capability: no control, no redirect claimed.
    assert entries[-1]["ctl"] == ""


def test_dkms_status_both_formats():
    assert parse_dkms_status(sample("dkms-status-3.txt")) == [
        {"module": "nvidia", "version": "570.172.08", "kernel": "6.12.10-76061203-generic", "status": "installed"},
        {"module": "nvidia", "version": "570.172.08", "kernel": "6.16.3-76061603-generic", "status": "installed"}]
    assert parse_dkms_status(sample("dkms-status-2.txt")) == [
        {"module": "nvidia", "version": "460.91.03", "kernel": "5.11.0-36-generic", "status": "installed"}]
    assert parse_dkms_status("nvidia/580.95.05: added") == [
        {"module": "nvidia", "version": "580.95.05", "kernel": "", "status": "added"}]
