"""The real probe (files/probe.d/), run here with a recorded nvidia-smi per GPU profile.

Only the driver is a stand-in (tests/fixtures/gpus); the script, the shell and the
parser are the product's. Toolkit sections depend on this machine, so only the
GPU, driver and OS parts are asserted here.
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from bringup.layout import NodeLayout, ProbeInputs
from facts.node import probe_command
from facts.probe_output import build_document

ROOT = Path(__file__).resolve().parents[2]
GPUS = ROOT / "tests" / "fixtures" / "gpus"

EXPECTED = [
    # profile, GPU count, SMs, driver, driver max CUDA
    ("rtx-pro-6000-x8", 8, {"12.0"}, "580.95.05", "13.0"),
    ("rtx-5090", 1, {"12.0"}, "575.64.03", "12.9"),
    ("b200-x8", 8, {"10.0"}, "580.82.07", "13.0"),
    ("gb10", 1, {"12.1"}, "580.95.05", "13.0"),
    ("gb200-x4", 4, {"10.0"}, "580.95.05", "13.0"),
    ("h100-x8", 8, {"9.0"}, "580.95.05", "13.0"),
    ("mixed-b200-rtxpro", 2, {"10.0", "12.0"}, "580.95.05", "13.0"),
]


def write_standin(bin_dir, profile):
    """A recorded nvidia-smi: the query rows for --query-gpu, else the full table."""
    source = GPUS / profile
    exit_code = (source / "exit_code").read_text().strip() if (source / "exit_code").exists() else "0"
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *--query-gpu*) cat {source / "query.csv"} ;; *) cat {source / "smi.txt"} ;; esac\n'
        f"exit {exit_code}\n"
    )
    script.chmod(0o755)


def run_probe(tmp_path, profile=None, venv="/nonexistent", env_file="/nonexistent"):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if profile:
        write_standin(bin_dir, profile)
    layout = NodeLayout.for_settings(venv, env_file, str(tmp_path / "cache"), "sglang")
    # The exact command the fact runs on a node.
    result = subprocess.run(["sh", "-c", probe_command(ProbeInputs(layout))], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=60, check=True)
    return build_document(result.stdout.splitlines())


@pytest.mark.parametrize("profile,count,sms,driver,driver_cuda", EXPECTED)
def test_gpu_profiles(tmp_path, profile, count, sms, driver, driver_cuda):
    facts = run_probe(tmp_path, profile)
    assert len(facts["gpus"]) == count, facts["gpus"]
    assert {gpu["compute_cap"] for gpu in facts["gpus"]} == sms
    assert facts["driver"] == {"version": driver, "cuda_version": driver_cuda}
    assert [gpu["index"] for gpu in facts["gpus"]] == list(range(count))
    assert facts["nvidia_smi"] == {"present": True, "error": None}


def test_gb10_unified_memory_has_no_total(tmp_path):
    facts = run_probe(tmp_path, "gb10")
    assert facts["gpus"][0]["memory_total_mib"] is None


def test_no_nvidia_smi(tmp_path):
    facts = run_probe(tmp_path, None)
    assert facts["gpus"] == [] and facts["driver"] is None
    assert facts["nvidia_smi"] == {"present": False, "error": "nvidia-smi not found"}


def test_driver_that_cannot_be_reached(tmp_path):
    facts = run_probe(tmp_path, "driver-failed")
    assert facts["gpus"] == [] and facts["driver"] is None
    assert facts["nvidia_smi"]["present"] is True
    assert "couldn't communicate with the NVIDIA driver" in facts["nvidia_smi"]["error"]


def test_os_and_jit_cache_root(tmp_path):
    facts = run_probe(tmp_path, "b200-x8")
    assert facts["os"]["id"] and facts["os"]["arch"]
    toolchain = facts["jit_cache"].pop("toolchain")
    assert facts["jit_cache"] == {"base": str(tmp_path / "cache"), "modules": [], "prewarm": None}
    assert len(toolchain) == 64 and int(toolchain, 16) >= 0


def test_toolchain_digest_follows_the_service_compilers(tmp_path):
    """The digest SGLang's pre-warm is checked against changes with the compilers the
    service's environment names (CXX, CUDA_HOME's nvcc), and only with them."""
    bin_dir = tmp_path / "compilers"
    bin_dir.mkdir()
    for name, version in (("cxx-a", "c++ (A) 12.2.0"), ("cxx-b", "c++ (B) 12.2.1")):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\necho '{version}'\n")
        script.chmod(0o755)
    env_file = tmp_path / "sglang.env"

    def digest(cxx):
        env_file.write_text(f"CXX={bin_dir / cxx}\nHF_TOKEN=unrelated\n")
        return run_probe(tmp_path, "b200-x8", env_file=str(env_file))["jit_cache"]["toolchain"]

    first = digest("cxx-a")
    assert digest("cxx-a") == first
    assert digest("cxx-b") != first


def test_service_env_file_drives_resolution(tmp_path):
    """The env file's CUDA_HOME wins, as in FlashInfer's get_cuda_path()."""
    home = tmp_path / "cuda-13.0"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    env_file = tmp_path / "sglang.env"
    env_file.write_text(f'# service env\nCUDA_HOME="{home}"\nFLASHINFER_CUDA_ARCH_LIST=12.0f\n')
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", env_file=str(env_file))
    resolution = facts["resolution"]
    assert (resolution["cuda_home"], resolution["via"], resolution["version"]) == (str(home), "CUDA_HOME", "13.0")
    assert resolution["arch_list_env"] == "12.0f" and resolution["env_file"] is True


def test_venv_that_exists(tmp_path):
    """A venv python is asked for torch/flashinfer; one without torch reports the error."""
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    facts = run_probe(tmp_path, "b200-x8", venv=str(venv))
    assert facts["flashinfer"] is None
    assert "ModuleNotFoundError" in facts["torch"]["error"]


def test_jit_cache_modules_are_listed(tmp_path):
    module = tmp_path / "cache" / ".cache" / "flashinfer" / "0.7.2" / "120f" / "cached_ops" / "sampling"
    module.mkdir(parents=True)
    (module / "sampling.so").write_bytes(b"")
    facts = run_probe(tmp_path, "rtx-pro-6000-x8")
    assert facts["jit_cache"]["modules"] == [{"flashinfer": "0.7.2", "arch": "120f", "module": "sampling"}]


def test_prewarm_manifest_and_ninja_freshness(tmp_path):
    """Modules whose ninja has work are named; ninja itself runs (the venv's, here a stand-in path)."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "ninja").symlink_to("/usr/bin/ninja")
    fresh, stale = tmp_path / "fresh", tmp_path / "stale"
    for build_dir, target in ((fresh, "out"), (stale, "missing")):
        build_dir.mkdir()
        (build_dir / "build.ninja").write_text(f"rule touch\n  command = touch $out\nbuild {target}: touch\n")
    (fresh / "out").write_text("")
    subprocess.run(["ninja", "-C", str(fresh)], check=True, capture_output=True)
    manifest = tmp_path / "cache" / "prewarm" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"flashinfer": "0.7.2", "modules": [
        {"request": "norm", "dir": str(fresh)}, {"request": "sampling", "dir": str(stale)}]}))
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(tmp_path / "venv"))
    assert facts["jit_cache"]["prewarm"]["stale"] == ["sampling"]
    assert facts["jit_cache"]["prewarm"]["manifest"]["flashinfer"] == "0.7.2"


