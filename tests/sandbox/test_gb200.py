"""A GB200 NVL compute tray (the ``gb200-x4`` profile: Grace arm64, four GB200 GPUs, SM 10.0,
no NVSwitch on the tray) as a light arm64 node on Debian 12 through QEMU (sandbox.cpus),
the driver step (tasks/driver.py) through the real ``pyinfra ... deploy.py`` with
``driver_manage``: IMEX, never Fabric Manager (bringup/plan/imex.py).

- validate names the IMEX findings: IMEX_MISSING (a fix: the lock's ``imex`` role) and
  IMEX_NO_CHANNEL, a blocker that is the administrator's (NVIDIA's IMEX user's guide in
  the fix), so deploy changes nothing until the channel is there;
- the administrator creates channel0 for this boot (the fix's ``mknod``); deploy then
  installs the stand-in driver (sandbox/aptrepo/driver_debs.py) and ``nvidia-imex`` at the
  driver's version from the sandbox's ``debian12/sbsa`` directory, held, no Fabric Manager,
  and leaves IMEX stopped: its nodes config lists no tray yet, and the service does not
  start without one (the guide's "Deployment Models"; the stand-in refuses as it does);
  validate after: only IMEX_NODES_CONFIG_EMPTY, the administrator's, a warning;
- the administrator lists the domain (this tray's address); the next deploy changes only
  the IMEX unit, now enabled and active, and validate has no IMEX finding left.

Only the driver is a stand-in (its packages and daemons, and the channel's character
device, whose major the driver registers: the node shares the host's /proc/devices, which
lists no nvidia-caps-imex-channels, so the test's ``mknod`` names a stand-in major; nothing
opens the device, the probe only looks for it)."""

import pytest

from bringup.findings import BLOCKER
from sandbox import aptrepo
from sandbox import node as sandbox_nodes
from tests.sandbox_fixtures import REPO_ROOT, changed_operations, pyinfra_cli, run_ssh, validate

pytestmark = pytest.mark.sandbox

NAME = "gb200-1"
LOCKED = "580.95.05"
DRIVER_LOCK = "files/locks/driver-580-debian12-aarch64.txt"
# Light: the repository and the driver only, rebooted by deploy if the module must change.
DATA = ("deploy_steps=repo,driver", "driver_manage=true", "service_enable=false", "driver_reboot=if-needed")
IMEX_CODES = {"IMEX_MISSING", "IMEX_VERSION", "IMEX_INACTIVE", "IMEX_NO_CHANNEL", "IMEX_NODES_CONFIG_EMPTY",
              "FABRIC_MANAGER_MISSING", "FABRIC_MANAGER_NOT_ON_GB200", "FABRIC_MANAGER_INACTIVE"}
PACKAGES = "dpkg-query -W -f '${db:Status-Abbrev}|${Package}|${Version}\\n' 'nvidia-*' 'libnvidia-*' " \
           "2>/dev/null | grep -v '^un'"
# The administrator's channel for this boot (bringup/plan/imex.py's fix): the driver's major
# from /proc/devices, which a sandbox node shares with the host and which lists none; 234 is
# then the stand-in major (Linux's devices.txt: 234-254 "dynamically allocated").
CHANNEL = ("mkdir -p /dev/nvidia-caps-imex-channels && "
           "major=$(awk '$2==\"nvidia-caps-imex-channels\"{print $1}' /proc/devices) && "
           "mknod -m 666 /dev/nvidia-caps-imex-channels/channel0 c ${major:-234} 0")


@pytest.fixture(scope="module")
def node(sandbox_node):
    aptrepo.ensure_served()
    entry = dict(sandbox_node(NAME, "127.0.0.177", gpu="gb200-x4", toolkit="none", machine="aarch64"), name=NAME)
    yield entry
    sandbox_nodes.down([NAME])


def imex_findings(report):
    return {f["code"]: f for f in report["plan"]["findings"] if f["code"] in IMEX_CODES}


