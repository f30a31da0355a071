"""The probe's PCI section (files/probe.d/pci.sh) (``pci_gpus``), the real script run here on a scratch sysfs
(the probe's PROBE_FS_ROOT input, as tests/unit/test_probe_driver.py gives it; the product's
ProbeInputs never sets it), parsed and schema-checked by the product.
The sandbox's PCI stand-in (sandbox/gpu_standin.py install_pci, copied as node-init.sh
copies it) is read the same way: each profile's bus names the GPUs its nvidia-smi lists."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.facts_schema import check
from bringup.gpu_ids import bus_gpus, gpu_model, pci_gpus_sms
from facts.probe_output import build_document
from facts.probe_script import probe_script
from sandbox import gpu_standin
from sandbox.driver_texts import profile_gpus
from tests.unit.test_probe_driver import pci_device, write

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = probe_script()
GPUS = ROOT / "tests" / "fixtures" / "gpus"
WITH_PCI = sorted(path.name for path in GPUS.iterdir() if (path / "pci.txt").is_file())


def run_pci_probe(root, sections="pci"):
    """The probe's sections (default: the PCI one alone; "" for the whole probe) with its
    files under ``root`` -> the facts document."""
    env = {"PATH": "/usr/bin:/bin", "PROBE_SERVICE_PATH": "/nonexistent", "PROBE_FS_ROOT": str(root)} | (
        {"PROBE_SECTIONS": sections} if sections else {})
    run = subprocess.run(["sh", "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60, check=True)
    document = build_document(run.stdout.splitlines(), ["pci_gpus"])
    check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [], **document})
    return run.stdout, document["pci_gpus"]


def test_nvidia_display_and_3d_controllers_only(tmp_path):
    """A 3D controller and a VGA one of NVIDIA's are GPUs (the classes NVIDIA's module
    binds); NVIDIA's audio function, NVSwitch bridge and "other" display controller, and
    another vendor's VGA controller, are not."""
    root = tmp_path / "root"
    pci_device(root, "pci0000:00/0000:00:01.0/0000:17:00.0", "0x10de", "0x030200")
    write(root / "sys/devices/pci0000:00/0000:00:01.0/0000:17:00.0/device", "0x2bb5\n")
    pci_device(root, "pci0000:80/0000:80:01.0/0000:83:00.0", "0x10de", "0x030000")
    write(root / "sys/devices/pci0000:80/0000:80:01.0/0000:83:00.0/device", "0x2b85\n")
    pci_device(root, "pci0000:80/0000:80:01.0/0000:83:00.1", "0x10de", "0x040300")  # HD audio
    pci_device(root, "pci0000:00/0000:00:05.0", "0x10de", "0x068000")  # an NVSwitch ("Bridge")
    pci_device(root, "pci0000:00/0000:00:06.0", "0x10de", "0x038000")  # "other" display controller
    for function in ("pci0000:80/0000:80:01.0/0000:83:00.1", "pci0000:00/0000:00:05.0", "pci0000:00/0000:00:06.0",
                     "pci0000:00/0000:00:02.0"):
        write(root / "sys/devices" / function / "device", "0x22a3\n")
    pci_device(root, "pci0000:00/0000:00:02.0", "0x8086", "0x030000")  # the board's VGA
    raw, found = run_pci_probe(root)
    assert found == [{"bus_id": "0000:17:00.0", "vendor": "10de", "device": "2bb5", "class": "0302", "driver": "none"},
                     {"bus_id": "0000:83:00.0", "vendor": "10de", "device": "2b85", "class": "0300", "driver": "none"}], raw
    assert [gpu_model(gpu).name for gpu in found] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                                      "NVIDIA GeForce RTX 5090"]


def test_each_gpu_names_the_driver_bound_to_it_and_a_vm_s_gpu_is_not_the_hosts(tmp_path):
    """The device's ``driver`` link, as sysfs makes it (a link into /sys/bus/pci/drivers/<name>),
    read with ``test -ef``: nvidia, vfio-pci (passthrough: not among the host's GPUs), nouveau,
    another driver, none."""
    root = tmp_path / "root"
    drivers = root / "sys" / "bus" / "pci" / "drivers"
    bound = {"17": "nvidia", "27": "vfio-pci", "37": "nouveau", "47": "pci-stub", "57": None}
    for bus, driver in bound.items():
        path = f"pci0000:00/0000:00:01.0/0000:{bus}:00.0"
        pci_device(root, path, "0x10de", "0x030200")
        write(root / "sys/devices" / path / "device", "0x2bb5\n")
        if driver:
            (drivers / driver).mkdir(parents=True, exist_ok=True)
            link = root / "sys/devices" / path / "driver"
            link.symlink_to(os.path.relpath(drivers / driver, link.parent))
    raw, found = run_pci_probe(root)
    assert [(gpu["bus_id"], gpu["driver"]) for gpu in found] == [
        ("0000:17:00.0", "nvidia"), ("0000:27:00.0", "vfio-pci"), ("0000:37:00.0", "nouveau"),
        ("0000:47:00.0", "other"), ("0000:57:00.0", "none")], raw
    assert [gpu["bus_id"] for gpu in bus_gpus({"pci_gpus": found})] == [
        "0000:17:00.0", "0000:37:00.0", "0000:47:00.0", "0000:57:00.0"]


