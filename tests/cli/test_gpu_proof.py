"""`make gpu-proof` / bench/gpu_proof.py through its real CLI on this machine, which has
no GPU: it runs up to the first step that needs one and says so in one line, exit 3 (a
failure is 1), with every step before it passed; a machine whose nvidia-smi lists GPUs
(the recorded H100 stand-in of tests/fixtures/gpus) is judged, never "no GPU". The PATH
holds no nvcc and no nvidia-smi of this machine: nothing depends on its
/usr/local/cuda-13.0 or on where the checkout is (the runs start in a scratch directory).
"""

import glob
import json
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_proof.py"
BASE_PATH = "/usr/bin:/bin"
# No torch venv here (a path the planner accepts: not under /tmp).
NO_VENV = "/nonexistent/torch-venv"
NO_GPU_LINE = re.compile(r"^gpu-proof: no GPU here \(.+\): stopped before 'driver layer', the first step that "
                         r"needs one; run it on a GPU machine \(docs/contributing\.md\)$")
# A step that raised: the proof's catch-all row, which would hide a bug.
RAISED = re.compile(r"^[A-Z]\w*(Error|Exception): ")


def environment(bin_dir):
    return {"PATH": f"{bin_dir}:{BASE_PATH}", "HOME": str(bin_dir.parent), "LANG": "C.UTF-8"}


@pytest.fixture
def bin_dir(tmp_path):
    """An empty directory first on PATH; the base PATH must show no GPU tool here."""
    path = tmp_path / "bin"
    path.mkdir()
    for tool in ("nvcc", "nvidia-smi"):
        assert shutil.which(tool, path=BASE_PATH) is None, f"this test needs a PATH without {tool}"
    assert not glob.glob("/dev/nvidia[0-9]*"), "this test needs a machine without an NVIDIA GPU"
    return path


def proof(python, bin_dir, out, *args):
    return subprocess.run([str(python), str(SCRIPT), "--torch-venv", NO_VENV, "--out",
                           str(out), *args], cwd=bin_dir.parent, env=environment(bin_dir), capture_output=True,
                          text=True, timeout=240)


def python3_on_path(bin_dir, python):
    """``python3`` on PATH running ``python`` (a wrapper, so a venv's python stays that venv's)."""
    (bin_dir / "python3").write_text(f"#!/bin/sh\nexec {python} \"$@\"\n")
    (bin_dir / "python3").chmod(0o755)


def saved(out):
    return json.loads((out / "gpu-proof.json").read_text())


def assert_stopped_at_the_first_gpu_step(result, out, before=("pass", "pass")):
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert NO_GPU_LINE.match(lines[-1]), lines[-1]
    assert sum("no GPU here" in line for line in lines) == 1 and "Traceback" not in result.stderr
    document = saved(out)
    steps = [(row["step"], row["result"]) for row in document["steps"]]
    assert steps == [("requirements", before[0]), ("probe", before[1]), ("driver layer", "NO GPU")]
    assert document["exit"] == 3 and document["steps"][-1]["evidence"].startswith("nvidia-smi not found")
    # The table printed is the saved rows'.
    assert f"| driver layer | NO GPU | 0.0 | {document['steps'][-1]['evidence']} |" in lines
    return document


def test_no_gpu_here_stops_at_the_first_step_that_needs_one(bin_dir, tmp_path):
    out = tmp_path / "out"
    document = assert_stopped_at_the_first_gpu_step(proof(sys.executable, bin_dir, out), out)
    assert "fits the schema" in document["steps"][1]["evidence"]
    facts = json.loads((out / "facts.json").read_text())
    assert facts["gpus"] == [] and facts["nvidia_smi"]["error"] == "nvidia-smi not found"


