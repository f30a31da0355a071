"""The driver step's reboot decision and the ``needs reboot`` verdict through the real
pyinfra CLI on @local (tests/fixtures/deploy/driver_step.py: the driver step with a
given DriverPlan). This machine has no NVIDIA module loaded: the step's fresh read of
the driver layer finds none, whatever the plan said. Its packages are this machine's own
``dpkg`` at its installed version, so nothing is installed; no reboot can run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
LOADED_NONE = "loaded: none; installed: 580.95.05 open"


def dpkg_version():
    result = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        pytest.skip("not a dpkg system")
    return result.stdout


def deploy(reports, later_steps=False, env=None, **fields):
    """Run the fixture deploy file; its reports go to ``reports`` (each test its own), ``env``
    adds the fixture's switches (its docstring)."""
    plan = {"manage": True, "branch": "580", "version": "580.95.05", "flavour": "open", "lock": "x.txt",
            "install": [f"dpkg={dpkg_version()}"], **fields}
    env = dict(os.environ, GPU_BRINGUP_REPORTS=str(reports), DRIVER_PLAN=json.dumps(plan),
               DRIVER_LATER_STEPS="1" if later_steps else "", **(env or {}))
    command = [PYINFRA, "-y", "@local", "--data", "target_sms=12.0", "tests/fixtures/deploy/driver_step.py"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
                            stdin=subprocess.DEVNULL, check=False)
    result.output = result.stdout + result.stderr
    document = json.loads((reports / "summary.json").read_text())
    return result, document["hosts"][0]


@pytest.mark.parametrize("fields,later_steps,reason", [
    ({"reboot_for": LOADED_NONE}, False, "driver_reboot: never"),
    # The plan expected the module loaded; the fresh read says otherwise: the step itself
    # stops the host before the steps that need the driver.
    ({}, True, "driver_reboot: never"),
    # A serving host is not rebooted without driver_reboot_serving.
    ({"reboot": "if-needed", "service_active": True, "reboot_for": LOADED_NONE}, False,
     "driver_reboot_serving is false"),
], ids=["never", "found only after the install", "if-needed but serving"])
def test_a_driver_not_loaded_is_needs_reboot_exit_status_1(tmp_path, fields, later_steps, reason):
    result, row = deploy(tmp_path, later_steps, **fields)
    assert result.returncode == 1, result.output[-3000:]
    assert row["verdict"] == "needs reboot", row
    assert LOADED_NONE in row["reason"] and reason in row["reason"], row
    assert f"@local: needs reboot: {LOADED_NONE}" in result.output
    assert "a reboot was attempted" not in result.output
    assert "Traceback" not in result.output


def test_if_needed_reboots_a_host_that_does_not_serve(tmp_path):
    # The fixture's stand-in for server.reboot fails the step: the decision was to reboot.
    result, row = deploy(tmp_path, reboot="if-needed", reboot_for=LOADED_NONE)
    assert result.returncode == 1 and "test: a reboot was attempted" in result.output, result.output[-3000:]
    assert row["verdict"] == "failed" and "Check the loaded module" in row["reason"], row


def test_a_driver_not_managed_adds_nothing(tmp_path):
    result, row = deploy(tmp_path, manage=False, reboot_for=LOADED_NONE)
    assert result.returncode == 0, result.output[-3000:]
    assert row["verdict"] == "deployed" and row["changed"] == "-", row


