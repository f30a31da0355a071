"""The probe's driver layer (files/probe.d/driver_layer.sh), the real script run here: its files read under a scratch
root (the probe's PROBE_FS_ROOT input, which the product's ProbeInputs never sets) and
its tools stand-ins on the base PATH that
replay recorded output (tests/fixtures/driver). The parser and the schema are the product's.
"""

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from bringup.facts_schema import check
from bringup.layout import DEFAULT_LAYOUT, NodeLayout, ProbeInputs
from facts.node import probe_command
from facts.probe_output import build_document, index_sections, sections_for
from facts.probe_script import probe_script
from facts.sections.gpu_health import parse_remapped_rows

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "driver"
# The rule for what root may run first, as facts/probe_script.py sends it: run_program asks it.
SCRIPT = (ROOT / "files" / "root-may-run.sh").read_text() + probe_script()
NOBODY = 65534
NOT_FOUND = {"load_state": "not-found", "active_state": "inactive", "unit_file_state": ""}


def sample(name):
    return (FIXTURES / name).read_text().split("#---\n", 1)[1]


def write(path, text, mode=0o644):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def standin(bin_dir, name, script):
    """A stand-in tool: a sh script run with only the base PATH (this directory), so it
    uses the shell's builtins and absolute paths."""
    write(bin_dir / name, "#!/bin/sh\n# STAND-IN for the test\n" + script, 0o755)


def replay(bin_dir, name, text, exit_code=0):
    data = bin_dir.parent / "data" / name
    write(data, text)
    standin(bin_dir, name, f'while IFS= read -r line; do printf "%s\\n" "$line"; done < {data}\nexit {exit_code}\n')


def run_driver_probe(tmp_path):
    """The driver section of the probe (PROBE_SECTIONS=driver_layer) under tmp_path/root,
    the tools in tmp_path/bin -> (the raw output, the parsed driver_layer)."""
    return run_probe_section(tmp_path, "driver_layer", {"id": "debian", "version_id": "12", "arch": "x86_64"})


def run_probe_section(tmp_path, section, os_facts):
    """One section of the probe (PROBE_SECTIONS) under tmp_path/root, the tools in
    tmp_path/bin, its document checked against the schema with ``os_facts`` -> (the raw
    output, the parsed section)."""
    root, bin_dir = (tmp_path / "root").resolve(), tmp_path / "bin"
    root.mkdir(exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    # The base PATH is the stand-ins' alone, with the system's own env and runuser that
    # run_program starts a tool with (no other real tool of this machine can be found).
    for tool in ("env", "runuser"):
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin"))
    run = subprocess.run(["sh", "-c", SCRIPT], env={"PATH": "/usr/bin:/bin", "PROBE_SECTIONS": section,
                                                     "PROBE_SERVICE_PATH": str(bin_dir), "PROBE_FS_ROOT": str(root)},
                         capture_output=True, text=True, timeout=60, check=True)
    document = build_document(run.stdout.splitlines(), [section])
    check({"os": os_facts, "gpus": [], **document})
    return run.stdout, document[section]


def test_the_file_system_root_is_a_test_input_the_product_never_sets():
    """The driver layer's and the PCI section's files are read under PROBE_FS_ROOT, an input
    of the probe (no copy of the script rewritten); the product's command pins it empty, so
    neither its inputs nor the remote session's environment can point it elsewhere."""
    assert "PROBE_FS_ROOT" not in ProbeInputs.defaults().environment()
    setters = [str(path.relative_to(ROOT)) for part in ("bringup", "control", "facts", "tasks", "bench", "sandbox")
               for path in (ROOT / part).rglob("*.py") if "PROBE_FS_ROOT" in path.read_text()]
    assert setters == ["facts/probe_script.py"]
    assert "DRIVER_FS_ROOT=${PROBE_FS_ROOT:-}" in SCRIPT
    # The command's last stage run as sent, the variable set in its environment: it reaches sh empty.
    last = probe_command(ProbeInputs.defaults()).rsplit(" | ", 1)[1]
    assert last.startswith("env -u SHELLOPTS -u BASHOPTS PROBE_FS_ROOT= ") and last.endswith(" sh")
    # Nor do a bash's options (a bash that is sh takes SHELLOPTS from its environment:
    # xtrace would print the env file's lines as the probe reads them).
    run = subprocess.run(["sh", "-c", last[:-len("sh")] + "sh -c 'echo \"[$PROBE_FS_ROOT][$SHELLOPTS]\"'"],
                         env={"PATH": "/usr/bin:/bin", "PROBE_FS_ROOT": "/elsewhere", "SHELLOPTS": "xtrace"},
                         capture_output=True, text=True, check=True)
    assert run.stdout == "[][]\n", run.stderr


def pci_device(root, path, vendor, device_class):
    """A PCI device in the scratch sysfs: its directory under devices/ and its bus link."""
    directory = root / "sys" / "devices" / path
    write(directory / "vendor", vendor + "\n")
    write(directory / "class", device_class + "\n")
    link = root / "sys" / "bus" / "pci" / "devices" / path.rsplit("/", 1)[-1]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(directory, link.parent))


