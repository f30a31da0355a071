"""Canonical's driver built by DKMS (``ubuntu-drivers install --gpgpu`` on a kernel flavour
without Canonical's prebuilt modules) met by the driver step through the real ``pyinfra ...
deploy.py`` on light Ubuntu 24.04 nodes (``deploy_steps`` repo and driver, ``driver_manage:
true``): the ubuntu-drivers-dkms field states (sandbox/files/canonical-dkms.sh: stand-ins under
Canonical's names, versions and Depends; Ubuntu's real dkms builds their stand-in module,
which the node loads at boot, sandbox/files/node-init.sh).

- At an older upstream version than the lock's (580.82.07): validate names it and plans its
  replacement; deploy (``driver_reboot: never``) purges Canonical's packages in the apt run
  that installs NVIDIA's locked ones, holds them, and the host ``needs reboot`` (exit status
  1, its summary row), the old module still loaded; then ``driver_reboot: if-needed`` reboots
  it into NVIDIA's module, validate has no driver finding left and a second deploy changes
  nothing.
- At the lock's upstream version (580.95.05-0ubuntu0.24.04.1): adopted, nothing installed or
  removed, Canonical's packages held at their versions, no reboot.

The reboot verdict is the product's: the loaded module is what the node booted with
(its banner), the installed one what dkms built (modinfo), as on a machine.
"""

import pytest

from bringup.driver_locks import driver_lock_name, parse_driver_lock
from sandbox import node as sandbox_nodes
from tests.sandbox.test_driver_converge import (
    DRIVER,
    REBOOTING,
    apt_repo,  # noqa: F401 - the fixture, served before the nodes register
    banner,
    deploy,
    driver_findings,
    packages,
)
from tests.sandbox_fixtures import REPO_ROOT, changed_operations, run_ssh, summary_row, validate

pytestmark = pytest.mark.sandbox

LOCK = parse_driver_lock((REPO_ROOT / driver_lock_name("580", "ubuntu2404", "x86_64")).read_text())
OLDER = "580.82.07"
CANONICAL_NAMES = ("nvidia-driver-580-server-open", "nvidia-dkms-580-server-open", "nvidia-kernel-source-580-server-open",
                   "libnvidia-compute-580-server", "nvidia-utils-580-server", "nvidia-compute-utils-580-server",
                   "nvidia-kernel-common-580-server")
REPLACED, ADOPTED = "drv-u2404d", "drv-u2404e"


def _node(sandbox_node, name, addr, state):
    entry = sandbox_node(name, addr, gpu="rtx-pro-6000-x8", toolkit="none", states=(state,), os_name="ubuntu2404")
    return dict(entry, name=name)


@pytest.fixture(scope="module")
def older_node(apt_repo, sandbox_node):  # noqa: F811
    """8x RTX PRO 6000 on Ubuntu 24.04 with Canonical's DKMS driver at 580.82.07, its module loaded."""
    yield _node(sandbox_node, REPLACED, "127.0.0.176", "ubuntu-drivers-dkms-older")
    sandbox_nodes.down([REPLACED])


@pytest.fixture(scope="module")
def locked_node(apt_repo, sandbox_node):  # noqa: F811
    """The same with Canonical's DKMS driver at the lock's upstream version, 580.95.05."""
    yield _node(sandbox_node, ADOPTED, "127.0.0.178", "ubuntu-drivers-dkms")
    sandbox_nodes.down([ADOPTED])


def canonical_finding(report):
    [found] = [f for f in report["plan"]["findings"] if f["code"] == "DRIVER_CANONICAL"]
    return found


