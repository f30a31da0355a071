"""``make setup`` installs only the control side (python3-venv, the venv of
requirements.txt); the sandbox's host packages (sandbox/host-packages.txt,
sandbox/aptrepo/host-packages.txt: debootstrap, QEMU, a cross compiler) come with the
targets that build sandbox nodes or repositories, which ``make test`` (CI, from nothing),
``make demo``, ``make lock`` and ``make bench`` depend on. Read from ``make -n``: what
make would run, nothing run."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_ONLY = ("debootstrap", "qemu-user-static", "gcc-aarch64-linux-gnu", "gnupg")


def would_run(*targets):
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    result = subprocess.run(["make", "-n", "-B", *targets], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def installed_by(output):
    """The package names of each ``for p in ...; do dpkg-query`` line make would run."""
    return {name for found in re.findall(r"for p in (.*?); do dpkg-query", output) for name in found.split()}


def test_setup_installs_only_the_control_side():
    output = would_run("setup")
    assert installed_by(output) == {"python3-venv"}
    assert "pip install" in output and "-r requirements.txt" in output
    assert not any(package in output for package in SANDBOX_ONLY), output


@pytest.mark.parametrize("target", ["test", "demo", "lock", "bench", "sandbox-up"])
def test_sandbox_targets_install_the_sandbox_packages(target):
    packages = installed_by(would_run(target))
    assert set(SANDBOX_ONLY) | {"python3-venv"} <= packages, packages
