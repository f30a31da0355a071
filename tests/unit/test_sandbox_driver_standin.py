"""The sandbox's driver stand-in (sandbox/driver_texts.py, sandbox/files/nvidia-smi) read by
the real probe's driver section (files/probe.d/, run here under a scratch root as
tests/unit/test_probe_driver.py runs it) and judged by the real planner: every profile's
healthy node says nothing, and the files the driver states leave give their findings.

The scratch root holds what a sandbox node would: the stand-in's files as
sandbox/gpu_standin.py writes them, /proc/driver as node-init.sh mounts it, and the
driver states' marks (sandbox/states/*.sh). The sandbox nodes themselves are
tests/sandbox/test_driver_states.py's."""

import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.plan.driver import driver_layer_findings
from sandbox import gpu_standin
from sandbox.driver_texts import driver_texts, profile_gpus
from tests.unit.test_probe_driver import run_driver_probe, write

ROOT = Path(__file__).resolve().parents[2]
GPUS = ROOT / "tests" / "fixtures" / "gpus"
STANDIN = (ROOT / "sandbox" / "files" / "nvidia-smi").read_text()
# The shell tools the nvidia-smi stand-in uses (the probe runs it with its base PATH only).
TOOLS = ("cat", "awk", "ls", "tr", "grep", "mv", "mkdir")
WITH_DRIVER = sorted(path.name for path in GPUS.iterdir() if profile_gpus(path))


def sandbox_root(tmp_path, profile, flavour="open", user_space=None, switches=0, nouveau=False, mig=""):
    """A scratch node of *profile* in the driver states given, and the stand-in on the base PATH."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    data, state = root / gpu_standin.NODE_GPU_DATA, root / "var/lib/sandbox-gpu"
    texts = driver_texts(GPUS / profile, "x86_64")
    for name, text in texts.items():
        write(data / name, text)
    for name in ("smi.txt", "query.csv"):
        write(data / name, (GPUS / profile / name).read_text())
    conf_dir, conf_name, conf_text = gpu_standin.NOUVEAU_BLACKLIST
    write(root / conf_dir / conf_name, conf_text)
    version = texts["driver-version"].strip()
    write(root / gpu_standin.libdir("x86_64") / f"libnvidia-ml.so.{user_space or version}", "")
    write(root / "proc/driver/nvidia/version", texts[f"proc-version-{flavour}"])  # node-init.sh
    for index in range(switches):
        write(root / f"proc/driver/nvidia-nvswitch/devices/0000:0{index + 5}:00.0", "")
    if nouveau:
        write(root / "sys/module/nouveau/initstate", "live\n")
    if mig:
        write(state / "mig-enabled", mig + "\n")
    # The stand-in as installed, reading this root instead of the node's.
    script = STANDIN
    for line, path in (("data=/usr/share/sandbox-gpu", data), ("state=/var/lib/sandbox-gpu", state),
                       ("switches=/proc/driver/nvidia-nvswitch/devices", root / "proc/driver/nvidia-nvswitch/devices")):
        assert script.count(f"\n{line}\n") == 1
        script = script.replace(f"\n{line}\n", f"\n{line.split('=')[0]}={path}\n")
    write(bin_dir / "nvidia-smi", script, 0o755)
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool, path="/usr/bin:/bin"))
    return root


def findings(tmp_path, profile, settings=None):
    """(code, severity) of the planner's driver findings on the scratch node."""
    _, layer = run_driver_probe(tmp_path)
    # The facts' gpus as the probe reads them from query.csv: the compute capability is what counts here.
    rows = [line.split(", ") for line in (GPUS / profile / "query.csv").read_text().splitlines()]
    gpus = [{"index": int(row[0]), "name": row[1], "compute_cap": row[2]} for row in rows]
    facts = {"os": {"id": "debian"}, "gpus": gpus, "driver": {"version": rows[0][4]}, "driver_layer": layer}
    found = []
    driver_layer_findings(facts, Config(**(settings or {})), found.append)
    return sorted((finding.code, finding.severity) for finding in found), layer


@pytest.mark.parametrize("profile", WITH_DRIVER)
def test_every_profile_s_healthy_node_says_nothing(tmp_path, profile):
    sandbox_root(tmp_path, profile)
    codes, layer = findings(tmp_path, profile)
    assert codes == []
    count = len(profile_gpus(GPUS / profile))
    assert layer["module"]["flavour"] == "open" and len(layer["gpus"]) == count
    assert {gpu["persistence_mode"] for gpu in layer["gpus"]} == {"Enabled"}
    assert len(layer["topology"] or []) == count * (count - 1) // 2


