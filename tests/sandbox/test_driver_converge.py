"""The driver step (tasks/driver.py) through the real ``pyinfra ... deploy.py``
on light nodes (``deploy_steps`` repo and driver: no venv, no pre-warm), with the
sandbox repository's stand-in driver packages (580.95.05-1 locked, 580.105.08-1 newer;
only the driver is a stand-in, sandbox/field_states.py):

- a node with no driver: ``needs reboot`` (exit status 1, its own summary row), then
  ``driver_reboot: if-needed``: rebooted by pyinfra, validated again with no driver
  finding left, the node suite's driver checks green, a second deploy changing nothing,
  and ``apt-get upgrade`` moving no driver package to the newer version;
- an NVSwitch node: Fabric Manager at the driver's version, active, and the SGLang unit
  ordered after it;
- the converged node with an initramfs older than its nouveau blacklist (a deploy killed
  between the two): the next deploy updates it, a second changes nothing;
- a Blackwell node with the proprietary module, its deploy killed during the DKMS build
  of the open one: the old module stays loaded and nvidia-smi answers; the re-run says
  ``needs reboot``, and after the operator's reboot the next deploy converges (open).
"""

import subprocess
import sys

import pytest

from bringup.findings import INFO
from sandbox import aptrepo
from sandbox import node as sandbox_nodes
from tests.cli.test_driver_layer_cli import DRIVER_CODES
from tests.sandbox_fixtures import (
    REPO_ROOT,
    changed_operations,
    node_suite,
    pyinfra_cli,
    run_ssh,
    ssh_command,
    summary_row,
    validate,
)

pytestmark = pytest.mark.sandbox

LOCKED, NEWER = "580.95.05", "580.105.08"
# Light: the repository and the driver only (the service step, where named, only writes
# its unit: service_enable is off).
DRIVER = ("deploy_steps=repo,driver", "driver_manage=true", "service_enable=false")
REBOOTING = (*DRIVER, "driver_reboot=if-needed")
BANNER = "/proc/driver/nvidia/version"
# The driver findings deploy fixes, and the new ones of the driver step (docs/findings.md).
FIXED_CODES = DRIVER_CODES | {"DRIVER_NOT_LOADED", "DRIVER_TOO_OLD", "DRIVER_REBOOT_NEEDED", "DRIVER_LOCK_MISSING"}
PACKAGES = "dpkg-query -W -f '${db:Status-Abbrev}|${Package}|${Version}\\n' 'nvidia-*' 'libcuda1' 'libnvidia-*' " \
           "2>/dev/null | grep -v '^un'"


@pytest.fixture(scope="module")
def apt_repo():
    return aptrepo.ensure_served()


def deploy(name, data, json_output=False):
    return pyinfra_cli("inventory/gpu.py", "--limit", name, "deploy.py", data=data, json_output=json_output)


def driver_findings(report):
    """The driver findings a report still has that are not only information."""
    return {f["code"]: f["severity"] for f in report["plan"]["findings"]
            if f["code"] in FIXED_CODES and f["severity"] != INFO}


def packages(entry):
    """{name: (version, dpkg's status letters)} of the node's driver packages."""
    lines = run_ssh(entry, PACKAGES, check=False).stdout.splitlines()
    return {name: (version, status.strip()) for status, name, version in
            (line.split("|") for line in lines if line.count("|") == 2)}


def banner(entry):
    return run_ssh(entry, f"cat {BANNER} 2>/dev/null || true").stdout