def test_a_node_without_any_driver(tmp_path):
    """Nothing of the driver there, no tool: every part a fact, none an error."""
    _, layer = run_driver_probe(tmp_path)
    assert layer == {
        "module": {"loaded": False, "version": None, "flavour": None, "banner": None},
        "installed_module": None, "nvml_libraries": [], "packages": [],
        "nouveau": {"loaded": False, "blacklisted": False}, "nvswitch_count": 0,
        "units": {name: NOT_FOUND for name in ("nvidia-persistenced", "nvidia-fabricmanager", "nvlsm")},
        "gpus": [], "kernel": {"release": "", "headers": False, "installed": []}, "dkms": None,
        "reboot_required": {"required": False, "packages": []}, "iommu_args": [], "acs": [], "topology": None,
    }


def nvswitch_node(tmp_path):
    """An HGX node as found after an unattended upgrade: the open module loaded, its
    libraries, four NVSwitches, Fabric Manager installed and failed, a reboot pending."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    write(root / "proc/driver/nvidia/version", sample("proc-version-open.txt"))
    write(root / "sys/module/nvidia/version", "565.57.01")  # no newline: still read
    for name in ("libnvidia-ml.so.1", "libnvidia-ml.so.565.57.01", "libnvidia-ml.so.570.86.15"):
        write(root / "usr/lib/x86_64-linux-gnu" / name, "")
    write(root / "etc/modprobe.d/blacklist-nvidia-nouveau.conf", "# generated\nblacklist nouveau\noptions nouveau modeset=0\n")
    write(root / "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=UUID=x ro intel_iommu=on iommu=pt quiet\n")
    write(root / "proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    (root / "lib/modules/6.8.0-45-generic/build").mkdir(parents=True)
    for index in range(4):
        write(root / f"proc/driver/nvidia-nvswitch/devices/0000:0{index + 5}:00.0", "")
    write(root / "run/reboot-required", "*** System restart required ***\n")
    write(root / "run/reboot-required.pkgs", "libnvidia-compute-570\nnvidia-kernel-common-570")
    (root / "run/systemd/system").mkdir(parents=True)
    pci_device(root, "pci0000:00/0000:00:01.2", "0x1022", "0x060400")
    pci_device(root, "pci0000:00/0000:00:01.2/0000:02:08.0", "0x10b5", "0x060400")
    pci_device(root, "pci0000:00/0000:00:01.2/0000:02:08.0/0000:83:00.0", "0x10de", "0x030200")
    pci_device(root, "pci0000:00/0000:00:02.0", "0x8086", "0x060400")
    pci_device(root, "pci0000:00/0000:00:02.0/0000:03:00.0", "0x15b3", "0x020700")
    standin(bin_dir, "nvidia-smi", f'case "$1" in -q) exec {bin_dir.parent}/bin/smi-q ;; topo) exec {bin_dir.parent}/bin/smi-topo ;; esac\nexit 2\n')
    replay(bin_dir, "smi-q", sample("smi-q-h100-sxm-x8.txt"))
    replay(bin_dir, "smi-topo", sample("topo-pxb-pix-sys-x4.txt") + "\nLegend:\n\n  X    = Self\n")
    replay(bin_dir, "modinfo", "filename:       /lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst\n"
           "version:        570.86.15\nlicense:        Dual MIT/GPL\nparm:           NVreg_EnableGpuFirmware:int\n")
    replay(bin_dir, "dpkg-query", "hi |nvidia-driver-570-server-open|570.86.15-0ubuntu1\n"
           "ii |nvidia-fabricmanager-570|570.86.15-1\nrc |nvidia-driver-565|565.57.01-0ubuntu1\n")
    replay(bin_dir, "systemctl", "Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState=active\n"
           "UnitFileState=enabled\n\nId=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=failed\n"
           "UnitFileState=enabled\n\nId=nvlsm.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n")
    replay(bin_dir, "dkms", sample("dkms-status-3.txt"))
    replay(bin_dir, "lspci", sample("lspci-bridges.txt"))
    return root


def test_an_nvswitch_node_with_stand_in_files(tmp_path):
    nvswitch_node(tmp_path)
    raw, layer = run_driver_probe(tmp_path)
    assert layer["module"] == {"loaded": True, "version": "565.57.01", "flavour": "open", "banner":
                               "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  "
                               "(dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024"}
    assert layer["installed_module"] == {"version": "570.86.15", "license": "Dual MIT/GPL", "flavour": "open"}
    assert layer["nvml_libraries"] == ["565.57.01", "570.86.15"]
    assert layer["packages"] == [{"name": "nvidia-driver-570-server-open", "version": "570.86.15-0ubuntu1", "held": True},
                                 {"name": "nvidia-fabricmanager-570", "version": "570.86.15-1", "held": False}]
    assert layer["nouveau"] == {"loaded": False, "blacklisted": True}
    assert layer["nvswitch_count"] == 4
    assert layer["units"]["nvidia-fabricmanager"] == {"load_state": "loaded", "active_state": "failed",
                                                      "unit_file_state": "enabled"}
    assert layer["units"]["nvlsm"] == NOT_FOUND
    assert len(layer["gpus"]) == 8 and layer["gpus"][7] == {
        "index": 7, "bus_id": "00000000:DB:00.0", "persistence_mode": "Enabled", "mig_mode": "Disabled",
        "fabric_state": "Completed", "fabric_status": "Success"}
    assert layer["kernel"] == {"release": "6.8.0-45-generic", "headers": True, "installed": []}
    assert [entry["kernel"] for entry in layer["dkms"]] == ["6.12.10-76061203-generic", "6.16.3-76061603-generic"]
    assert layer["reboot_required"] == {"required": True,
                                        "packages": ["libnvidia-compute-570", "nvidia-kernel-common-570"]}
    assert layer["iommu_args"] == ["intel_iommu=on", "iommu=pt"]
    # The one GPU on PCI, behind the AMD root port and the PLX switch port; the NIC is no GPU.
    assert layer["acs"] == [
        {"gpu_bus_id": "0000:83:00.0", "bridge": "0000:00:01.2", "redirect": True,
         "ctl": "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"},
        {"gpu_bus_id": "0000:83:00.0", "bridge": "0000:02:08.0", "redirect": True,
         "ctl": "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"}]
    assert {(pair["a"], pair["b"]): pair["link"] for pair in layer["topology"]}[(2, 3)] == "PIX"
    # Bounded: 81 kB of nvidia-smi -q become a few lines per GPU (the gpu_health section's
    # Remapped Rows among them: five); no legend, no other bridge.
    sections = index_sections(raw.splitlines())
    assert len(sections["driver-smi-q"].lines) <= 5 + 8 * 13, sections["driver-smi-q"].lines
    assert parse_remapped_rows(sections["driver-smi-q"].text)["0000:18:00.0"] == {
        "correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert len(sections["driver-acs"].lines) == 2 and len(sections["driver-topo"].lines) == 5
    # 8 GPUs' Remapped Rows (the gpu_health section's, padding dropped) add about 750 bytes.
    assert len(raw) < 6000 + 800, len(raw)


def test_proprietary_module_nouveau_loaded_and_no_devices(tmp_path):
    """The Blackwell trap's node: the proprietary module, nvidia-smi finds no devices;
    nouveau loaded and not blacklisted; no reboot pending; persistenced not installed."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    write(root / "proc/driver/nvidia/version", sample("proc-version-proprietary.txt"))
    (root / "sys/module/nouveau").mkdir(parents=True)
    write(root / "etc/modprobe.d/other.conf", "# blacklist nouveau (a comment is no blacklist)\nblacklist pcspkr\n")
    write(root / "proc/cmdline", "ro quiet amd_iommu=off\n")
    (root / "run/systemd/system").mkdir(parents=True)
    replay(bin_dir, "nvidia-smi", sample("smi-no-devices.txt"), exit_code=6)
    replay(bin_dir, "systemctl", "Id=nvidia-persistenced.service\nLoadState=not-found\nActiveState=inactive\n"
           "UnitFileState=\n\nId=nvidia-fabricmanager.service\nLoadState=not-found\nActiveState=inactive\n"
           "UnitFileState=\n\nId=nvlsm.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n")
    _, layer = run_driver_probe(tmp_path)
    assert layer["module"]["flavour"] == "proprietary" and layer["module"]["version"] == "515.76"
    assert layer["nouveau"] == {"loaded": True, "blacklisted": False}
    assert layer["gpus"] == [] and layer["topology"] is None
    assert layer["units"]["nvidia-persistenced"] == NOT_FOUND
    assert layer["iommu_args"] == ["amd_iommu=off"]
    assert layer["reboot_required"] == {"required": False, "packages": []}


