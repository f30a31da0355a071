"""The probe's dcgm section (files/probe.d/dcgm.sh), the real script run here against a
scratch root (PROBE_FS_ROOT, as tests/unit/test_probe_imex.py runs its section) with
stand-in tools on the base PATH; the parser and schema are the product's.

review5: the DCGM step decided whether to restart the host engine only from whether this
run moved DCGM's packages, so a run stopped between apt and the restart left the old
nv-hostengine running for good, and validate never named starting a stopped nvidia-dcgm.
"""

import os

from tests.unit.test_probe_driver import replay, run_probe_section, write


def run_dcgm_probe(tmp_path):
    return run_probe_section(tmp_path, "dcgm", {"id": "debian", "version_id": "12", "arch": "x86_64"})


def node(tmp_path, active="active", enabled="enabled", started_ticks=100000, unpacked=1_700_000_100):
    """A node whose nvidia-dcgm runs pid 4242, started ``started_ticks`` ticks after a boot at
    1_700_000_000, and whose DCGM packages were last unpacked at ``unpacked``."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    replay(bin_dir, "systemctl", f"Id=nvidia-dcgm.service\nLoadState=loaded\nActiveState={active}\n"
                                 f"UnitFileState={enabled}\nMainPID={4242 if active == 'active' else 0}\n")
    fields = " ".join(["S", *["0"] * 18, str(started_ticks), "0", "0"])
    write(root / "proc" / "4242" / "stat", f"4242 (nv-hostengine) {fields}\n")
    write(root / "proc" / "stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n")
    for name in ("datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda13"):
        listed = root / "var" / "lib" / "dpkg" / "info" / f"{name}.list"
        write(listed, "/usr/bin/nv-hostengine\n")
        os.utime(listed, (unpacked, unpacked))


def test_a_node_without_dcgm(tmp_path):
    _, dcgm = run_dcgm_probe(tmp_path)
    assert dcgm == {"unit": None, "engine_predates_packages": False}


def test_an_engine_started_after_its_packages(tmp_path):
    node(tmp_path, started_ticks=100 * 200, unpacked=1_700_000_100)   # started at +200 s, unpacked at +100 s
    _, dcgm = run_dcgm_probe(tmp_path)
    assert dcgm == {"unit": {"load_state": "loaded", "active_state": "active", "unit_file_state": "enabled"},
                    "engine_predates_packages": False}


def test_an_engine_started_before_its_packages_were_replaced(tmp_path):
    node(tmp_path, started_ticks=100 * 50, unpacked=1_700_000_100)   # started at +50 s, unpacked at +100 s
    _, dcgm = run_dcgm_probe(tmp_path)
    assert dcgm["engine_predates_packages"] is True


def test_a_stopped_disabled_unit(tmp_path):
    node(tmp_path, active="inactive", enabled="disabled", started_ticks=100 * 50)
    _, dcgm = run_dcgm_probe(tmp_path)
    assert dcgm == {"unit": {"load_state": "loaded", "active_state": "inactive", "unit_file_state": "disabled"},
                    "engine_predates_packages": False}
