"""The driver step on Ubuntu 24.04 (tasks/driver.py through the real ``pyinfra ... deploy.py``):
a light node (``deploy_steps`` repo and driver) of an HGX B200 with NVSwitches and no Fabric
Manager, ``driver_manage: true``: the sandbox repository's ubuntu2404 directory serves the
stand-in driver under NVIDIA's Ubuntu names (sandbox/aptrepo/driver_debs.py), deploy installs
files/locks/driver-580-ubuntu2404-x86_64.txt's open flavour (580.95.05-0ubuntu1) and Fabric
Manager at the driver's version (580.95.05-1), holds them, and Fabric Manager runs; validate
then reports no driver finding and a second deploy changes nothing."""

import pytest

from bringup.driver_locks import driver_lock_name, parse_driver_lock
from sandbox import aptrepo
from tests.sandbox.test_driver_converge import REBOOTING, deploy, driver_findings, packages
from tests.sandbox_fixtures import REPO_ROOT, changed_operations, run_ssh, validate

pytestmark = pytest.mark.sandbox

NAME = "drv-u2404"
LOCK = parse_driver_lock((REPO_ROOT / driver_lock_name("580", "ubuntu2404", "x86_64")).read_text())


@pytest.fixture(scope="module")
def hgx_node(sandbox_node):
    aptrepo.ensure_served()
    entry = sandbox_node(NAME, "127.0.0.174", gpu="b200-x8", toolkit="none", states=("nvswitch-no-fm",),
                         os_name="ubuntu2404")
    return dict(entry, name=NAME)


def test_ubuntu_hgx_gets_the_ubuntu_driver_and_fabric_manager_at_its_version(hgx_node):
    _, before = validate(NAME, data=REBOOTING)
    assert before["plan"]["driver"]["lock"] == driver_lock_name("580", "ubuntu2404", "x86_64")
    assert "DRIVER_LOCK_MISSING" not in driver_findings(before), before["plan"]["findings"]

    result = deploy(NAME, REBOOTING)
    assert result.returncode == 0, result.output[-4000:]
    installed = packages(hgx_node)
    wanted = LOCK.pins("pinning", "open", "fabric", "nvlink5")
    assert {name: installed.get(name, ("", ""))[0] for name in wanted if name != "nvlsm"} == {
        name: version for name, version in wanted.items() if name != "nvlsm"}, installed
    assert installed["nvidia-dkms-580-open"] == ("580.95.05-0ubuntu1", "hi"), installed
    assert installed["nvidia-fabricmanager"] == ("580.95.05-1", "hi"), installed
    assert "nvidia-dkms-580" not in installed and "nvidia-kernel-open-dkms" not in installed, installed
    assert run_ssh(hgx_node, "systemctl is-active nvidia-fabricmanager nvidia-persistenced").stdout.split() == [
        "active", "active"]
    _, after = validate(NAME, data=REBOOTING)
    assert driver_findings(after) == {}, after["plan"]["findings"]
    again = deploy(NAME, REBOOTING, json_output=True)
    assert again.returncode == 0 and changed_operations(again) == [], again.output[-4000:]