def operator_reboot(name):
    """``python -m sandbox reboot NAME``: the node boots again as a machine would."""
    result = subprocess.run([sys.executable, "-m", "sandbox", "reboot", name], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=300, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def new_node(apt_repo, sandbox_node):
    """8x RTX PRO 6000 as a vendor ships it: the GPUs on the bus, no driver at all."""
    entry = sandbox_node("drv-new", "127.0.0.171", gpu="rtx-pro-6000-x8", toolkit="none", states=("no-driver",))
    return dict(entry, name="drv-new")


@pytest.fixture(scope="module")
def fabric_node(apt_repo, sandbox_node):
    """8x B200 with 4 NVSwitches and no Fabric Manager."""
    entry = sandbox_node("drv-fabric", "127.0.0.172", gpu="b200-x8", toolkit="none", states=("nvswitch-no-fm",))
    return dict(entry, name="drv-fabric")


@pytest.fixture(scope="module")
def proprietary_node(apt_repo, sandbox_node):
    """8x RTX PRO 6000 (Blackwell) running the proprietary module, which it refuses."""
    entry = sandbox_node("drv-killed", "127.0.0.173", gpu="rtx-pro-6000-x8", toolkit="none",
                         states=("proprietary-module",))
    return dict(entry, name="drv-killed")


def test_no_driver_needs_reboot_then_is_rebooted_and_converges(new_node, tmp_path):
    name = new_node["name"]
    _, before = validate(name, data=DRIVER)
    assert {"DRIVER_NOT_LOADED", "DRIVER_REBOOT_NEEDED"} <= set(driver_findings(before)), before["plan"]["findings"]

    # driver_reboot: never (the default): installed, held, the files written; not loaded.
    first = deploy(name, DRIVER)
    assert first.returncode == 1, first.output[-4000:]
    row = summary_row(name)
    assert row["verdict"] == "needs reboot", row
    assert "loaded: none" in row["reason"] and LOCKED in row["reason"], row
    assert f"{name}: needs reboot: loaded: none" in first.output
    installed = packages(new_node)
    assert installed["nvidia-kernel-open-dkms"] == (f"{LOCKED}-1", "hi"), installed
    assert installed["nvidia-driver-cuda"] == (f"{LOCKED}-1", "hi"), installed
    assert "nvidia-kernel-dkms" not in installed, installed
    assert banner(new_node) == "", "a module changes only at a boot"
    files = run_ssh(new_node, "stat -c '%a %U %n' /etc/modprobe.d/gpu-bringup-nouveau.conf "
                              "/etc/apt/apt.conf.d/51gpu-bringup-driver; "
                              "cat /etc/modprobe.d/gpu-bringup-nouveau.conf /etc/apt/apt.conf.d/51gpu-bringup-driver"
                    ).stdout
    assert "644 root /etc/modprobe.d/gpu-bringup-nouveau.conf" in files and "blacklist nouveau" in files, files
    assert "Unattended-Upgrade::Package-Blacklist" in files and "nvidia-kernel-open-dkms" in files, files

    # driver_reboot: if-needed: pyinfra reboots the host, it is probed and planned again.
    second = deploy(name, REBOOTING)
    assert second.returncode == 0, second.output[-4000:]
    assert summary_row(name)["verdict"] == "deployed"
    assert f"Open Kernel Module for x86_64  {LOCKED}" in banner(new_node)
    assert run_ssh(new_node, "systemctl is-active nvidia-persistenced").stdout.strip() == "active"
    _, after = validate(name, data=REBOOTING)
    assert driver_findings(after) == {}, after["plan"]["findings"]
    assert after["plan"]["ok"] is True
    suite = node_suite(tmp_path, "--node-limit", name, "-k", "test_driver", data=REBOOTING)
    assert suite.rc == 0 and suite.failing(name) == set(), suite
    assert {"nvidia_smi_answers", "driver_runs_toolkit"} <= suite.checks(name), suite.checks(name)

    again = deploy(name, REBOOTING, json_output=True)
    assert again.returncode == 0 and changed_operations(again) == [], again.output[-4000:]

    # A routine upgrade with the newer driver in the repository moves nothing.
    offered = run_ssh(new_node, "apt-get update -qq && apt-cache madison nvidia-driver-cuda").stdout
    assert f"{NEWER}-1" in offered, offered
    held = packages(new_node)
    run_ssh(new_node, "DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::=--force-confold upgrade")
    assert packages(new_node) == held
    assert held["nvidia-driver-cuda"] == (f"{LOCKED}-1", "hi"), held

def test_an_initramfs_without_the_blacklist_is_updated_by_the_next_deploy(new_node):
    """Issue 33, finding 11: a deploy killed after it wrote the nouveau blacklist and before
    update-initramfs left an initramfs without it, and no later run rebuilt it (the file
    was there). On the node converged above: the running kernel's image and an initramfs
    older than the blacklist (a sandbox node boots no initramfs of its own), and a
    stand-in update-initramfs first on the base PATH that records its arguments and
    touches the initramfs, as the real one rewrites it."""
    name = new_node["name"]
    release = run_ssh(new_node, "cat /proc/sys/kernel/osrelease").stdout.strip()
    run_ssh(new_node, f"mkdir -p /lib/modules/{release} /boot && : > /boot/vmlinuz-{release} && "
                      f": > /boot/initrd.img-{release} && touch -d 2000-01-01 /boot/initrd.img-{release} && "
                      "printf '#!/bin/sh\\n# STAND-IN for the test\\necho \"$*\" >> /root/update-initramfs.log\\n"
                      "touch /boot/initrd.img-$3\\n' > /usr/local/sbin/update-initramfs && "
                      "chmod 755 /usr/local/sbin/update-initramfs && rm -f /root/update-initramfs.log")
    try:
        _, before = validate(name, data=REBOOTING)
        assert driver_findings(before) == {"NOUVEAU_INITRAMFS_STALE": "fix"}, before["plan"]["findings"]
        first = deploy(name, REBOOTING)
        assert first.returncode == 0, first.output[-4000:]
        assert run_ssh(new_node, "cat /root/update-initramfs.log").stdout.split("\n")[0] == f"-u -k {release}"
        _, after = validate(name, data=REBOOTING)
        assert driver_findings(after) == {}, after["plan"]["findings"]
        again = deploy(name, REBOOTING, json_output=True)
        assert again.returncode == 0 and changed_operations(again) == [], again.output[-4000:]
    finally:
        run_ssh(new_node, f"rm -f /usr/local/sbin/update-initramfs /boot/vmlinuz-{release} /boot/initrd.img-{release}",
                check=False)


def test_nvswitch_node_gets_fabric_manager_at_the_drivers_version_and_the_unit_after_it(fabric_node):
    name = fabric_node["name"]
    result = deploy(name, REBOOTING)
    assert result.returncode == 0, result.output[-4000:]
    installed = packages(fabric_node)
    assert installed["nvidia-fabricmanager"] == (f"{LOCKED}-1", "hi"), installed
    assert installed["nvidia-kernel-open-dkms"][0] == f"{LOCKED}-1", installed
    assert run_ssh(fabric_node, "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"
    _, report = validate(name, data=REBOOTING)
    assert driver_findings(report) == {}, report["plan"]["findings"]

    # The service step (its unit only: service_enable is off) orders the unit after it.
    unit = deploy(name, ("deploy_steps=service", "driver_manage=true", "service_enable=false",
                         "service_model=Qwen/Qwen3-0.6B"))
    assert unit.returncode == 0, unit.output[-4000:]
    ordered = run_ssh(fabric_node, "systemctl show -p After --value sglang.service").stdout.split()
    assert "nvidia-fabricmanager.service" in ordered, ordered
    again = deploy(name, REBOOTING, json_output=True)
    assert changed_operations(again) == [], again.output[-4000:]


def test_a_deploy_killed_in_the_dkms_build_keeps_the_old_module_and_the_rerun_converges(proprietary_node):
    name = proprietary_node["name"]
    assert "Open" not in banner(proprietary_node) and LOCKED in banner(proprietary_node)
    # On the node: once DKMS builds the open module, kill dkms and dpkg by their pids, as a
    # crash would.
    killer = subprocess.Popen(
        ssh_command(proprietary_node,
                    # [d]kms: the pattern does not match this loop's own command line.
                    "for i in $(seq 6000); do dkms=$(pgrep -f '[d]kms (build|install|autoinstall)' | head -n 1); "
                    "if [ -n \"$dkms\" ]; then kill -9 $dkms $(pgrep -x dpkg); echo killed $dkms; exit 0; fi; "
                    "sleep 0.01; done; exit 1"),
        stdout=subprocess.PIPE, text=True)
    first = deploy(name, DRIVER)
    assert killer.wait(timeout=120) == 0 and killer.stdout.read().startswith("killed"), first.output[-4000:]
    assert first.returncode == 1, first.output[-4000:]
    # Half-way: dpkg has unfinished work; the old module is still the one loaded, and it answers.
    assert run_ssh(proprietary_node, "dpkg --audit").stdout.strip(), "the kill left no unfinished dpkg work"
    assert "Open" not in banner(proprietary_node) and LOCKED in banner(proprietary_node)
    assert run_ssh(proprietary_node, "nvidia-smi -L", check=False).returncode == 0

    # The re-run finishes dpkg's work, swaps the flavour, and says the module changes at the next boot.
    second = deploy(name, DRIVER)
    assert second.returncode == 1 and summary_row(name)["verdict"] == "needs reboot", second.output[-4000:]
    assert "proprietary" in summary_row(name)["reason"], summary_row(name)
    assert run_ssh(proprietary_node, "dpkg --audit").stdout.strip() == ""
    installed = packages(proprietary_node)
    assert "nvidia-kernel-dkms" not in installed and installed["nvidia-kernel-open-dkms"][0] == f"{LOCKED}-1"
    assert "Dual MIT/GPL" in run_ssh(proprietary_node, "modinfo -F license nvidia").stdout

    # The operator reboots; the next deploy converges with the open module loaded.
    operator_reboot(name)
    third = deploy(name, DRIVER)
    assert third.returncode == 0 and summary_row(name)["verdict"] == "deployed", third.output[-4000:]
    assert f"Open Kernel Module for x86_64  {LOCKED}" in banner(proprietary_node)
    _, report = validate(name, data=DRIVER)
    assert driver_findings(report) == {}, report["plan"]["findings"]
    again = deploy(name, DRIVER, json_output=True)
    assert changed_operations(again) == [], again.output[-4000:]
    sandbox_nodes.down([name])