def test_document_is_json_serialisable(tmp_path):
    json.dumps(run_probe(tmp_path, "mixed-b200-rtxpro"))


def test_path_chains_make_a_writable_directory_a_blocker(tmp_path):
    """The probe's path chains, planned: a directory others can write on the way to the
    managed venv is UNSAFE_PATH, named; the same directory made root's only is not.
    (Settings are built directly: their check refuses paths under /tmp before any probe.)"""
    from bringup.config import Config
    from bringup.plan import plan

    shared = tmp_path / "shared"
    (shared / "sglang").mkdir(parents=True)
    shared.chmod(0o1777)
    venv = shared / "sglang" / "venv"
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(venv))
    chain = {entry["path"]: entry["mode"] for entry in facts["paths"]["venv"]}
    assert chain[str(shared)] == "1777", facts["paths"]
    config = Config(venv_path=str(venv))
    owner = shared.owner()
    unsafe = [f.message for f in plan(facts, config).findings
              if f.code == "UNSAFE_PATH" and f.message.endswith("where root builds the managed venv")]
    assert unsafe and unsafe[0].startswith(f"{shared} (directory, owner {owner}, mode 1777)"), unsafe
    shared.chmod(0o755)
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(venv))
    unsafe = [f.message for f in plan(facts, config).findings
              if f.code == "UNSAFE_PATH" and f.message.endswith("where root builds the managed venv")]
    # Owned by a non-root user, it stays unsafe: that user could still change it.
    named = [message for message in unsafe if message.startswith(f"{shared} ")]
    assert bool(named) == (os.geteuid() != 0), unsafe


