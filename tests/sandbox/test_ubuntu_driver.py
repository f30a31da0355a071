"""The driver step on Ubuntu 24.04 (tasks/driver.py through the real ``pyinfra ... deploy.py``):
a light node (``deploy_steps`` repo and driver) of an HGX B200 with NVSwitches and no Fabric
Manager, ``driver_manage: true``: the sandbox repository's ubuntu2404 directory serves the
stand-in driver under NVIDIA's Ubuntu names (sandbox/aptrepo/driver_debs.py), deploy installs
files/locks/driver-580-ubuntu2404-x86_64.txt's open flavour (580.95.05-0ubuntu1) and Fabric
Manager at the driver's version (580.95.05-1), holds them, and Fabric Manager runs; validate
then reports no driver finding, a second deploy changes nothing and an ``apt-get upgrade``
with the newer driver served moves nothing. Reached through the ubuntu user's hardened sudo
(the cloud-login state), as such a node is."""

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
    # Reached as an HGX B200 cloud image is: its ubuntu user through hardened sudo (cloud-login).
    entry = sandbox_node(NAME, "127.0.0.174", gpu="b200-x8", toolkit="none", states=("nvswitch-no-fm", "cloud-login"),
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
    # A routine upgrade with the newer driver (580.105.08-0ubuntu1) in the repository moves nothing.
    offered = run_ssh(hgx_node, "apt-get update -qq && apt-cache madison nvidia-dkms-580-open").stdout
    assert "580.105.08-0ubuntu1" in offered, offered
    held = packages(hgx_node)
    run_ssh(hgx_node, "DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::=--force-confold upgrade")
    assert packages(hgx_node) == held
    assert "ubuntu : " in run_ssh(hgx_node, "cat /var/log/sudo.log").stdout, "the deploy did not go through sudo"


CANONICAL = "drv-u2404c"


@pytest.fixture(scope="module")
def canonical_node(sandbox_node):
    """An RTX PRO 6000 node on Ubuntu 24.04 whose image came with Canonical's driver
    (``ubuntu-drivers install --gpgpu``: the ubuntu-drivers field state, empty stand-ins under
    Canonical's names and versions); validate only."""
    entry = sandbox_node(CANONICAL, "127.0.0.175", gpu="rtx-pro-6000-x8", toolkit="none", states=("ubuntu-drivers",),
                         os_name="ubuntu2404")
    return dict(entry, name=CANONICAL)


def test_validate_names_canonical_s_driver_and_refuses_to_replace_its_signed_modules(canonical_node):
    # Without driver_manage: named, an info, nothing planned.
    _, left = validate(CANONICAL, data=("deploy_steps=repo,driver", "service_enable=false"))
    [seen] = [f for f in left["plan"]["findings"] if f["code"] == "DRIVER_CANONICAL"]
    assert seen["severity"] == "info", seen
    assert "580-server series (ubuntu-drivers --gpgpu), open kernel module, Canonical's prebuilt" in seen["message"]
    assert "nvidia-utils-580-server=580.95.05-0ubuntu0.24.04.2" in seen["message"], seen
    assert left["plan"]["driver"]["manage"] is False
    # With driver_manage: its prebuilt modules are Canonical's signed ones: deploy refuses to
    # replace them by a DKMS module no enrolled key signs (Secure Boot), and says how.
    _, managed = validate(CANONICAL, data=REBOOTING, expect_rc=1)
    [seen] = [f for f in managed["plan"]["findings"] if f["code"] == "DRIVER_CANONICAL"]
    driver = managed["plan"]["driver"]
    assert seen["severity"] == "blocker" and driver["canonical"] == "replace", seen
    assert "mokutil --import" in seen["fix"], seen
    assert {"linux-modules-nvidia-580-server-open-generic", "libnvidia-compute-580-server",
            "nvidia-headless-no-dkms-580-server-open"} <= set(driver["remove"]), driver
    assert "nvidia-dkms-580-open=580.95.05-0ubuntu1" in driver["install"], driver