def test_four_traps_of_the_pcie_node(tmp_path):
    """proprietary-module, library-mismatch, nouveau-loaded and mig-on on the 8x RTX PRO 6000."""
    sandbox_root(tmp_path, "rtx-pro-6000-x8", flavour="proprietary", user_space="580.105.08", nouveau=True, mig="0")
    codes, layer = findings(tmp_path, "rtx-pro-6000-x8")
    assert codes == [("DRIVER_LIBRARY_MISMATCH", "blocker"), ("DRIVER_OPEN_MODULE_REQUIRED", "blocker"),
                     ("MIG_ENABLED", "warning"), ("NOUVEAU_LOADED", "blocker")]
    assert [gpu["mig_mode"] for gpu in layer["gpus"]] == ["Enabled"] + ["Disabled"] * 7
    # All eight GPUs on MIG and one server asking for one: no whole GPU left, a blocker.
    (tmp_path / "root/var/lib/sandbox-gpu/mig-enabled").write_text("\n".join(map(str, range(8))) + "\n")
    codes, _ = findings(tmp_path, "rtx-pro-6000-x8")
    assert ("MIG_ENABLED", "blocker") in codes


def test_mig_off_through_the_stand_in(tmp_path):
    """`nvidia-smi -i 0 -mig 0`, as the real tool switches MIG, clears mig-on."""
    root = sandbox_root(tmp_path, "h100-x8", mig="0 3")
    done = subprocess.run([shutil.which("sh"), str(tmp_path / "bin/nvidia-smi"), "-i", "0", "-mig", "0"], capture_output=True,
                          text=True, env={"PATH": str(tmp_path / "bin")}, check=True).stdout
    assert done == "Disabled MIG Mode for GPU 00000000:18:00.0.\nAll done.\n"
    assert (root / "var/lib/sandbox-gpu/mig-enabled").read_text().split() == ["3"]
    _, layer = findings(tmp_path, "h100-x8")
    assert [gpu["index"] for gpu in layer["gpus"] if gpu["mig_mode"] == "Enabled"] == [3]


def test_nvswitches_without_fabric_manager(tmp_path):
    """nvswitch-no-fm on the HGX H100: no Fabric Manager runs, so the fabric waits."""
    sandbox_root(tmp_path, "h100-x8", switches=4)
    codes, layer = findings(tmp_path, "h100-x8")
    assert codes == [("FABRIC_MANAGER_MISSING", "blocker"), ("FABRIC_NOT_READY", "blocker")]
    assert layer["nvswitch_count"] == 4 and {gpu["fabric_state"] for gpu in layer["gpus"]} == {"In Progress"}
    assert {pair["link"] for pair in layer["topology"]} == {"NV18"}


def test_the_stand_in_without_assembled_texts_fails_as_recorded(tmp_path):
    """driver-failed has no -q text: the stand-in answers -q with the recorded failure."""
    sandbox_root(tmp_path, "h100-x8")
    data = tmp_path / "root" / gpu_standin.NODE_GPU_DATA
    (data / "smi-q.txt").unlink()
    write(data / "smi.txt", (GPUS / "driver-failed" / "smi.txt").read_text())
    write(data / "exit_code", (GPUS / "driver-failed" / "exit_code").read_text())
    _, layer = run_driver_probe(tmp_path)
    assert layer["gpus"] == []


@pytest.mark.parametrize("lower_lib, expected", [(None, ["libnvidia-ml.so.580.95.05"]), ("580.105.08", [])],
                         ids=["healthy", "library-mismatch below"])
def test_install_driver_writes_the_healthy_node(tmp_path, monkeypatch, lower_lib, expected):
    """install_driver: the blacklist, the banners, the user space at the module's version,
    unless a state's layer below holds another libnvidia-ml (its file would be hidden)."""
    monkeypatch.setattr(gpu_standin, "_libcuda_stub", lambda machine: b"")  # no compiler needed here
    monkeypatch.setattr(gpu_standin.os, "chown", lambda *args: None)  # root:root needs root; not this test's point
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    upper.mkdir()
    if lower_lib:
        write(lower / gpu_standin.libdir("x86_64") / f"libnvidia-ml.so.{lower_lib}", "")
    else:
        lower.mkdir()
    gpu_standin.install_driver(upper, [lower], "rtx-pro-6000-x8")
    libs = upper / gpu_standin.libdir("x86_64")
    assert sorted(path.name for path in libs.glob("libnvidia-ml.so.*")) == expected
    assert "blacklist nouveau" in (upper / "etc/modprobe.d/nvidia-blacklists-nouveau.conf").read_text().splitlines()
    data = upper / gpu_standin.NODE_GPU_DATA
    assert (data / "proc-version-open").read_text().startswith(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  ")
    assert "ASSEMBLED" in (data / "README").read_text()
    assert (data / "module-preinstalled").is_file()  # node-init.sh loads it at boot (no packaged module)