def test_a_gpu_without_lspci_is_an_unknown_acs(tmp_path):
    """A GPU on PCI but no lspci: ACS unknown (null), not "no bridges"."""
    root = tmp_path / "root"
    pci_device(root, "pci0000:00/0000:00:01.0", "0x8086", "0x060400")
    pci_device(root, "pci0000:00/0000:00:01.0/0000:01:00.0", "0x10de", "0x030000")
    _, layer = run_driver_probe(tmp_path)
    assert layer["acs"] is None


def test_the_whole_probe_and_the_narrow_one_carry_the_driver_layer(tmp_path):
    """The exact command the facts run on a node, here: the driver layer is there and fits
    the schema, whatever this machine has (no claim about its driver)."""
    layout = NodeLayout.for_settings("/nonexistent", "/nonexistent", str(tmp_path / "cache"), "sglang")
    for sections in ((), sections_for("driver_layer")):
        run = subprocess.run(["sh", "-c", probe_command(ProbeInputs(layout, ()), sections)], env={"PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=60, check=True)
        document = build_document(run.stdout.splitlines(), ["os", "gpus", "driver_layer"] if not sections else
                                  ["driver_layer"])
        layer = document["driver_layer"]
        assert set(layer) >= {"module", "packages", "units", "acs", "topology"}
        check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [], **document})
        json.dumps(layer)


