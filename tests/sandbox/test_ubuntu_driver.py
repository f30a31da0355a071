"""The driver step on Ubuntu 24.04 through the real ``pyinfra ... deploy.py``.

An HGX B200 (8 GPUs, 4 NVSwitches) as a vendor ships it: no driver, no Fabric Manager, reached
through the ubuntu user's hardened sudo (the cloud-login state), as such a cloud image is. With
``driver_manage: true`` and ``driver_reboot: if-needed`` a first deploy installs
files/locks/driver-580-ubuntu2404-x86_64.txt's open flavour (580.95.05-0ubuntu1, served under
NVIDIA's Ubuntu names by the sandbox repository's stand-ins, sandbox/aptrepo/driver_debs.py),
holds it and reboots; planned again, the loaded driver shows the NVSwitches, the plan now asks for
Fabric Manager too, and the run stops in one line saying so (the later steps were planned before
the boot). The second installs Fabric Manager at the driver's version (580.95.05-1), held, and the
rest: the toolkit, the venv, the reduced pre-warm, the unit ordered after Fabric Manager. validate says
ready, the node suite is green through the same login, a third deploy changes nothing and an
``apt-get upgrade`` with the newer driver served moves nothing.

And an RTX PRO 6000 node whose image came with Canonical's driver: named by validate."""

import pytest

from bringup.driver_locks import driver_lock_name, parse_driver_lock
from sandbox import aptrepo, pypimirror
from sandbox import node as sandbox_nodes
from tests.sandbox.test_driver_converge import REBOOTING, banner, deploy, driver_findings, packages
from tests.sandbox_fixtures import REPO_ROOT, changed_operations, node_suite, run_ssh, summary_row, validate

pytestmark = pytest.mark.sandbox

NAME = "drv-u2404"
LOCK = parse_driver_lock((REPO_ROOT / driver_lock_name("580", "ubuntu2404", "x86_64")).read_text())


# The whole path with Ubuntu 24.04's reduced pre-warm (tests/sandbox/test_ubuntu.py's DATA); the
# unit written, not started (no model is served here).
FULL = ("driver_manage=true", "driver_reboot=if-needed", "prewarm_modules=activation:silu,sglang-activation",
        "service_model=Qwen/Qwen3-0.6B", "service_enable=false")


@pytest.fixture(scope="module")
def hgx_node(sandbox_node):
    aptrepo.ensure_served()
    pypimirror.serve()
    entry = sandbox_node(NAME, "127.0.0.174", gpu="b200-x8", toolkit="none",
                         states=("no-driver", "nvswitch-no-fm", "cloud-login"), os_name="ubuntu2404")
    yield dict(entry, name=NAME)
    sandbox_nodes.down([NAME])


def test_ubuntu_hgx_from_no_driver_to_a_green_node_suite(hgx_node, tmp_path):
    _, before = validate(NAME, data=FULL)
    plan = before["plan"]
    assert plan["driver"]["lock"] == driver_lock_name("580", "ubuntu2404", "x86_64")
    # No driver, so no NVSwitch is seen yet: Fabric Manager comes with the lock's fabric role
    # once the driver shows them (planned again after the reboot).
    assert "DRIVER_NOT_LOADED" in driver_findings(before), plan["findings"]
    assert "DRIVER_LOCK_MISSING" not in driver_findings(before), plan["findings"]
    assert plan["arch_list"] == "10.0a", plan["arch_list"]

    # The first run: the driver, the reboot it needs; planned again with the module loaded, the
    # node shows its NVSwitches, so the plan now also asks for Fabric Manager: the run stops there.
    first = deploy(NAME, FULL)
    assert first.returncode == 1, first.output[-4000:]
    assert (f"{NAME}: rebooted into 580.95.05 open; planned again, the driver step now also installs "
            "libnvidia-nscq=580.95.05-1 nvidia-fabricmanager=580.95.05-1 nvlsm=2025.06.10-1, starts "
            "nvidia-fabricmanager; nothing after the driver step ran: run deploy again") in first.output, \
        first.output[-4000:]
    row = summary_row(NAME)
    assert row["verdict"] == "stopped" and row["reason"].endswith("run deploy again"), row
    assert "nvidia-fabricmanager" not in packages(hgx_node)
    assert run_ssh(hgx_node, "test -e /opt/sglang/venv || echo none").stdout.strip() == "none"
    # The second: the whole node, Fabric Manager before the unit that is ordered after it.
    result = deploy(NAME, FULL)
    assert result.returncode == 0, result.output[-4000:]
    assert summary_row(NAME)["verdict"] == "deployed"
    assert "Open Kernel Module for x86_64  580.95.05" in banner(hgx_node)
    installed = packages(hgx_node)
    wanted = LOCK.pins("pinning", "open", "fabric", "nvlink5")
    assert {name: installed.get(name, ("", ""))[0] for name in wanted if name != "nvlsm"} == {
        name: version for name, version in wanted.items() if name != "nvlsm"}, installed
    assert installed["nvidia-dkms-580-open"] == ("580.95.05-0ubuntu1", "hi"), installed
    assert installed["nvidia-fabricmanager"] == ("580.95.05-1", "hi"), installed
    assert "nvidia-dkms-580" not in installed and "nvidia-kernel-open-dkms" not in installed, installed
    assert run_ssh(hgx_node, "systemctl is-active nvidia-fabricmanager nvidia-persistenced").stdout.split() == [
        "active", "active"]
    ordered = run_ssh(hgx_node, "systemctl show -p After --value sglang.service").stdout
    assert "nvidia-fabricmanager.service" in ordered, ordered

    _, after = validate(NAME, data=FULL)
    assert driver_findings(after) == {}, after["plan"]["findings"]
    assert summary_row(NAME)["verdict"] == "ready"
    # The suite through the same login (inventory/gpu.py registers the ubuntu user and sudo).
    suite = node_suite(tmp_path, "--node-limit", NAME, data=FULL)
    assert suite.rc == 0 and suite.failing(NAME) == set(), suite
    assert {"nvidia_smi_answers", "toolkit_packages_at_lock"} <= suite.checks(NAME), suite.checks(NAME)
    again = deploy(NAME, FULL, json_output=True)
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