def test_make_gpu_proof_runs_the_script(bin_dir, tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(["make", "-s", "-C", str(ROOT), "gpu-proof", f"PYTHON={sys.executable}",
                             f"TORCH_VENV={NO_VENV}", f"OUT={out}"], env=environment(bin_dir),
                            capture_output=True, text=True, timeout=240)
    # make's own status is 2 for any failed recipe; it names the script's.
    assert result.returncode == 2 and "Error 3" in result.stderr, result.stdout + result.stderr
    assert NO_GPU_LINE.match(result.stdout.splitlines()[-1]) and saved(out)["exit"] == 3


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A python with the standard library only (no packaging, no PyYAML): a torch venv's."""
    where = tmp_path_factory.mktemp("bare")
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    assert subprocess.run([str(python), "-c", "import packaging"], capture_output=True).returncode != 0
    return python


def test_without_the_planners_requirements_it_runs_again_with_python3_that_has_them(bin_dir, tmp_path,
                                                                                  bare_python):
    python3_on_path(bin_dir, sys.executable)
    out = tmp_path / "out"
    document = assert_stopped_at_the_first_gpu_step(proof(bare_python, bin_dir, out), out)
    assert document["steps"][0]["evidence"].endswith(f"(run again from {bare_python}, which lacks them)")


def test_without_them_anywhere_it_says_so_and_runs_what_needs_none(bin_dir, tmp_path, bare_python):
    python3_on_path(bin_dir, bare_python)
    out = tmp_path / "out"
    document = assert_stopped_at_the_first_gpu_step(proof(bare_python, bin_dir, out), out, ("missing", "missing"))
    assert "lacks packaging, PyYAML (requirements.txt)" in document["steps"][0]["evidence"]
    assert document["steps"][1]["evidence"].endswith("schema not checked (needs packaging)")


def test_gpus_listed_is_a_gpu_machine_judged_not_no_gpu(bin_dir, tmp_path):
    """The recorded H100 nvidia-smi (a stand-in of tests/fixtures/gpus) lists 8 GPUs; no
    kernel module, PCI bus, torch or nvcc of theirs is here: each step after the gate
    fails with its own verdict, none with an exception, and the status is 1."""
    recorded = ROOT / "tests" / "fixtures" / "gpus" / "h100-x8"
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\n# STAND-IN for the test: a recorded nvidia-smi\n"
        f'case "$*" in *--query-gpu*) cat {recorded / "query.csv"} ;; *) cat {recorded / "smi.txt"} ;; esac\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    result = proof(sys.executable, bin_dir, out)
    assert result.returncode == 1 and "no GPU here" not in result.stdout, result.stdout + result.stderr
    rows = {row["step"]: row for row in saved(out)["steps"]}
    assert [rows[step]["result"] for step in ("requirements", "probe")] == ["pass", "pass"]
    assert "module None (loaded: False) against driver 580.95.05" in rows["driver layer"]["evidence"]
    assert "0 NVIDIA GPU(s) on the bus, nvidia-smi lists 8" in rows["driver layer"]["evidence"]
    assert rows["plan"]["result"] == "FAIL" and "the venv's torch is built for None" in rows["plan"]["evidence"]
    assert rows["cuda"]["evidence"].startswith(f"{NO_VENV}/bin/python exit 127")
    assert rows["nvcc"]["evidence"].startswith("no torch CUDA build in")
    assert rows["p2p"]["evidence"].startswith(f"{NO_VENV}/bin/python exit 127")
    assert rows["all-reduce"]["evidence"].startswith(f"{NO_VENV}/bin/python exit 127")
    # The probe runs its driver tools from its base PATH (driver_tool), where this stand-in is not.
    assert rows["health"]["evidence"] == "nvidia-smi's health query: nvidia-smi not found"
    # The probe finds driver tools on its base PATH only, where this machine has no dcgmi.
    assert shutil.which("dcgmi", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") is None
    assert rows["dcgm diag"]["evidence"].startswith("DCGM's dcgmi is not installed here")
    assert [row["result"] for row in rows.values()][2:] == ["FAIL"] * 8 + ["not run"]
    assert not [row for row in rows.values() if RAISED.match(row["evidence"])]

