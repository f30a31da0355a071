"""bench/gpu_proof.py's decisions and its table/JSON, without a GPU: the rows as the
table and the saved document show them, the exit status of each mix of results, the
"no GPU" decision, and the driver-layer, plan and agreement verdicts on recorded facts
(tests/fixtures/facts/driver_layer/healthy-b200-hgx.json, the real planner)."""

import copy
import doctest
import importlib.util
import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.plan import plan

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("gpu_proof", ROOT / "bench" / "gpu_proof.py")
gpu_proof = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gpu_proof)

HGX = json.loads((ROOT / "tests" / "fixtures" / "facts" / "driver_layer" / "healthy-b200-hgx.json").read_text())


def b200_node():
    """The recorded HGX B200 facts as the proof reads them on a GPU machine: the module's
    version the driver's, its GPUs on the PCI bus (B200 is 10de:2901), torch cu130."""
    facts = copy.deepcopy(HGX)
    facts["driver"]["version"] = facts["driver_layer"]["module"]["version"]
    facts["pci_gpus"] = [{"bus_id": gpu["bus_id"], "vendor": "10de", "device": "2901", "class": "0302"}
                         for gpu in facts["driver_layer"]["gpus"]]
    facts["torch"] = {"version": "2.11.0", "cuda": "13.0", "arch_list": ["sm_90", "sm_100", "sm_120"],
                      "arch_list_from": "import"}
    return facts


def test_doctests():
    assert doctest.testmod(gpu_proof).failed == 0


def test_table_and_saved_document(tmp_path):
    rows = [gpu_proof.Step("probe", gpu_proof.PASS, 0.456, "1 GPU(s); facts.json fits").as_dict(),
            gpu_proof.Step("driver layer", gpu_proof.FAIL, 1.04, "module a|b").as_dict()]
    table = gpu_proof.render_table(rows).splitlines()
    assert table == ["| step | result | seconds | evidence |", "| --- | --- | --- | --- |",
                     "| probe | pass | 0.5 | 1 GPU(s); facts.json fits |",
                     "| driver layer | FAIL | 1.0 | module a/b |"]
    path = tmp_path / "gpu-proof.json"
    gpu_proof.write_whole(path, json.dumps(gpu_proof.proof_document(rows, "h200", "/opt/torch/.venv/bin/python")))
    saved = json.loads(path.read_text())
    assert saved == {"host": "h200", "python": "/opt/torch/.venv/bin/python", "exit": 1,
                     "steps": [{"step": "probe", "result": "pass", "seconds": 0.46,
                                "evidence": "1 GPU(s); facts.json fits"},
                               {"step": "driver layer", "result": "FAIL", "seconds": 1.04, "evidence": "module a|b"}]}
    assert path.stat().st_mode & 0o777 == 0o644 and [p.name for p in tmp_path.iterdir()] == ["gpu-proof.json"]


@pytest.mark.parametrize("results,status", [
    (["pass", "pass"], 0),
    (["pass", "NO GPU"], 3),
    (["missing", "missing", "NO GPU"], 3),
    (["pass", "missing", "pass"], 4),
    (["pass", "FAIL", "missing"], 1),
    (["FAIL", "NO GPU"], 1),
    (["pass", "ONE GPU", "ONE GPU"], 5),  # one GPU: nothing failed, nothing between GPUs proven
    (["pass", "missing", "ONE GPU"], 5),
    (["NO GPU", "ONE GPU"], 3),
    (["FAIL", "ONE GPU"], 1),
])
def test_exit_status(results, status):
    assert gpu_proof.exit_status([{"result": result} for result in results]) == status


@pytest.mark.parametrize("facts,devices,no_gpu", [
    ({"gpus": [], "pci_gpus": [], "nvidia_smi": {"present": False, "error": "nvidia-smi not found"}}, [], True),
    ({"gpus": [], "pci_gpus": None, "nvidia_smi": {"present": True, "error": None}}, [], True),
    # The bus or a device node shows a GPU nvidia-smi does not list: a broken driver.
    ({"gpus": [], "pci_gpus": [{"vendor": "10de", "device": "2335"}], "nvidia_smi": {}}, [], False),
    ({"gpus": [], "pci_gpus": [], "nvidia_smi": {}}, ["/dev/nvidia0"], False),
    ({"gpus": [{"index": 0}], "pci_gpus": [], "nvidia_smi": {}}, [], False),
])
def test_no_gpu_reason(facts, devices, no_gpu):
    assert bool(gpu_proof.no_gpu_reason(facts, devices)) is no_gpu