def test_a_planner_raising_after_the_reboot_fails_that_host_alone_in_one_line(tmp_path):
    """revalidated() ran gather/plan outside planned_host's guard: the exception ended every
    host's run with a traceback and no summary. Two hosts (@local, @chroot//), both
    "rebooted" by the stand-in; the second's planner raises when it is planned again."""
    inventory = tmp_path / "two_hosts.py"
    inventory.write_text("hosts = [('@local', {'target_sms': '12.0'}), ('@chroot//', {'target_sms': '12.0'})]\n")
    plan = {"manage": True, "branch": "580", "version": "580.95.05", "flavour": "open", "lock": "x.txt",
            "install": [f"dpkg={dpkg_version()}"], "reboot": "if-needed", "reboot_for": LOADED_NONE}
    reports = tmp_path / "reports"
    env = dict(os.environ, GPU_BRINGUP_REPORTS=str(reports), DRIVER_PLAN=json.dumps(plan), DRIVER_REBOOTED="1",
               DRIVER_REVALIDATE_RAISES="@chroot//")
    result = subprocess.run([PYINFRA, "-y", str(inventory), "tests/fixtures/deploy/driver_step.py"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL,
                            check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    line = ("@chroot//: rebooted, but planning it again failed: RuntimeError: test: the planner failed after the "
            "reboot; nothing after the driver step ran")
    assert sum(line in text for text in output.splitlines()) >= 1, output[-3000:]
    rows = {row["host"]: row for row in json.loads((reports / "summary.json").read_text())["hosts"]}
    assert set(rows) == {"@local", "@chroot//"}, rows
    assert rows["@chroot//"]["verdict"] == "failed" and "planning it again failed" in rows["@chroot//"]["reason"], rows
    # The other host was planned again for real: its fresh read finds no module loaded.
    assert rows["@local"]["verdict"] == "failed" and "rebooted, but" in rows["@local"]["reason"], rows
    assert "planning it again failed" not in rows["@local"]["reason"], rows


def test_a_plan_that_grows_after_the_reboot_stops_the_host_in_one_line_and_starts_nothing(tmp_path):
    """Rebooted into the plan's module, planned again: its driver step now also installs and
    starts Fabric Manager (the stand-in re-plan of tests/fixtures/deploy/driver_step.py). The
    steps after it were planned before the boot, so the host stops there, ``stopped``, in one
    line naming what was added; the driver's units are not started by this run."""
    result, row = deploy(tmp_path, reboot="if-needed", reboot_for=LOADED_NONE, units=["nvidia-persistenced"],
                         env={"DRIVER_REBOOTED": "1", "DRIVER_REPLAN_GROWS": "@local"})
    line = ("@local: rebooted into 580.95.05 open; planned again, the driver step now also installs "
            "nvidia-fabricmanager=580.95.05-1, starts nvidia-fabricmanager; nothing after the driver step ran: run "
            "deploy again")
    assert result.returncode == 1 and line in result.output, result.output[-3000:]
    assert "Traceback" not in result.output, result.output[-3000:]
    assert row["verdict"] == "stopped" and row["reason"] == line.split(": ", 1)[1], row
    assert "Enable and start nvidia-persistenced" not in result.output, result.output[-3000:]


def test_a_module_loaded_without_a_reboot_is_planned_again_as_after_one(tmp_path):
    """Planned with no module loaded, the plan's module is loaded after the install without a
    boot (a postinst that started nvidia-persistenced): the host is planned again, and the new
    plan's Fabric Manager stops it as after a reboot; no reboot is attempted."""
    result, row = deploy(tmp_path, reboot="if-needed", reboot_for=LOADED_NONE, units=["nvidia-persistenced"],
                         env={"DRIVER_LOADED_NOW": "1", "DRIVER_REPLAN_GROWS": "@local"})
    line = ("@local: loaded 580.95.05 open without a reboot; planned again, the driver step now also installs "
            "nvidia-fabricmanager=580.95.05-1, starts nvidia-fabricmanager; nothing after the driver step ran: run "
            "deploy again")
    assert result.returncode == 1 and line in result.output, result.output[-3000:]
    assert "a reboot was attempted" not in result.output
    assert row["verdict"] == "stopped", row


@pytest.mark.parametrize("initramfs,blacklist_file,expected", [
    # The probe found an initramfs without the blacklist (a deploy killed after it wrote the
    # blacklist): the blacklist is not written again, the initramfs is updated all the same.
    (["6.1.0-99-test"], "", ["-u -k 6.1.0-99-test"]),
    # Nothing stale, no blacklist to write: no update.
    ([], "", []),
], ids=["stale initramfs, blacklist already there", "converged"])
def test_the_initramfs_is_updated_where_the_plan_finds_it_stale(tmp_path, monkeypatch, initramfs, blacklist_file,
                                                                 expected):
    """update-initramfs ran only when this run wrote the blacklist; a stand-in first on PATH
    records what the step runs."""
    bin_dir, log = tmp_path / "bin", tmp_path / "update-initramfs.log"
    bin_dir.mkdir()
    standin = bin_dir / "update-initramfs"
    standin.write_text(f'#!/bin/sh\n# STAND-IN for the test\necho "$*" >> {log}\n')
    standin.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    result, _ = deploy(tmp_path / "reports", initramfs=initramfs, blacklist_file=blacklist_file,
                       reboot_for=LOADED_NONE)
    assert "Traceback" not in result.output, result.output[-3000:]
    assert (log.read_text().splitlines() if log.exists() else []) == expected, result.output[-3000:]


def test_a_driver_layer_that_cannot_be_read_reboots_nothing(tmp_path):
    """The step's fresh read of the loaded module failed (pyinfra fails the host and returns
    no value) and was taken for "no module loaded": with driver_reboot: if-needed the host
    was rebooted on a read that said nothing. Now that host fails in one line, nothing
    rebooted. Two hosts (@local, @chroot//): the second's read fails."""
    inventory = tmp_path / "two_hosts.py"
    inventory.write_text("hosts = [('@local', {'target_sms': '12.0'}), ('@chroot//', {'target_sms': '12.0'})]\n")
    plan = {"manage": True, "branch": "580", "version": "580.95.05", "flavour": "open", "lock": "x.txt",
            "install": [f"dpkg={dpkg_version()}"], "reboot": "if-needed", "reboot_for": LOADED_NONE}
    reports = tmp_path / "reports"
    env = dict(os.environ, GPU_BRINGUP_REPORTS=str(reports), DRIVER_PLAN=json.dumps(plan),
               DRIVER_LAYER_UNREADABLE="@chroot//")
    result = subprocess.run([PYINFRA, "-y", str(inventory), "tests/fixtures/deploy/driver_step.py"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL,
                            check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    attempted = [line for line in output.splitlines() if "a reboot was attempted" in line]
    assert not any("@chroot//" in line for line in attempted), output[-3000:]
    assert "@chroot//: could not read the loaded module again after the install; nothing rebooted" in output, \
        output[-3000:]
    rows = {row["host"]: row for row in json.loads((reports / "summary.json").read_text())["hosts"]}
    assert rows["@chroot//"]["verdict"] == "failed", rows