def test_a_bus_without_nvidia_gpus_is_empty_and_no_sysfs_is_null(tmp_path):
    root = tmp_path / "root"
    pci_device(root, "pci0000:00/0000:00:02.0", "0x8086", "0x030000")
    assert run_pci_probe(root)[1] == []
    raw, found = run_pci_probe(tmp_path / "nowhere")
    assert found is None and "@@ pci-gpus rc=1" in raw


def test_the_whole_probe_carries_the_pci_section(tmp_path):
    root = tmp_path / "root"
    pci_device(root, "pci0000:00/0000:00:01.0/0000:17:00.0", "0x10de", "0x030200")
    write(root / "sys/devices/pci0000:00/0000:00:01.0/0000:17:00.0/device", "0x2901\n")
    raw, found = run_pci_probe(root, sections="")
    assert raw.count("@@ pci-gpus rc=0\n") == 1 and [gpu["device"] for gpu in found] == ["2901"]


def sandbox_bus(tmp_path, profile):
    """The node's /sys/bus/pci/devices of *profile*: install_pci into a node's upper dir
    (its lower layer holding the directories above, as the base image does), then the
    copy node-init.sh makes onto its tmpfs (links kept, as `cp -R` keeps them)."""
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    (lower / gpu_standin.NODE_PCI_DATA).mkdir(parents=True)
    upper.mkdir()
    gpu_standin.install_pci(upper, lower, profile)
    root = tmp_path / "root"
    bus = root / "sys" / "bus" / "pci" / "devices"
    bus.mkdir(parents=True)
    data = upper / gpu_standin.NODE_PCI_DATA
    if data.is_dir():
        shutil.copytree(data, bus, symlinks=True, dirs_exist_ok=True)
    return root


@pytest.mark.parametrize("profile", WITH_PCI)
def test_each_sandbox_profile_bus_names_its_recorded_gpus(tmp_path, profile):
    """The stand-in's bus agrees with the stand-in's nvidia-smi: the same bus ids, and the
    PCI table names each device as the recorded nvidia-smi names that GPU."""
    root = sandbox_bus(tmp_path, profile)
    found = run_pci_probe(root)[1]
    recorded = profile_gpus(GPUS / profile)
    assert [gpu["bus_id"] for gpu in found] == [gpu["bus_id"].lower()[4:] for gpu in recorded]
    assert [gpu_model(gpu).name for gpu in found] == [gpu["name"] for gpu in recorded]
    smis = {line.split(",")[2].strip() for line in (GPUS / profile / "query.csv").read_text().splitlines()}
    assert {str(sm) for sm in pci_gpus_sms({"pci_gpus": found})} == smis
    mode = (root / "sys/bus/pci/devices" / found[0]["bus_id"] / "vendor").stat().st_mode & 0o777
    assert mode == 0o444


@pytest.mark.parametrize("profile", ["none", "driver-failed"])
def test_profiles_without_gpus_on_record_have_an_empty_bus(tmp_path, profile):
    assert run_pci_probe(sandbox_bus(tmp_path, profile))[1] == []


def test_node_init_masks_the_hosts_bus_with_the_profiles():
    """node-init.sh mounts the tmpfs over the node's bus whatever the profile (the host's
    devices never show) and copies install_pci's tree from where install_pci puts it."""
    init = (ROOT / "sandbox" / "files" / "node-init.sh").read_text()
    block = init.split("# ---- The PCI stand-in", 1)[1].split("# ---- end of the PCI stand-in ----", 1)[0]
    assert f"pci_data=$root/{gpu_standin.NODE_PCI_DATA}\n" in block
    assert 'tmpfs "$root/sys/bus/pci/devices"' in block.split("if [ -d \"$pci_data\" ]", 1)[0]
    subprocess.run(["sh", "-n", str(ROOT / "sandbox" / "files" / "node-init.sh")], check=True)
    # tmpfs gives each file a page: the largest profile's files must fit in the mount's size=
    # (at 64k an 8-GPU node's copy failed with "No space left on device" and the node did not boot).
    size = re.search(r'size=(\d+)([km])\b[^\n]*"\$root/sys/bus/pci/devices"', block)
    pages = max(3 * len(gpu_standin.pci_devices(GPUS / profile)) for profile in WITH_PCI)
    assert size and pages * 4096 * 2 <= int(size[1]) * {"k": 1024, "m": 1024 * 1024}[size[2]], size


def test_a_gpu_bound_to_a_vfio_pci_variant_driver_is_a_vms(tmp_path):
    """NVIDIA's Grace Hopper GPUs pass through with vfio-pci's variant driver for them,
    nvgrace-gpu-vfio-pci (the kernel's drivers/vfio/pci/nvgrace-gpu: /sys/bus/pci/drivers/
    nvgrace_gpu_vfio_pci): a VM's GPU as one on vfio-pci is, not one of the host's that fell off
    the bus (review1: it read "other", was counted and found missing from the driver)."""
    root = tmp_path / "root"
    drivers = root / "sys" / "bus" / "pci" / "drivers"
    path = "pci0000:00/0000:00:01.0/0000:09:01.0"
    pci_device(root, path, "0x10de", "0x030200")
    write(root / "sys/devices" / path / "device", "0x2342\n")
    (drivers / "nvgrace_gpu_vfio_pci").mkdir(parents=True)
    link = root / "sys/devices" / path / "driver"
    link.symlink_to(os.path.relpath(drivers / "nvgrace_gpu_vfio_pci", link.parent))
    raw, found = run_pci_probe(root)
    assert [(gpu["bus_id"], gpu["driver"]) for gpu in found] == [("0000:09:01.0", "vfio-pci")], raw
    assert bus_gpus({"pci_gpus": found}) == []