def test_toolchain_digest_ignores_the_drivers_libcuda1(tmp_path):
    """The driver's user-space library (libcuda1: no header, no compiler) moving, as an
    `apt-get upgrade` from NVIDIA's repository moves it, is no toolchain change; a header
    package moving is."""
    (tmp_path / "bin").mkdir()
    packages = tmp_path / "packages"
    query = tmp_path / "bin" / "dpkg-query"
    query.write_text(f"#!/bin/sh\ncat {packages}\n")
    query.chmod(0o755)

    def digest(*lines):
        packages.write_text("".join(f"ii {line}\n" for line in lines))
        return run_probe(tmp_path, "b200-x8")["jit_cache"]["toolchain"]

    first = digest("libcuda1=535.216.03-1", "libcublas-dev-13-0=13.0.2.14-1")
    assert digest("libcuda1=580.105.08-1", "libcublas-dev-13-0=13.0.2.14-1") == first
    assert digest("libcuda1=535.216.03-1", "libcublas-dev-13-0=13.0.3.1-1") != first


def test_a_closed_venv_root_is_planned_unreachable_through_the_link(tmp_path, request):
    """The real probe's path chains of a venv link and of where it points (venv_target),
    planned: a 0700 venv root is SERVICE_PATH_UNREACHABLE (issue 32), a fix deploy makes
    (the layout's own directory, root's); opened, nothing is reported. Settings built
    directly: their check refuses paths under /tmp before any probe."""
    from bringup.config import Config
    from bringup.plan import plan

    # Under a directory others may pass (pytest's own tmp is 0700).
    scratch = Path(tempfile.mkdtemp(prefix="probe-reach-"))
    request.addfinalizer(lambda: shutil.rmtree(scratch))
    root = scratch / "sglang"
    (root / "venvs" / "abc").mkdir(parents=True)
    (root / "venv").symlink_to("venvs/abc")
    for directory in (scratch, root / "venvs", root / "venvs" / "abc"):
        directory.chmod(0o755)
    root.chmod(0o700)
    config = Config(venv_path=str(root / "venv"))
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(root / "venv"))
    assert facts["paths"]["venv_target"][0]["path"] == str(root / "venvs" / "abc"), facts["paths"]
    # The cache directory's chain is pytest's tmp (run_probe's layout): only the venv's counts.
    found = [(f.severity, f.message) for f in plan(facts, config).findings
             if f.code == "SERVICE_PATH_UNREACHABLE" and "the venv" in f.message]
    if root.owner() == "root":
        message = (f"{root} (directory, owner root, mode 700) keeps the service user sglang out of {root}/venv, "
                   "the venv the unit and the pre-warm run")
        assert found == [("fix", message)], found
    root.chmod(0o755)
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(root / "venv"))
    assert not [f for f in plan(facts, config).findings
                if f.code == "SERVICE_PATH_UNREACHABLE" and "the venv" in f.message]


def test_an_interpreter_under_a_closed_prefix_is_planned_unreachable(tmp_path, request):
    """The real probe's chain of the interpreter the venv will be built with (the
    operator's venv_python, no venv yet) and of the one a venv runs (its bin/python
    followed), planned: a prefix closed to others keeps the service user out of its
    python, never deploy's directory, a blocker (review of issue 32: validate saw the
    venv's own directories only, and the pre-warm met Permission denied)."""
    from bringup.config import Config
    from bringup.plan import plan

    scratch = Path(tempfile.mkdtemp(prefix="probe-python-"))
    request.addfinalizer(lambda: shutil.rmtree(scratch))
    prefix = scratch / "cpython"
    (prefix / "bin").mkdir(parents=True)
    python = prefix / "bin" / "python3.11"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    venv = scratch / "sglang" / "venv"
    for directory in (scratch, prefix / "bin", scratch / "sglang"):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)
    prefix.chmod(0o700)
    config = Config(venv_path=str(venv))

    def found(inputs):
        result = subprocess.run(["sh", "-c", probe_command(inputs)], env={"PATH": "/usr/bin:/bin"},
                                capture_output=True, text=True, timeout=60, check=True)
        facts = build_document(result.stdout.splitlines())
        assert facts["paths"]["python"][0]["path"] == str(python), facts["paths"]
        return [(f.severity, f.message) for f in plan(facts, config).findings
                if f.code == "SERVICE_PATH_UNREACHABLE" and "the interpreter the venv" in f.message]

    layout = NodeLayout.for_settings(str(venv), "/nonexistent", str(tmp_path / "cache"), "sglang")
    message = (f"{prefix} (directory, owner {prefix.owner()}, mode 700) keeps the service user sglang out of "
               f"{python}, the interpreter the venv {venv} runs")
    assert found(ProbeInputs(layout, venv_python=str(python))) == [("blocker", message)]
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(python)
    assert found(ProbeInputs(layout)) == [("blocker", message)]
    prefix.chmod(0o755)
    assert found(ProbeInputs(layout)) == []