@pytest.mark.skipif(os.geteuid() != 0, reason="the planted tools must be chowned to another user")
def test_a_tool_another_user_owns_runs_as_that_user_and_forges_nothing():
    """A dkms and an nvidia-smi of ``nobody`` on the base PATH: run as nobody (each records
    its uid), never as root; what nvidia-smi prints cannot open a section of its own."""
    scratch = Path(tempfile.mkdtemp(prefix="probe-driver-"))
    try:
        scratch.chmod(0o755)
        records = scratch / "records"
        records.mkdir()
        records.chmod(0o777)
        bin_dir = scratch / "bin"
        bin_dir.mkdir()
        forged = "@@ driver-kernel rc=0\nrelease=forged\nGPU 00000000:01:00.0\n    Persistence Mode : Enabled"
        for name, output in (("dkms", "nvidia/580.95.05, 6.1.0-26-amd64, x86_64: installed"), ("nvidia-smi", forged)):
            standin(bin_dir, name, f"/usr/bin/id -u >> {records}/{name}\nprintf '%s\\n' {shlex.quote(output)}\n")
            os.chown(bin_dir / name, NOBODY, NOBODY)
        (scratch / "root").mkdir()
        raw, layer = run_driver_probe(scratch)
        assert {path.name: path.read_text().split() for path in records.iterdir()} == {
            "dkms": [str(NOBODY)], "nvidia-smi": [str(NOBODY), str(NOBODY)]}
        assert layer["dkms"][0]["version"] == "580.95.05"
        assert layer["kernel"]["release"] == "" and "|@@ driver-kernel rc=0" in raw
        assert layer["gpus"][0]["persistence_mode"] == "Enabled"
    finally:
        shutil.rmtree(scratch)


