"""``python -m bringup.explain`` on the driver's Xid lines, through the real CLI (file and
stdin): the public samples of tests/fixtures/xid/ (each citing its source) map to
``GPU_XID`` causes naming the Xid, the GPU's bus id and NVIDIA's action (bringup/xid.py)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bringup import explain

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "fixtures" / "xid"
FAILURES = ROOT / "tests" / "fixtures" / "failures"

# sample -> its causes, one per GPU and Xid in log order: (Xid, bus id, NVIDIA's description, action).
EXPECTED = {
    "open-gpu-kernel-modules-1151": [(79, "0000:01:00.0", "GPU has fallen off the bus", "reboot"),
                                     (154, "0000:01:00.0", "GPU Recovery Action Changed", "reset_gpu")],
    "nvsentinel-155": [(79, "0000:44:00.0", "GPU has fallen off the bus", "reboot")],
    "vllm-5901": [(13, "0000:43:00.0", "Graphics Engine Exception", "restart_app")],
    "gpud-46": [(13, "0000:cb:00.0", "Graphics Engine Exception", "restart_app"),
                (109, "0000:cb:00.0", "Context Switch Timeout Error", "reset_gpu")],
    "akash-support-244": [(43, "0000:00:05.0", "GPU stopped processing", "none"),
                          (31, "0000:00:07.0", "GPU memory page fault", "restart_app"),
                          (94, "0000:00:08.0", "Contained memory error", "restart_app")],
    "open-gpu-kernel-modules-1150": [(45, f"0000:{bus}:00.0", "Preemptive cleanup, due to previous errors",
                                      "follow_other") for bus in ("dc", "ed", "ba", "97")],
    "proton-8072": [(13, "0000:01:00.0", "Graphics Engine Exception", "restart_app")],
    "bumblebee-677": [(32, "0000:01:00.0", "Invalid or corrupted push buffer stream", "restart_app"),
                      (31, "0000:01:00.0", "GPU memory page fault", "restart_app")],
    "nvidia-xid-docs": [(14, "0000:03:00.0", "Fake or injected error from userspace", "none"),
                        (79, "0000:5a:00.0", "GPU has fallen off the bus", "reboot")],
}


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "bringup.explain", *args], cwd=ROOT, capture_output=True,
                          text=True, input=stdin, timeout=60)


def reported(output):
    return re.findall(r"^([A-Z_]+): (.+) \(line \d+\)$", output, re.M)


def titles(causes):
    return [("GPU_XID", f"the driver logged Xid {number} on GPU {bus}: {name}; NVIDIA's action: {action}")
            for number, bus, name, action in causes]


def test_every_sample_is_expected():
    assert {path.stem for path in SAMPLES.glob("*.log")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_names_each_xid_its_gpu_and_nvidias_action(name):
    result = run_cli(str((SAMPLES / f"{name}.log").relative_to(ROOT)))
    assert result.returncode == explain.EXIT_FOUND, result.stdout + result.stderr
    assert reported(result.stdout) == titles(EXPECTED[name]), result.stdout
    assert result.stdout.count("docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html") == len(EXPECTED[name])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_through_stdin(name):
    result = run_cli("-", stdin=(SAMPLES / f"{name}.log").read_text())
    assert result.returncode == explain.EXIT_FOUND and result.stdout.startswith("stdin: ")
    assert reported(result.stdout) == titles(EXPECTED[name]), result.stdout


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_header_alone_explains_nothing(name):
    header = "".join(line for line in (SAMPLES / f"{name}.log").read_text().splitlines(keepends=True)
                     if line.startswith("#"))
    result = run_cli("-", stdin=header)
    assert result.returncode == explain.EXIT_UNKNOWN and "no known cause" in result.stdout, result.stdout


def test_the_driver_lines_without_an_xid_are_no_cause():
    """The driver's multi-line "fallen off the bus" without an Xid line (NVIDIA/NVSentinel#155)."""
    text = "".join(line for line in (SAMPLES / "nvsentinel-155.log").read_text().splitlines(keepends=True)
                   if "NVRM: Xid" not in line)
    result = run_cli("-", stdin=text)
    assert result.returncode == explain.EXIT_UNKNOWN, result.stdout


def test_the_fix_names_the_gpu_to_reset_and_the_repeats():
    result = run_cli(str(SAMPLES / "gpud-46.log"))
    assert "nvidia-smi -r -i 0000:cb:00.0" in result.stdout, result.stdout
    assert "(3 lines of it here)" in result.stdout and "(severity here: blocker)" in result.stdout


def test_xid_before_the_failure_it_may_cause():
    """A GPU that fell off the bus, then the service's own failure: the Xid is named first."""
    text = (SAMPLES / "open-gpu-kernel-modules-1151.log").read_text() + (FAILURES / "service-start-no-gpu.log").read_text()
    codes = [code for code, _ in reported(run_cli("-", stdin=text).stdout)]
    assert codes == ["GPU_XID", "GPU_XID", "CUDA_UNAVAILABLE"]


@pytest.mark.parametrize("line,title", [
    ("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 9999, something new", "the driver logged Xid 9999 on GPU 0000:3b:00.0: "
     "not in this project's Xid table (bringup/xid.py); NVIDIA's action: contact_support"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name={home}, {cuda} }{ GPU has fallen off the bus.",
     "the driver logged Xid 79 on GPU 0000:3b:00.0: GPU has fallen off the bus; NVIDIA's action: reboot"),
    ("\x1b[31mDec 05 01:02:03 host kernel: NVRM: Xid (PCI:0000:3B:00): 48, pid=9, name=python3, DBE (0x1)\x1b[0m",
     "the driver logged Xid 48 on GPU 0000:3b:00.0: Double Bit ECC Error; NVIDIA's action: reset_gpu"),
])
def test_made_up_lines(line, title):
    result = run_cli("-", stdin=line + "\n")
    assert result.returncode == explain.EXIT_FOUND and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert reported(result.stdout) == [("GPU_XID", title)], result.stdout