def test_driver_layer_of_a_healthy_node_is_whole():
    facts = b200_node()
    assert gpu_proof.driver_layer_problems(facts) == []
    assert "module 580.95.05 open" in gpu_proof.driver_layer_evidence(facts)


@pytest.mark.parametrize("change,problem", [
    (lambda f: f["driver"].update(version="580.82.07"), "module 580.95.05 (loaded: True) against driver 580.82.07"),
    (lambda f: f["driver_layer"]["module"].update(flavour=None), "no module flavour"),
    (lambda f: f["driver_layer"]["gpus"][3].update(mig_mode=None), "GPU 3: nvidia-smi -q gave no mig_mode"),
    (lambda f: f["driver_layer"].update(topology=None), "no topology"),
    (lambda f: f["pci_gpus"][0].update(device="ffff"), "PCI ids not in the GPU table bringup/gpu_archs.py: 10de:ffff"),
    (lambda f: f["pci_gpus"].pop(), "7 NVIDIA GPU(s) on the bus, nvidia-smi lists 8"),
    (lambda f: f["driver_layer"]["gpus"][1].update(fabric_state="In Progress"), "fabric not up: GPU 1 In Progress"),
    (lambda f: f.update(pci_gpus=None), "the PCI bus could not be read"),
])
def test_driver_layer_problems(change, problem):
    facts = b200_node()
    change(facts)
    assert problem in "; ".join(gpu_proof.driver_layer_problems(facts))


def test_plan_of_the_real_planner_is_right_and_a_wrong_one_is_not():
    facts = b200_node()
    node = plan(facts, Config(venv_path="/opt/torch/.venv", venv_managed=False)).as_dict()
    assert node["arch_list"] == "10.0a" and gpu_proof.plan_problems(node, facts) == []
    assert gpu_proof.plan_problems({**node, "arch_list": "10.0f"}, facts) == [
        "arch_list '10.0f', FlashInfer's target is '10.0a'"]
    facts["torch"]["cuda"] = "12.9"
    assert gpu_proof.plan_problems(node, facts)[0] == "torch_cuda 13.0, the venv's torch is built for 12.9"
    old = dict(node, findings=[{"code": "DRIVER_TOO_OLD", "severity": "blocker"}])
    assert "findings DRIVER_TOO_OLD" in gpu_proof.plan_problems(old, b200_node())


@pytest.mark.parametrize("torch_cuda,nvcc,driver,problems", [
    ("13.0", "13.0", {"version": "580.95.05", "cuda_version": "13.0"}, []),
    ("13.0", "13.0", {"version": "590.44.01", "cuda_version": "13.1"}, []),
    ("13.0", None, {"version": "580.95.05", "cuda_version": "13.0"},
     ["torch CUDA 13.0, nvcc None"]),
    ("13.0", "13.0", {"version": "580.95.05", "cuda_version": None},
     ["driver's CUDA None < torch's 13.0", "driver's CUDA None < nvcc's 13.0"]),
    ("13.0", "13.1", {"version": "580.95.05", "cuda_version": "13.0"},
     ["torch CUDA 13.0, nvcc 13.1", "driver's CUDA 13.0 < nvcc's 13.1"]),
])
def test_agreement_problems(torch_cuda, nvcc, driver, problems):
    assert gpu_proof.agreement_problems(torch_cuda, nvcc, driver) == problems


def test_root_runs_no_program_another_user_can_change(tmp_path):
    program = tmp_path / "python"
    program.write_text("")
    program.chmod(0o755)
    root = os.geteuid() == 0
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert gpu_proof.foreign_owner(program) == (None if root else me)
    program.chmod(0o757)
    assert gpu_proof.foreign_owner(program) == ("others" if root else me)
    assert gpu_proof.run_as(program) == (["runuser", "-u", "nobody", "--"] if root else [])


