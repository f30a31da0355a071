"""The sandbox's driver stand-ins on one light node: a node the vendor shipped
without a driver (state ``no-driver``) gets the sandbox apt repository's stand-in driver
packages by apt, real Debian ``dkms`` builds their module for the running kernel, the
module is loaded only at the next boot (``python -m sandbox reboot``), and a reboot from
inside the node (``systemctl reboot``, pyinfra's ``server.reboot``) boots it again."""

import subprocess
import sys
import time

import pytest

from sandbox.aptrepo import driver_debs
from tests.sandbox_fixtures import REPO_ROOT, pyinfra_cli, run_ssh

pytestmark = pytest.mark.sandbox

NAME = "ds-driver"
VERSION = "580.95.05"
BANNER = "/proc/driver/nvidia/version"
MODULE = "/lib/modules/$(uname -r)/updates/dkms/nvidia.ko"
NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
# Every package of the open flavour named at the locked version, as deploy installs them
# (the repository also holds 580.105.08, which apt would take otherwise), and the headers.
INSTALL = " ".join(driver_debs.closure(("nvidia-open",), VERSION, "open"))


@pytest.fixture(scope="module")
def bare_node(sandbox_node):
    """8x RTX PRO 6000 (Blackwell) without a driver; NVIDIA's apt source (the sandbox's) set up."""
    return sandbox_node(NAME, "127.0.0.164", gpu="rtx-pro-6000-x8", toolkit="none",
                        states=("no-driver", "nvidia-repo"))


def uptime(entry) -> float:
    return float(run_ssh(entry, "cut -d' ' -f1 /proc/uptime").stdout)


def wait_back(entry, timeout: float = 60.0) -> float:
    """Seconds until the node answers over SSH from a new boot (/run/booted gone: /run is
    each boot's own tmpfs)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if run_ssh(entry, "test ! -e /run/booted", check=False).returncode == 0:
            return time.monotonic() - started
        time.sleep(0.5)
    raise AssertionError(f"{NAME} not back from its reboot after {timeout:.0f} s")


def test_no_driver_node_has_the_gpus_recordings_only(bare_node):
    out = run_ssh(bare_node, "command -v nvidia-smi; ls /proc/driver/nvidia /etc/modprobe.d/*nouveau* "
                             "/usr/lib/x86_64-linux-gnu/libcuda.so.1 2>&1; cat /usr/share/sandbox-gpu/PROFILE",
                  check=False).stdout
    assert "/usr/bin/nvidia-smi" not in out
    assert out.count("No such file or directory") == 3, out
    assert "rtx-pro-6000-x8" in out


def test_driver_installed_by_apt_is_loaded_at_the_next_boot(bare_node):
    started = time.monotonic()
    run_ssh(bare_node, "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                       f"--no-install-recommends {INSTALL} linux-headers-$(uname -r)")
    installed = time.monotonic() - started
    # dkms built and installed the module for the running kernel; it is not loaded yet.
    assert run_ssh(bare_node, f"modinfo -F version {MODULE}").stdout.strip() == VERSION
    assert "installed" in run_ssh(bare_node, "dkms status nvidia").stdout
    assert run_ssh(bare_node, f"test -e {BANNER}", check=False).returncode == 1
    smi = run_ssh(bare_node, "nvidia-smi", check=False)
    assert (smi.returncode, smi.stdout.startswith(NO_DRIVER)) == (9, True), smi.stdout

    reboot = subprocess.run([sys.executable, "-m", "sandbox", "reboot", NAME], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=180)
    assert reboot.returncode == 0, reboot.stderr
    banner = run_ssh(bare_node, f"cat {BANNER}").stdout
    assert banner.startswith(f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {VERSION}  "), banner
    query = run_ssh(bare_node, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader").stdout
    assert query.splitlines()[0].endswith(f", {VERSION}") and len(query.splitlines()) == 8, query
    assert run_ssh(bare_node, "modinfo -F license nvidia").stdout.strip() == "Dual MIT/GPL"
    print(f"apt-get install with the DKMS build: {installed:.1f} s; {reboot.stdout.strip()}")


def test_reboot_inside_the_node_boots_it_again(bare_node):
    run_ssh(bare_node, "touch /root/kept /run/booted")
    run_ssh(bare_node, "systemctl reboot", check=False)
    print(f"systemctl reboot: back in {wait_back(bare_node):.1f} s")
    assert run_ssh(bare_node, "ls /root/kept /run/booted 2>&1", check=False).stdout.count("No such file") == 1
    assert run_ssh(bare_node, f"cat {BANNER}").stdout.startswith("NVRM version: NVIDIA UNIX Open Kernel Module")
    assert run_ssh(bare_node, "systemctl is-system-running --wait", check=False).stdout.strip() == "running"


def test_pyinfra_server_reboot_sees_the_node_drop_and_come_back(bare_node):
    run_ssh(bare_node, "touch /run/booted")
    time.sleep(3)  # pyinfra's check: an uptime below the one before the reboot + delay
    result = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "server.reboot", "delay=2", data=(), timeout=120)
    assert result.returncode == 0, result.output
    # pyinfra came back to a new boot, whose /proc/uptime is the node's own.
    assert run_ssh(bare_node, "test ! -e /run/booted", check=False).returncode == 0
    assert uptime(bare_node) < 10