def test_canonical_dkms_driver_at_another_version_is_replaced_then_the_reboot_loads_nvidia_s(older_node):
    name = older_node["name"]
    locked = LOCK.version
    assert f"Open Kernel Module for x86_64  {OLDER}" in banner(older_node)
    assert run_ssh(older_node, "modinfo -F version nvidia").stdout.strip() == OLDER
    _, before = validate(name, data=DRIVER)
    seen, driver = canonical_finding(before), before["plan"]["driver"]
    # Named: its packages with their versions, branch, series, flavour and module source.
    assert "580-server series (ubuntu-drivers --gpgpu), open kernel module, built by DKMS " \
           "(nvidia-dkms-580-server-open)" in seen["message"], seen
    assert f"nvidia-dkms-580-server-open={OLDER}-0ubuntu0.24.04.1" in seen["message"], seen
    assert seen["severity"] == "fix" and f"its version {OLDER} is not the lock's {locked}" in seen["fix"], seen
    assert driver["canonical"] == "replace" and set(driver["remove"]) == set(CANONICAL_NAMES), driver
    assert f"nvidia-dkms-580-open={locked}-0ubuntu1" in driver["install"], driver
    reboot = [f for f in before["plan"]["findings"] if f["code"] == "DRIVER_REBOOT_NEEDED"]
    assert [f["severity"] for f in reboot] == ["warning"] and f"loaded: {OLDER} open" in reboot[0]["message"], reboot

    # driver_reboot: never (the default): one apt run purges Canonical's and installs NVIDIA's,
    # held; the old module stays loaded until a boot: needs reboot, exit status 1.
    first = deploy(name, DRIVER)
    assert first.returncode == 1, first.output[-4000:]
    row = summary_row(name)
    assert row["verdict"] == "needs reboot" and f"loaded: {OLDER} open" in row["reason"], row
    assert f"{name}: needs reboot: loaded: {OLDER} open" in first.output
    installed = packages(older_node)
    assert not set(CANONICAL_NAMES) & set(installed), installed
    wanted = LOCK.pins("pinning", "open")
    assert {package: installed.get(package) for package in wanted} == {
        package: (version, "hi") for package, version in wanted.items()}, installed
    # One apt run (apt's history: its last entry) purged Canonical's and installed NVIDIA's.
    last = run_ssh(older_node, "cat /var/log/apt/history.log").stdout.strip().split("\n\n")[-1]
    lines = dict(line.split(": ", 1) for line in last.splitlines() if ": " in line)
    assert all(f"{package}:amd64 ({OLDER}-0ubuntu0.24.04.1)" in lines.get("Purge", "") for package in CANONICAL_NAMES), last
    assert all(f"{package}:amd64 ({version})" in lines.get("Install", "") for package, version in wanted.items()), last
    # DKMS built NVIDIA's module in place of Canonical's; the banner is still the old one's.
    assert run_ssh(older_node, "modinfo -F version nvidia").stdout.strip() == locked
    assert f"Open Kernel Module for x86_64  {OLDER}" in banner(older_node)
    assert run_ssh(older_node, "nvidia-smi -L", check=False).returncode != 0, "NVML against another module"

    # driver_reboot: if-needed: pyinfra reboots it into NVIDIA's module and goes on.
    second = deploy(name, REBOOTING)
    assert second.returncode == 0 and summary_row(name)["verdict"] == "deployed", second.output[-4000:]
    assert f"Open Kernel Module for x86_64  {locked}" in banner(older_node)
    assert run_ssh(older_node, "systemctl is-active nvidia-persistenced").stdout.strip() == "active"
    _, after = validate(name, data=REBOOTING)
    assert driver_findings(after) == {}, after["plan"]["findings"]
    assert not [f for f in after["plan"]["findings"] if f["code"] == "DRIVER_CANONICAL"], after["plan"]["findings"]
    again = deploy(name, REBOOTING, json_output=True)
    assert again.returncode == 0 and changed_operations(again) == [], again.output[-4000:]


def test_canonical_dkms_driver_at_the_lock_s_version_is_adopted_and_held_without_a_reboot(locked_node):
    name = locked_node["name"]
    version = f"{LOCK.version}-0ubuntu0.24.04.1"
    _, before = validate(name, data=DRIVER)
    seen, driver = canonical_finding(before), before["plan"]["driver"]
    assert seen["severity"] == "info" and "deploy adopts it" in seen["fix"], seen
    assert driver["canonical"] == "adopt" and driver["install"] == [] and driver["remove"] == [], driver
    assert set(driver["hold"]) == set(CANONICAL_NAMES) and driver["reboot_for"] == "", driver
    [held] = [f for f in before["plan"]["findings"] if f["code"] == "DRIVER_NOT_HELD"]
    assert "at their versions" in held["fix"] and "lock's versions" not in held["fix"], held

    first = deploy(name, DRIVER)
    assert first.returncode == 0 and summary_row(name)["verdict"] == "deployed", first.output[-4000:]
    installed = packages(locked_node)
    assert {package: installed.get(package) for package in CANONICAL_NAMES} == {
        package: (version, "hi") for package in CANONICAL_NAMES}, installed
    assert not set(LOCK.pins("pinning", "open")) & set(installed), installed
    assert f"Open Kernel Module for x86_64  {LOCK.version}" in banner(locked_node)
    assert run_ssh(locked_node, "systemctl is-active nvidia-persistenced").stdout.strip() == "active"
    blacklist = run_ssh(locked_node, "cat /etc/apt/apt.conf.d/51gpu-bringup-driver").stdout
    assert '"^nvidia-dkms-580-server-open$";' in blacklist, blacklist
    _, after = validate(name, data=DRIVER)
    assert driver_findings(after) == {}, after["plan"]["findings"]
    assert canonical_finding(after)["severity"] == "info" and after["plan"]["driver"]["changes"] == [], after["plan"]
    again = deploy(name, DRIVER, json_output=True)
    assert again.returncode == 0 and changed_operations(again) == [], again.output[-4000:]