def packages(entry):
    """{name: (version, dpkg's status letters)} of the node's NVIDIA packages."""
    lines = run_ssh(entry, PACKAGES, check=False).stdout.splitlines()
    return {name: (version, status.strip()) for status, name, version in
            (line.split("|") for line in lines if line.count("|") == 2)}


def deploy(json_output=False):
    return pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=DATA, json_output=json_output)


def test_a_gb200_tray_gets_imex_at_the_drivers_version_and_no_fabric_manager(node):
    locked_imex = f"nvidia-imex={LOCKED}-1"
    assert f"imex {locked_imex}" in (REPO_ROOT / DRIVER_LOCK).read_text().splitlines()

    _, before = validate(NAME, expect_rc=1, data=DATA)
    assert before["facts"]["os"]["arch"] == "aarch64"
    assert before["plan"]["driver"]["lock"] == DRIVER_LOCK
    assert locked_imex in before["plan"]["driver"]["install"], before["plan"]["driver"]
    assert not any("fabricmanager" in pin for pin in before["plan"]["driver"]["install"])
    found = imex_findings(before)
    assert {code: f["severity"] for code, f in found.items()} == {
        "IMEX_MISSING": "fix", "IMEX_NO_CHANNEL": BLOCKER}, found
    assert "docs.nvidia.com/multi-node-nvlink-systems/imex-guide/" in found["IMEX_MISSING"]["fix"]
    assert "docs.nvidia.com/multi-node-nvlink-systems/imex-guide/" in found["IMEX_NO_CHANNEL"]["fix"]
    # The channel is the administrator's: with it missing deploy changes nothing.
    refused = deploy()
    assert refused.returncode != 0 and "IMEX_NO_CHANNEL" in refused.output, refused.output[-4000:]
    assert packages(node) == {}

    run_ssh(node, CHANNEL)
    deployed = deploy()
    assert deployed.returncode == 0, deployed.output[-4000:]
    installed = packages(node)
    assert installed["nvidia-imex"] == (f"{LOCKED}-1", "hi"), installed
    assert installed["nvidia-kernel-open-dkms"] == (f"{LOCKED}-1", "hi"), installed
    assert not [name for name in installed if "fabricmanager" in name or "nscq" in name], installed
    assert run_ssh(node, "dpkg --print-architecture; dpkg-query -W -f '${Architecture}' nvidia-imex"
                   ).stdout.split() == ["arm64", "arm64"]
    # No nodes config yet: installed and held, not started.
    assert run_ssh(node, "systemctl is-active nvidia-imex; systemctl is-enabled nvidia-imex",
                   check=False).stdout.split() == ["inactive", "disabled"]
    assert run_ssh(node, "systemctl is-active nvidia-fabricmanager", check=False).stdout.strip() != "active"

    _, after = validate(NAME, data=DATA)
    found = imex_findings(after)
    assert {code: f["severity"] for code, f in found.items()} == {"IMEX_NODES_CONFIG_EMPTY": "warning"}, found
    assert "/etc/nvidia-imex/nodes_config.cfg) is missing" in found["IMEX_NODES_CONFIG_EMPTY"]["message"], found
    assert after["plan"]["ok"] is True, after["plan"]["findings"]

    # The administrator lists the domain: this tray alone here (its address).
    run_ssh(node, f"printf '%s\\n' {node['ssh_hostname']} > /etc/nvidia-imex/nodes_config.cfg")
    started = deploy(json_output=True)
    assert started.returncode == 0, started.output[-4000:]
    changed = changed_operations(started)
    assert len(changed) == 1 and "nvidia-imex" in changed[0], changed
    assert run_ssh(node, "systemctl is-active nvidia-imex; systemctl is-enabled nvidia-imex").stdout.split() == [
        "active", "enabled"]
    _, configured = validate(NAME, data=DATA)
    assert imex_findings(configured) == {}, imex_findings(configured)
