"""``python -m bringup.plan FACTS --config X`` with ``driver_manage: true``: the printed
plan's ``driver`` and the fixes validate reports, from a checkout whose files/locks also
holds a driver lock (made by ``python -m control.locks driver`` from the fixture index:
tests/fixtures/driver-repo/, signed by a key of the test's own)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bringup import locks
from control import locks as lockgen
from tests.unit.test_driver_plan import converged_layer, nvswitch_facts, proprietary_facts
from tests.unit.test_locks import signed_repo, signer  # noqa: F401 (a fixture)
from tests.unit.scenarios import converged

ROOT = Path(__file__).resolve().parents[2]
INDEX = (ROOT / "tests" / "fixtures" / "driver-repo" / "Packages-debian12-amd64").read_text()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory, signer):  # noqa: F811
    """A directory holding the checkout's files/locks and a driver lock for debian12-x86_64."""
    work = tmp_path_factory.mktemp("checkout")
    shutil.copytree(ROOT / locks.LOCKS_DIR, work / locks.LOCKS_DIR)
    fingerprint = signed_repo(work / "repos" / "debian12" / "x86_64", signer, INDEX)
    assert lockgen.driver((work / "repos").as_uri(), [("debian12", "x86_64")], root=work,
                          fingerprint=fingerprint, log=open(os.devnull, "w")) == 1
    return work


def plan_cli(work, facts, settings):
    (work / "facts.json").write_text(json.dumps(facts))
    (work / "settings.yaml").write_text(json.dumps(settings))  # JSON is YAML
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", "facts.json", "--config", "settings.yaml"],
                            cwd=work, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    return json.loads(result.stdout)


def driver_findings(printed):
    return [f"{f['code']}:{f['severity']}" for f in printed["findings"]
            if f["code"].startswith(("DRIVER_", "FABRIC_", "NVLSM_", "NOUVEAU_"))]


@pytest.mark.parametrize("facts,settings,expected,install", [
    (proprietary_facts(), {}, ["DRIVER_OPEN_MODULE_REQUIRED:fix", "DRIVER_REBOOT_NEEDED:warning"],
     "nvidia-kernel-open-dkms=580.95.05-1"),
    (proprietary_facts(), {"driver_reboot": "if-needed"}, ["DRIVER_OPEN_MODULE_REQUIRED:fix", "DRIVER_REBOOT_NEEDED:fix"],
     "nvidia-kernel-open-dkms=580.95.05-1"),
    (nvswitch_facts(), {}, ["FABRIC_MANAGER_MISSING:fix", "NVLSM_MISSING:fix"], "nvidia-fabricmanager=580.95.05-1"),
    (dict(converged(), driver_layer=converged_layer()), {}, [], "nvidia-driver-cuda=580.95.05-1"),
], ids=["proprietary on Blackwell", "proprietary, if-needed", "NVSwitch without Fabric Manager", "converged"])
def test_the_printed_plan_says_what_the_driver_step_does(checkout, facts, settings, expected, install):
    printed = plan_cli(checkout, facts, {"driver_manage": True, **settings})
    driver = printed["driver"]
    assert driver["manage"] is True and driver["lock"] == "files/locks/driver-580-debian12-x86_64.txt"
    assert driver["version"] == "580.95.05" and driver["flavour"] == "open"
    assert install in driver["install"]
    assert driver_findings(printed) == expected
    assert (driver["changes"] == []) is (expected == [])


def test_driver_manage_false_prints_an_empty_driver_step(checkout):
    printed = plan_cli(checkout, proprietary_facts(), {})
    assert printed["driver"]["manage"] is False and printed["driver"]["install"] == []
    assert driver_findings(printed) == ["DRIVER_OPEN_MODULE_REQUIRED:blocker"]


def test_a_bad_driver_setting_is_one_line(checkout):
    (checkout / "settings.yaml").write_text("driver_reboot: always\n")
    (checkout / "facts.json").write_text(json.dumps(converged()))
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", "facts.json", "--config", "settings.yaml"],
                            cwd=checkout, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "error: node: setting driver_reboot='always' is invalid: use one of never, if-needed"


def test_the_open_flavour_asked_for_a_pre_turing_node_is_a_blocker(checkout):
    """A V100 node (SM 7.0): ``auto`` plans the proprietary modules; ``open`` is refused by name."""
    from tests.unit.test_driver_plan import gpus

    facts = dict(converged(), gpus=gpus("Tesla V100-SXM2-32GB", "7.0", 8), driver_layer=converged_layer())
    assert plan_cli(checkout, facts, {"driver_manage": True})["driver"]["flavour"] == "proprietary"
    printed = plan_cli(checkout, facts, {"driver_manage": True, "driver_flavour": "open"})
    refused = [f for f in printed["findings"] if f["code"] == "DRIVER_PROPRIETARY_MODULE_REQUIRED"]
    assert [f["severity"] for f in refused] == ["blocker"] and "compute capability 7.0" in refused[0]["message"]


@pytest.mark.parametrize("shape,choice,severity", [("server_open", "adopt", "info"),
                                                   ("server_prebuilt", "replace", "blocker")])
def test_canonical_s_driver_through_the_plan_cli(checkout, shape, choice, severity):
    """Canonical's 580-server-open driver on Ubuntu 24.04 (bringup/canonical_driver.py), planned
    by the CLI against the shipped ubuntu2404 lock: adopted by DKMS at the lock's version,
    refused where its modules are Canonical's prebuilt, signed ones (Secure Boot)."""
    from tests.unit import test_driver_plan_canonical as canonical

    facts = canonical.facts(canonical.layer(getattr(canonical, shape)()))
    printed = plan_cli(checkout, facts, {"driver_manage": True})
    driver = printed["driver"]
    assert driver["lock"] == "files/locks/driver-580-ubuntu2404-x86_64.txt" and driver["canonical"] == choice
    [finding] = [f for f in printed["findings"] if f["code"] == "DRIVER_CANONICAL"]
    assert finding["severity"] == severity and "580-server series (ubuntu-drivers --gpgpu)" in finding["message"]
    if choice == "adopt":
        assert driver["install"] == [] and "libnvidia-compute-580-server" in driver["hold"]
    else:
        assert "linux-modules-nvidia-580-server-open-generic" in driver["remove"]
        assert "nvidia-dkms-580-open=580.95.05-0ubuntu1" in driver["install"]
    left = plan_cli(checkout, facts, {})
    assert left["driver"]["manage"] is False and left["driver"]["remove"] == []
    assert [f["severity"] for f in left["findings"] if f["code"] == "DRIVER_CANONICAL"] == ["info"]