@pytest.mark.skipif(os.geteuid() != 0, reason="what root runs: only root drops to another user")
def test_root_runs_no_venv_another_user_can_change(tmp_path):
    # A venv's bin/python links to root's interpreter; what it loads (pyvenv.cfg,
    # site-packages, a .pth) is the venv's: root must not run it when another user owns
    # or may write any of it.
    venv = tmp_path / "venv"
    packages = venv / "lib" / "python3" / "site-packages"
    packages.mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    hook = packages / "zz.pth"
    hook.write_text("import os\n")
    tmp_path.chmod(0o755)
    python = venv / "bin" / "python"
    assert gpu_proof.run_as(python, venv) == []
    os.chown(hook, 65534, 65534)
    assert gpu_proof.run_as(python, venv) == ["runuser", "-u", pwd.getpwuid(65534).pw_name, "--"]
    os.chown(hook, 0, 0)
    hook.chmod(0o664)
    assert gpu_proof.run_as(python, venv) == ["runuser", "-u", "nobody", "--"]
    hook.chmod(0o644)
    os.lchown(python, 65534, 65534)
    assert gpu_proof.run_as(python, venv) == ["runuser", "-u", pwd.getpwuid(65534).pw_name, "--"]


def recorded_machine(monkeypatch, kernel_sm="10.0"):
    """The programs past the gate answer as on an HGX B200 machine (torch's CUDA script,
    nvcc, the built kernel): recorded answers in place of gpu_proof.run; the planner
    (sys.executable -m bringup.plan) runs for real."""
    real_run = gpu_proof.run

    def answer(command, timeout, **kwargs):
        if command[0] == sys.executable:
            return real_run(command, timeout, **kwargs)
        if "-c" in command and command[command.index("-c") + 1] == gpu_proof.CUDA_SCRIPT:
            kernels = {str(index): 2.0 for index in range(8)}
            return subprocess.CompletedProcess(command, 0, "@@cuda " + json.dumps({"count": 8, "kernels": kernels}), "")
        if command[-1] == "--version":
            return subprocess.CompletedProcess(command, 0, "Cuda compilation tools, release 13.0, V13.0.88\n", "")
        if "-o" in command:
            assert command[-4:-3] == ["-gencode=arch=compute_100,code=sm_100"], command
            return subprocess.CompletedProcess(command, 0, "", "")
        lines = "".join(f"@@nvcc device={index} sm={kernel_sm} error=cudaSuccess wrong=0\n" for index in range(8))
        return subprocess.CompletedProcess(command, 0, lines, "")

    monkeypatch.setattr(gpu_proof, "run", answer)


def test_the_steps_past_the_gate_pass_on_a_machine_that_answers_rightly(monkeypatch, tmp_path):
    recorded_machine(monkeypatch)
    proof = gpu_proof.Proof(Path("/opt/torch/.venv"), tmp_path, [])
    proof.facts = b200_node()
    (tmp_path / "facts.json").write_text(json.dumps(proof.facts))
    for name, step in (("driver layer", proof.driver_layer), ("plan", proof.plan_step), ("cuda", proof.cuda),
                       ("nvcc", proof.nvcc), ("agreement", proof.agreement)):
        assert proof.step(name, step) == gpu_proof.PASS, proof.rows[-1]
    evidence = {row["step"]: row["evidence"] for row in proof.rows}
    assert evidence["plan"].startswith("arch_list 10.0a, torch_cuda 13.0, toolkit /usr/local/cuda-13.0")
    assert evidence["nvcc"].startswith("nvcc 13.0 (/usr/local/cuda-13.0/bin/nvcc) -gencode=arch=compute_100")
    assert evidence["agreement"] == ("torch CUDA 13.0, nvcc 13.0, driver 580.95.05 (CUDA 13.0; floor for CUDA "
                                     "13.0: 580.65.6)")
    assert json.loads((tmp_path / "plan.json").read_text())["arch_list"] == "10.0a"


def test_a_kernel_that_ran_on_another_sm_fails(monkeypatch, tmp_path):
    recorded_machine(monkeypatch, kernel_sm="9.0")
    proof = gpu_proof.Proof(Path("/opt/torch/.venv"), tmp_path, [])
    proof.facts = b200_node()
    assert proof.step("nvcc", proof.nvcc) == gpu_proof.FAIL
    assert proof.rows[-1]["evidence"].startswith("the kernel: @@nvcc device=0 sm=9.0 error=cudaSuccess wrong=0")


def torch_venv(tmp_path, gpus, **fake):
    """A venv whose python imports the stand-in torch (tests/fixtures/fake_torch) that
    sees ``gpus`` GPUs: the real communication script runs, as the proof runs it."""
    venv = tmp_path / "torch-venv"
    (venv / "bin").mkdir(parents=True)
    settings = " ".join(f"FAKE_TORCH_{key.upper()}={value}" for key, value in fake.items())
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT / 'tests' / 'fixtures' / 'fake_torch'} FAKE_TORCH_GPUS={gpus} "
                      f"{settings} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return venv