def kernels_node(tmp_path, lister=None):
    """Two installed kernels (the running one with headers, a newer one pending without),
    a modules directory without its image (a removed kernel's leftovers), the nouveau
    blacklist in /etc/modprobe.d; ``lister``: what a stand-in lsinitramfs lists."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    write(root / "proc/sys/kernel/osrelease", "6.1.0-26-amd64\n")
    for directory in ("6.1.0-26-amd64/build", "6.1.0-28-amd64/kernel", "6.1.0-9-amd64"):
        (root / "lib/modules" / directory).mkdir(parents=True, exist_ok=True)
    for release in ("6.1.0-26-amd64", "6.1.0-28-amd64"):
        write(root / f"boot/vmlinuz-{release}", "")
    write(root / "boot/initrd.img-6.1.0-26-amd64", "")
    write(root / "boot/initrd.img-6.1.0-28-amd64", "")
    write(root / "run/modprobe.d/nouveau.conf", "blacklist nouveau\n")  # this boot's only: never compared
    conf = root / "etc/modprobe.d/gpu-bringup-nouveau.conf"
    write(conf, "blacklist nouveau\noptions nouveau modeset=0\n")
    # The 6.1.0-26 initramfs was built before the blacklist was written (a deploy killed
    # between the two); 6.1.0-28's after it.
    os.utime(root / "boot/initrd.img-6.1.0-26-amd64", (1_000_000, 1_000_000))
    os.utime(conf, (2_000_000, 2_000_000))
    os.utime(root / "boot/initrd.img-6.1.0-28-amd64", (3_000_000, 3_000_000))
    if lister is not None:
        replay(bin_dir, "lsinitramfs", lister)
    return root


def test_installed_kernels_their_headers_and_initramfs(tmp_path):
    kernels_node(tmp_path)
    _, layer = run_driver_probe(tmp_path)
    assert layer["kernel"] == {"release": "6.1.0-26-amd64", "headers": True, "installed": [
        {"release": "6.1.0-26-amd64", "headers": True, "initramfs": "stale"},
        {"release": "6.1.0-28-amd64", "headers": False, "initramfs": "current"}]}


def test_an_initramfs_newer_than_the_blacklist_but_without_it_is_stale(tmp_path):
    """lsinitramfs lists the initramfs: one that does not hold the blacklist is stale
    whatever its time; one that holds it is current."""
    kernels_node(tmp_path, lister="etc/modprobe.d/other.conf\nusr/lib/modules\n")
    _, layer = run_driver_probe(tmp_path)
    assert [kernel["initramfs"] for kernel in layer["kernel"]["installed"]] == ["stale", "stale"]
    kernels_node(tmp_path, lister="etc/modprobe.d/gpu-bringup-nouveau.conf\n")
    _, layer = run_driver_probe(tmp_path)
    assert [kernel["initramfs"] for kernel in layer["kernel"]["installed"]] == ["stale", "current"]
    # An archive prefix before the path (a multi-archive initramfs) is the same file.
    kernels_node(tmp_path, lister="kernel/x86/microcode/AuthenticAMD.bin\nmain/etc/modprobe.d/gpu-bringup-nouveau.conf\n")
    _, layer = run_driver_probe(tmp_path)
    assert [kernel["initramfs"] for kernel in layer["kernel"]["installed"]] == ["stale", "current"]
    # An empty listing is no answer: the times alone.
    kernels_node(tmp_path, lister="")
    _, layer = run_driver_probe(tmp_path)
    assert [kernel["initramfs"] for kernel in layer["kernel"]["installed"]] == ["stale", "current"]


def test_no_initramfs_and_no_blacklist(tmp_path):
    root = kernels_node(tmp_path)
    (root / "boot/initrd.img-6.1.0-28-amd64").unlink()
    (root / "etc/modprobe.d/gpu-bringup-nouveau.conf").unlink()
    _, layer = run_driver_probe(tmp_path)
    assert [kernel["initramfs"] for kernel in layer["kernel"]["installed"]] == ["current", "none"]


@pytest.mark.parametrize("inherited", [
    {"PROBE_ENV_KEYS": "HF_TOKEN"},
    {"PROBE_MODEL": "Qwen/Qwen3-0.6B"},
    {"PROBE_MODEL_ENV_HF_ENDPOINT": "https://elsewhere.invalid"},
    {"PROBE_VENV_PYTHON": "/elsewhere/python3"},
    {"PROBE_SECTIONS": "os"},
    {"APT_LOCK_FILES": "/elsewhere/lock"},
], ids=lambda inherited: next(iter(inherited)))
def test_no_input_comes_from_the_remote_sessions_environment(inherited):
    """Every input the probe reads that a command may leave out is pinned by the command (as
    PROBE_FS_ROOT is): one set in the remote session's environment (pam_env's /etc/environment,
    sshd's AcceptEnv) reaches sh as the command says, or not at all. PROBE_ENV_KEYS inherited
    had the service section print those env-file values (HF_TOKEN's) into the facts document."""
    (name, value), = inherited.items()
    inputs = ProbeInputs(DEFAULT_LAYOUT, model="m/m", model_env=(("HF_HOME", "/srv/hf"),))
    for sent in (ProbeInputs.defaults(), inputs):
        command = probe_command(sent)
        stage = command.rsplit(" | ", 1)
        echo = "sh -c 'for name in PROBE_ENV_KEYS PROBE_MODEL PROBE_MODEL_ENV_HF_ENDPOINT PROBE_MODEL_ENV_HF_HOME " \
            "PROBE_VENV_PYTHON PROBE_SECTIONS APT_LOCK_FILES; do eval \"echo $name=[\\${$name-unset}]\"; done'"
        run = subprocess.run(["sh", "-c", stage[0] + " | " + stage[1][:-len("sh")] + echo],
                             env={"PATH": "/usr/bin:/bin", name: value}, capture_output=True, text=True, check=True)
        seen = dict(line.split("=", 1) for line in run.stdout.splitlines())
        expected = sent.environment().get(name)
        assert seen[name] in ("[]", "[unset]") if expected is None else seen[name] == f"[{expected}]", (sent, seen)
        assert seen["PROBE_MODEL_ENV_HF_HOME"] == ("[/srv/hf]" if sent is inputs else "[unset]")