def one_gpu_node():
    facts = b200_node()
    facts["gpus"] = facts["gpus"][:1]
    facts["driver_layer"]["topology"] = []
    return facts


@pytest.mark.parametrize("gpus, facts, results", [
    (8, b200_node, ["pass", "pass"]),  # NV18 everywhere: P2P both ways, copies right; the all-reduce reduces
    (1, one_gpu_node, ["ONE GPU", "ONE GPU"]),  # not a pass: nothing between GPUs proven
    (0, b200_node, ["FAIL", "FAIL"]),  # CUDA does not start
    (7, b200_node, ["FAIL", "FAIL"]),  # torch sees 7 of the 8 nvidia-smi lists
])
def test_the_gpu_to_gpu_steps_run_the_node_suites_script(tmp_path, gpus, facts, results):
    proof = gpu_proof.Proof(torch_venv(tmp_path, gpus), tmp_path, [])
    proof.facts = facts()
    if gpus == 8:
        # The stand-in's all-reduce goes through files: its busbw is no NVLink's, the floor not judged here.
        proof.facts["driver_layer"]["topology"] = [dict(pair, link="SYS") if pair["a"] else pair
                                                   for pair in proof.facts["driver_layer"]["topology"]]
    assert [proof.step("p2p", proof.p2p), proof.step("all-reduce", proof.all_reduce)] == results, proof.rows
    evidence = {row["step"]: row["evidence"] for row in proof.rows}
    if gpus == 8:
        assert evidence["p2p"].startswith("0-1 NV18: P2P both ways, copies right"), evidence
        assert evidence["all-reduce"].startswith("busbw ") and "8 ranks, 256 MiB, 20 iterations, NCCL 2.27.3)" in evidence[
            "all-reduce"], evidence
    if gpus == 1:
        assert evidence == {"p2p": "one GPU: no pair to check", "all-reduce": "all_reduce with world size 1 "
                            "initialised NCCL and reduced right; one GPU: busbw is 0 by definition (2(n-1)/n), no "
                            "floor applies"}
        assert gpu_proof.exit_status(proof.rows) == gpu_proof.EXIT_ONE_GPU
    if gpus == 0:
        assert evidence["p2p"].startswith("CUDA does not start: RuntimeError: Found no NVIDIA driver"), evidence


def test_a_peer_copy_that_corrupts_fails_the_p2p_step(tmp_path):
    proof = gpu_proof.Proof(torch_venv(tmp_path, 8, corrupt="3,5"), tmp_path, [])
    proof.facts = b200_node()
    assert proof.step("p2p", proof.p2p) == gpu_proof.FAIL
    assert proof.rows[-1]["evidence"] == "3->5 NV18: peer copy has 16777216 wrong value(s)"


def test_the_gpu_to_gpu_steps_keep_to_the_proofs_five_minutes(tmp_path, monkeypatch):
    proof = gpu_proof.Proof(torch_venv(tmp_path, 8), tmp_path, [])
    proof.facts = b200_node()
    proof.started -= gpu_proof.PROOF_SECONDS - 20  # 20 s left: too little for a start and a bound
    assert proof.step("all-reduce", proof.all_reduce) == gpu_proof.FAIL
    assert proof.rows[-1]["evidence"] == "not run: 300 s of the proof spent before it (its bound: 150 s)"
    bounds = []
    monkeypatch.setattr(gpu_proof, "run", lambda command, timeout, **kwargs: bounds.append(timeout) or
                        subprocess.CompletedProcess(command, 0, '@@comm {"error": "RuntimeError: x"}', ""))
    proof.started = gpu_proof.time.monotonic() - (gpu_proof.PROOF_SECONDS - 130)  # 130 s left
    proof.step("all-reduce", proof.all_reduce)
    assert 95 <= bounds[-1] <= 130, bounds  # what is left, not the step's own 150 + 30


def test_the_health_step_reads_every_gpu_and_names_the_machine_s_findings_as_evidence(tmp_path):
    from tests.unit.test_gpu_health import healthy_gpu
    proof = gpu_proof.Proof(Path("/opt/torch/.venv"), tmp_path, [])
    proof.facts = b200_node()
    listed = len(proof.facts["gpus"])
    rows = [{**healthy_gpu(index), "index": gpu["index"]} for index, gpu in enumerate(proof.facts["gpus"])]
    proof.facts["gpu_health"] = {"query_error": None, "gpus": rows,
                                 "kernel_log": {"source": "journal", "read_error": None, "xid": []}}
    proof.plan = {"findings": [{"code": "GPU_SLOWDOWN", "severity": "warning"}, {"code": "NO_MODEL", "severity": "info"}]}
    assert proof.step("health", proof.health) == gpu_proof.PASS, proof.rows[-1]
    evidence = proof.rows[-1]["evidence"]
    assert evidence.count("x16/x16") == listed and evidence.endswith("health findings: GPU_SLOWDOWN(warning)"), evidence
    # A driver that does not know a field's name answers none for it: the reader is not proven.
    proof.facts["gpu_health"]["gpus"][0]["temperature_c"] = None
    assert proof.step("health", proof.health) == gpu_proof.FAIL
    assert proof.rows[-1]["evidence"] == f"GPU {rows[0]['index']}: no temperature_c"


@pytest.mark.parametrize("sample, result, said", [
    ("diag-r1-pass.json", gpu_proof.PASS, "findings: none"),
    ("diag-r2-fail.json", gpu_proof.PASS, "GPU_DIAG_FAILED(blocker)"),  # read: the machine's failure is evidence
    ("diag-dcgm3.json", gpu_proof.FAIL, "dcgmi's answer not read: "),
    (None, gpu_proof.NOT_RUN, "DCGM's dcgmi is not installed here"),
])
def test_the_dcgm_step_reads_the_probe_s_own_diag_section(monkeypatch, tmp_path, sample, result, said):
    """The probe's real gpu_diag section run here with a dcgmi stand-in answering the public
    samples (tests/unit/test_gpu_diag.py's run), its output handed to the step as the
    probe's: what the step judges is what validate's section reads."""
    from tests.unit.test_gpu_diag import idle_node, run_diag_probe

    fixtures = ROOT / "tests" / "fixtures" / "dcgm"
    idle_node(tmp_path / "bin", (fixtures / sample).read_text() if sample else None, diag_rc=0)
    raw, _ = run_diag_probe(tmp_path)
    asked = []

    def probe_run(command, timeout, **kwargs):
        asked.append(command[-1])
        return subprocess.CompletedProcess(command, 0, raw, "")

    monkeypatch.setattr(gpu_proof, "run", probe_run)
    proof = gpu_proof.Proof(Path("/opt/torch/.venv"), tmp_path, [])
    assert proof.step("dcgm diag", proof.dcgm_diag) == result, proof.rows[-1]
    assert said in proof.rows[-1]["evidence"], proof.rows[-1]
    assert "PROBE_GPU_DIAG=1" in asked[0]


def test_a_program_past_its_bound_leaves_no_process_behind(tmp_path):
    # What runuser or the communication script started (the ranks) is killed with it: a
    # hung all-reduce must not keep GPUs busy after the proof gave up on it.
    pid_file = tmp_path / "grandchild"
    script = ("import subprocess, sys, time; child = subprocess.Popen(['sleep', '300']); "
              f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(300)")
    started = time.monotonic()
    result = gpu_proof.run(["sh", "-c", f"{sys.executable} -c \"{script}\"; sleep 300"], 2)
    assert result.returncode == 124 and time.monotonic() - started < 30
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        state = Path(f"/proc/{grandchild}/stat").read_text().split(") ")[-1][0] if Path(
            f"/proc/{grandchild}").exists() else "X"
        if state == "Z":
            break
        time.sleep(0.1)
    else:
        os.kill(grandchild, 9)
        raise AssertionError(f"pid {grandchild} (sleep 300) still runs after the bound")


def test_the_python_steps_import_nothing_from_the_working_directory(tmp_path, monkeypatch):
    # "python -c" puts the working directory first on sys.path: run as root from a
    # directory another user can write (/tmp, their home), a tempfile.py there would be
    # root's import before the stdlib's.
    here = tmp_path / "cwd"
    here.mkdir()
    marker = tmp_path / "imported"
    (here / "tempfile.py").write_text(f"open({str(marker)!r}, 'w').close()\nfrom tempfile import *\n")
    (here / "torch.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(here)
    proof = gpu_proof.Proof(torch_venv(tmp_path, 2), tmp_path, [])
    proof.facts = b200_node()
    proof.facts["gpus"] = proof.facts["gpus"][:2]
    proof.facts["driver_layer"]["topology"] = [{"a": 0, "b": 1, "link": "SYS"}]
    assert proof.step("p2p", proof.p2p) == "pass", proof.rows
    proof.step("cuda", proof.cuda)
    assert not marker.exists()
