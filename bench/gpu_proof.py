"""Prove on a real NVIDIA GPU machine what only a GPU can: the probe's driver-layer facts,
the plan for the GPUs, CUDA starting on each, the machine's nvcc building and running a
kernel, the toolkit, torch and driver agreeing (issues 22 and 26), and the GPUs talking
to each other (issue 37): "p2p", CUDA's peer access against the probe's topology with a
checked peer copy per pair CUDA allows, and "all-reduce", an NCCL all-reduce over every
GPU, checked, its bus bandwidth (nccl-tests' busbw) against the topology's floor. Both
run the node suite's own script and verdicts (tests/node/comm.py), each killed at its
bound, and both come last, bounded by what is left of the proof's five minutes.

    make gpu-proof PYTHON=/opt/torch/.venv/bin/python [TORCH_VENV=DIR] [OUT=DIR]
    python bench/gpu_proof.py [--torch-venv DIR] [--out DIR]

Needs no pyinfra, no testinfra and no network: the orchestrator is this file plus the
repository (the probe is sh; the planner needs packaging and PyYAML, requirements.txt).
When the running python lacks those and ``python3`` on PATH has them, it runs itself
again with that one; torch is only ever run as the torch venv's own python
(``--torch-venv``, default: the running python's venv). Prints one table (step,
result, seconds, evidence) and writes it as JSON to ``--out``, else ``$OUT``, else
bench/out/ (gpu-proof.json and gpu-proof.md, with facts.json, the settings and plan.json
beside them: five files; and gpu-diag.json, the diagnostic's fact, where DCGM is installed).

The steps: requirements, probe, driver layer, plan, health (the probe's GPU health facts
read on every GPU: bench/gpu_proof_health.py), cuda, nvcc, agreement, p2p, all-reduce,
dcgm diag (``dcgmi diag -r 1`` through the probe's gpu_diag section where DCGM is
installed, else "not run").

Exit status:
  0  every step passed
  1  a step failed (its row says why)
  3  no GPU here: every step before the first that needs one passed, and the last line
     says so (not a pass: nothing of the GPU was proven)
  4  nothing failed, but packaging or PyYAML is missing, so the steps needing them
     did not run
  5  one GPU here: nothing failed, NCCL initialised and reduced with world size 1, but
     there is no pair for P2P and no bus bandwidth to measure, so "p2p" and
     "all-reduce" say ONE GPU (not a pass: the GPUs talking to each other is unproven)
"""

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# These need the standard library only; what needs packaging is imported where used.
from bringup.layout import NodeLayout, ProbeInputs, toolkit_home  # noqa: E402
from facts.probe_output import build_document, parse_nvcc_release  # noqa: E402
from facts.probe_script import probe_command  # noqa: E402
from tests.node.comm import (  # noqa: E402
    ALL_REDUCE_SECONDS, P2P_SECONDS, all_reduce_verdict, comm_script, p2p_verdict, parse_comm_output,
)
from tests.node.cuda import CUDA_SCRIPT, cuda_verdict, fabric_verdict, parse_cuda_output  # noqa: E402
from bench.gpu_proof_health import diag_evidence, diag_problems, health_evidence, health_problems  # noqa: E402

PASS, FAIL, NO_GPU, ONE_GPU, MISSING, NOT_RUN = "pass", "FAIL", "NO GPU", "ONE GPU", "missing", "not run"
EXIT_FAIL, EXIT_NO_GPU, EXIT_MISSING, EXIT_ONE_GPU = 1, 3, 4, 5
# The whole proof's bound (a GPU machine may be lent for minutes); the GPU-to-GPU steps,
# last, get what is left of it, at most their own bounds (tests/node/comm.py).
PROOF_SECONDS = 300
# NVIDIA's level-1 diagnostic, the probe around it included (after the five minutes above:
# files/probe.d/gpu_diag.sh stops dcgmi at 300 s; NVIDIA gives level 1 seconds to a minute).
DIAG_SECONDS = 330
# What one run of the communication script needs beyond its parts' bounds: python,
# torch's import and CUDA's start in the parent.
COMM_START_SECONDS = 30
# The planner's imports beyond the standard library (requirements.txt).
REQUIREMENTS = ("packaging", "yaml")
REEXEC_MARK = "GPU_PROOF_REEXEC"
# A vector add whose sum is checked on the host, per device; the SM it ran on is read
# back so a binary built for another SM cannot pass.
KERNEL = r"""
#include <cstdio>
#include <cuda_runtime.h>
__global__ void add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
int main() {
    const int n = 1 << 20;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { printf("@@nvcc none\n"); return 1; }
    float *ha = new float[n], *hb = new float[n], *hc = new float[n];
    for (int i = 0; i < n; i++) { ha[i] = i; hb[i] = 2.0f * i; }
    for (int d = 0; d < count; d++) {
        cudaSetDevice(d);
        cudaDeviceProp prop; cudaGetDeviceProperties(&prop, d);
        float *a, *b, *c;
        cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float)); cudaMalloc(&c, n * sizeof(float));
        cudaMemcpy(a, ha, n * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemcpy(b, hb, n * sizeof(float), cudaMemcpyHostToDevice);
        add<<<(n + 255) / 256, 256>>>(a, b, c, n);
        cudaError_t err = cudaDeviceSynchronize();
        cudaMemcpy(hc, c, n * sizeof(float), cudaMemcpyDeviceToHost);
        int wrong = 0;
        for (int i = 0; i < n; i++) if (hc[i] != 3.0f * i) wrong++;
        printf("@@nvcc device=%d sm=%d.%d error=%s wrong=%d\n", d, prop.major, prop.minor,
               cudaGetErrorName(err), wrong);
        cudaFree(a); cudaFree(b); cudaFree(c);
    }
    return 0;
}
"""


class Step:
    """One row of the table: the step's name, its result, its seconds, its evidence."""

    def __init__(self, name, result=NOT_RUN, seconds=0.0, evidence=""):
        self.name, self.result, self.seconds, self.evidence = name, result, seconds, evidence

    def as_dict(self):
        return {"step": self.name, "result": self.result, "seconds": round(self.seconds, 2),
                "evidence": self.evidence}


def render_table(rows):
    """The rows (``Step.as_dict()``) as one Markdown table, the evidence last.

    >>> print(render_table([{"step": "probe", "result": "pass", "seconds": 0.41, "evidence": "schema ok"}]))
    | step | result | seconds | evidence |
    | --- | --- | --- | --- |
    | probe | pass | 0.4 | schema ok |
    """
    lines = ["| step | result | seconds | evidence |", "| --- | --- | --- | --- |"]
    lines += [f"| {row['step']} | {row['result']} | {row['seconds']:.1f} | {row['evidence'].replace('|', '/')} |"
              for row in rows]
    return "\n".join(lines)


def exit_status(rows):
    """The script's exit status from its rows (see the module's docstring).

    >>> exit_status([{"result": "pass"}, {"result": "NO GPU"}])
    3
    >>> exit_status([{"result": "missing"}, {"result": "FAIL"}]), exit_status([{"result": "pass"}])
    (1, 0)
    >>> exit_status([{"result": "pass"}, {"result": "ONE GPU"}])
    5
    """
    results = {row["result"] for row in rows}
    if FAIL in results:
        return EXIT_FAIL
    if NO_GPU in results:
        return EXIT_NO_GPU
    if ONE_GPU in results:
        return EXIT_ONE_GPU
    return EXIT_MISSING if MISSING in results else 0


def comm_result(step, listed, answer, topology):
    """The "p2p" or "all-reduce" row's (result, evidence) from the communication script's
    ``answer`` on a machine whose nvidia-smi lists ``listed`` GPUs, by the node suite's
    verdicts: FAIL with what is wrong; ONE GPU where only one GPU was there to prove (what
    was measured said, never a pass); else pass with what was measured.

    >>> comm_result("p2p", 1, {"count": 1, "p2p": {"access": {}, "copies": {}, "errors": []}}, [])
    ('ONE GPU', 'one GPU: no pair to check')
    >>> comm_result("all-reduce", 2, {"error": "RuntimeError: no driver"}, None)
    ('FAIL', 'CUDA does not start: RuntimeError: no driver')
    """
    verdict = p2p_verdict if step == "p2p" else all_reduce_verdict
    wrong, measured = verdict(listed, answer, topology)
    if wrong:
        return FAIL, wrong
    return (ONE_GPU if listed == 1 else PASS), measured


def proof_document(rows, host, python):
    """What is saved as gpu-proof.json: the rows, the exit status, where it ran.

    >>> proof_document([{"step": "probe", "result": "pass", "seconds": 1.0, "evidence": ""}], "h1", "/p")["exit"]
    0
    """
    return {"host": host, "python": python, "exit": exit_status(rows), "steps": rows}


def write_whole(path, text):
    """Write ``text`` to ``path`` whole (a temporary file beside it, then a rename), 0644."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def no_gpu_reason(facts, device_nodes):
    """Why this machine has no GPU at all, or "" when it has one: nvidia-smi lists none,
    the PCI bus shows no NVIDIA GPU and there is no /dev/nvidiaN. A GPU on the bus that
    nvidia-smi does not list is a machine with a GPU and a broken driver (a failure of
    the next step), never "no GPU".

    >>> no_gpu_reason({"gpus": [], "pci_gpus": [], "nvidia_smi": {"present": False, "error": "nvidia-smi not found"}}, [])
    'nvidia-smi not found; no NVIDIA GPU on the PCI bus; no /dev/nvidia[0-9]*'
    >>> no_gpu_reason({"gpus": [], "pci_gpus": [{"vendor": "10de", "device": "2335"}], "nvidia_smi": {}}, [])
    ''
    """
    if facts.get("gpus") or device_nodes:
        return ""
    if any(gpu.get("vendor") == "10de" for gpu in facts.get("pci_gpus") or []):
        return ""
    smi = facts.get("nvidia_smi") or {}
    return f"{smi.get('error') or 'nvidia-smi lists no GPU'}; no NVIDIA GPU on the PCI bus; no /dev/nvidia[0-9]*"


def driver_layer_problems(facts):
    """What the probe's driver-layer and PCI facts lack on a GPU machine ([] when they
    are whole): the loaded module's version (the driver's) and flavour, per GPU the
    ``nvidia-smi -q`` fields, the topology, every GPU on the bus known to
    bringup/gpu_ids.py with nvidia-smi's compute capability, the fabric up on an
    NVSwitch node (the node suite's own verdict)."""
    from bringup import gpu_ids

    problems = []
    layer, driver, gpus = facts.get("driver_layer"), facts.get("driver") or {}, facts.get("gpus") or []
    if not gpus:
        problems.append(f"nvidia-smi lists no GPU ({(facts.get('nvidia_smi') or {}).get('error')})")
    if not layer:
        return problems + ["no driver_layer fact"]
    module = layer["module"]
    if not module.get("loaded") or module.get("version") != driver.get("version"):
        # A container's kernel (gVisor's 4.4.0) or a VM's may show no module at all.
        problems.append(f"module {module.get('version')} (loaded: {module.get('loaded')}) against driver "
                        f"{driver.get('version')}, kernel {(layer.get('kernel') or {}).get('release')}")
    if not module.get("flavour"):
        problems.append("no module flavour in /proc/driver/nvidia/version")
    by_index = {gpu["index"]: gpu for gpu in layer.get("gpus") or []}
    for gpu in gpus:
        queried = by_index.get(gpu["index"]) or {}
        absent = [field for field in ("bus_id", "persistence_mode", "mig_mode") if not queried.get(field)]
        if absent:
            problems.append(f"GPU {gpu['index']}: nvidia-smi -q gave no {', '.join(absent)}")
    if layer.get("topology") is None:
        problems.append("no topology (nvidia-smi topo -m)")
    fabric = fabric_verdict(layer)
    if fabric:
        problems.append(f"fabric not up: {fabric}")
    if facts.get("pci_gpus") is None:
        return problems + ["the PCI bus could not be read (sysfs, the facts' pci_gpus is null): no GPU id checked"]
    on_bus = gpu_ids.bus_gpus(facts)
    unknown = [f"{gpu['vendor']}:{gpu['device']}" for gpu in on_bus if gpu_ids.gpu_model(gpu) is None]
    if unknown:
        problems.append(f"PCI ids not in the GPU table bringup/gpu_archs.py: {' '.join(unknown)}")
    if len(on_bus) != len(gpus):
        problems.append(f"{len(on_bus)} NVIDIA GPU(s) on the bus, nvidia-smi lists {len(gpus)}")
    bus_sms = {model.compute_cap for model in map(gpu_ids.gpu_model, on_bus) if model}
    if bus_sms and bus_sms != {gpu["compute_cap"] for gpu in gpus}:
        problems.append(f"PCI table's SMs {sorted(bus_sms)} against nvidia-smi's "
                        f"{sorted({gpu['compute_cap'] for gpu in gpus})}")
    return problems


def driver_layer_evidence(facts):
    """The facts the driver-layer step shows, in one line."""
    layer, module = facts.get("driver_layer") or {}, (facts.get("driver_layer") or {}).get("module") or {}
    queried = ", ".join(f"GPU {gpu['index']} persistence {gpu.get('persistence_mode')} MIG {gpu.get('mig_mode')} "
                        f"fabric {gpu.get('fabric_state')}" for gpu in layer.get("gpus") or [])
    bus = ", ".join(f"{gpu['bus_id']} {gpu['vendor']}:{gpu['device']}" for gpu in facts.get("pci_gpus") or [])
    return (f"module {module.get('version')} {module.get('flavour')}; {queried}; NVSwitches "
            f"{layer.get('nvswitch_count')}; topology {len(layer.get('topology') or [])} link(s); PCI {bus}")


def plan_problems(plan, facts):
    """What is wrong with the plan for this machine's GPUs ([] when right): each GPU's
    SM planned with FlashInfer's arch target (bringup/flashinfer.py, the configured
    release, torch's CUDA), torch's CUDA the venv's, no finding that a GPU cannot be
    built for or the driver is below a floor."""
    from bringup import flashinfer
    from bringup.config import Config
    from bringup.versions import major_minor, parse

    torch_cuda = major_minor((facts.get("torch") or {}).get("cuda"))
    problems = []
    if torch_cuda is None or plan.get("torch_cuda") != str(torch_cuda):
        problems.append(f"torch_cuda {plan.get('torch_cuda')}, the venv's torch is built for {torch_cuda}")
    if torch_cuda is not None:
        sms = sorted({parse(gpu["compute_cap"]) for gpu in facts.get("gpus") or []})
        expected = " ".join(flashinfer.normalize_arch(Config().flashinfer, torch_cuda, sm) for sm in sms)
        if plan.get("arch_list") != expected:
            problems.append(f"arch_list {plan.get('arch_list')!r}, FlashInfer's target is {expected!r}")
    wrong = [finding["code"] for finding in plan.get("findings") or []
             if finding["code"] in ("DRIVER_TOO_OLD", "SM_UNKNOWN", "SM_NEEDS_NEWER_CUDA", "TORCH_LACKS_SM",
                                    "DRIVER_NOT_LOADED", "NO_GPU")]
    if wrong:
        problems.append(f"findings {' '.join(wrong)}")
    return problems


def agreement_problems(torch_cuda, nvcc_release, driver):
    """Where torch's CUDA build, nvcc's release and the driver disagree ([] when they
    agree), by the project's own rules: torch and nvcc share X.Y
    (bringup/versions.py), the driver's CUDA (nvidia-smi) is at least both and the
    driver runs torch's CUDA (bringup/cuda.py).

    >>> agreement_problems("13.0", "13.0", {"version": "580.95.05", "cuda_version": "13.0"})
    []
    >>> agreement_problems("13.0", "12.8", {"version": "570.26", "cuda_version": "12.8"})
    ['torch CUDA 13.0, nvcc 12.8', "driver's CUDA 12.8 < torch's 13.0", 'driver 570.26 cannot run CUDA 13.0']
    """
    from bringup.cuda import driver_runs_cuda
    from bringup.versions import major_minor, parse, same_major_minor

    problems = []
    if not same_major_minor(torch_cuda, nvcc_release):
        problems.append(f"torch CUDA {torch_cuda}, nvcc {nvcc_release}")
    driver_cuda = parse((driver or {}).get("cuda_version"))
    for what, release in (("torch", torch_cuda), ("nvcc", nvcc_release)):
        if major_minor(release) is None:
            continue  # no release to compare: the line above names it
        if driver_cuda is None or driver_cuda < major_minor(release):
            problems.append(f"driver's CUDA {driver_cuda} < {what}'s {release}")
    if major_minor(torch_cuda) is None or not driver_runs_cuda((driver or {}).get("version"), major_minor(torch_cuda)):
        problems.append(f"driver {(driver or {}).get('version')} cannot run CUDA {torch_cuda}")
    return problems


def missing_requirements(python):
    """The planner's requirements ``python`` cannot import (requirements.txt names)."""
    names = {"packaging": "packaging", "yaml": "PyYAML"}
    found = subprocess.run([python, "-c", "import importlib.util as u, sys; "
                            f"print(' '.join(m for m in {REQUIREMENTS!r} if u.find_spec(m) is None))"],
                           capture_output=True, text=True, check=False)
    if found.returncode != 0:
        return list(names.values())
    return [names[module] for module in found.stdout.split()]


def foreign_owner(path):
    """Who besides root could change the program ``path`` (links resolved): the owner of
    the first of it and its directories that is not root's, "others" for one of root's
    that group or others may write (a sticky directory such as /tmp excepted), None when
    only root can, like files/probe.d/lib.sh's code_owner.

    >>> foreign_owner("/"), foreign_owner("/nonexistent/python")
    (None, None)
    """
    import pwd

    try:
        chain = [Path(path).resolve(strict=True)]
    except OSError:
        return None  # nothing there: running it fails with its own line
    chain += list(chain[0].parents)
    for entry in chain:
        status = entry.stat()
        if status.st_uid != 0:
            try:
                return pwd.getpwuid(status.st_uid).pw_name
            except KeyError:
                return str(status.st_uid)
        sticky_dir = entry.is_dir() and status.st_mode & 0o1000
        if status.st_mode & 0o022 and not sticky_dir:
            return "others"
    return None


def venv_owner(venv):
    """As ``foreign_owner`` for what ``venv``'s python loads, not only the interpreter
    its ``bin/python`` links to (root's /usr/bin/python3 in most venvs): the venv and
    the directories above it, then everything in it (pyvenv.cfg, site-packages, its
    ``.pth`` files, torch), unfollowed, and where each link in it leads.

    >>> venv_owner("/nonexistent")
    """
    import pwd

    owner = foreign_owner(Path(venv) / "bin" / "python") or foreign_owner(venv)
    if owner or not Path(venv).is_dir():
        return owner
    for top, dirs, files in os.walk(venv):
        for name in dirs + files:
            path = os.path.join(top, name)
            status = os.lstat(path)
            if status.st_uid != 0:
                try:
                    return pwd.getpwuid(status.st_uid).pw_name
                except KeyError:
                    return str(status.st_uid)
            if stat.S_ISLNK(status.st_mode):
                owner = foreign_owner(path)
                if owner:
                    return owner
            elif status.st_mode & 0o022 and not (stat.S_ISDIR(status.st_mode) and status.st_mode & 0o1000):
                return "others"
    return None


def run_as(path, venv=None):
    """The command prefix that runs the program ``path`` as files/probe.d/lib.sh's run_program
    would: as is, unless we are root and another user can change it (for a venv's python,
    anything in ``venv``: ``venv_owner``); then as its owner (``runuser``), or as nobody
    for one of root's that others may write (root never executes what another user owns
    or can write).

    >>> run_as("/nonexistent/python")
    []
    """
    if os.geteuid() != 0:
        return []
    owner = venv_owner(venv) if venv is not None else foreign_owner(path)
    if not owner:
        return []
    return ["runuser", "-u", "nobody" if owner == "others" else owner, "--"]


def run(command, timeout, **kwargs):
    """A subprocess's CompletedProcess, or one with rc 124 and the reason when it overran
    or could not start. It runs in a session of its own, and at the bound the whole
    session is killed: runuser's child, and every process that one started (the
    communication script's ranks), not only the program started here."""
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, **kwargs)
    except OSError as error:
        return subprocess.CompletedProcess(command, 127, "", f"{error.strerror}: {error.filename}")
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return subprocess.CompletedProcess(command, 124, "", f"timed out after {timeout} s")
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def last_line(result):
    text = (result.stderr or result.stdout or "").strip().splitlines()
    return f"exit {result.returncode}: {text[-1][:300] if text else 'no output'}"


class Proof:
    """The steps in order, each reading what the ones before it found. Each program has
    a bound (together under five minutes: a GPU machine may be lent for minutes)."""

    def __init__(self, torch_venv, out, missing):
        self.torch_venv, self.out, self.missing = torch_venv, out, missing
        self.started = time.monotonic()
        self.rows, self.facts, self.plan, self.nvcc_release = [], None, None, None
        self.stop_line = ""

    def step(self, name, function):
        started = time.perf_counter()
        row = Step(name)
        try:
            row.result, row.evidence = function()
        except Exception as error:  # noqa: BLE001 - one row, never a traceback
            row.result, row.evidence = FAIL, f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
        row.seconds = time.perf_counter() - started
        self.rows.append(row.as_dict())
        # The rows so far, whole, after each step: a machine lent for minutes may be taken
        # back mid-proof, and what was proven until then is still there.
        write_whole(self.out / "gpu-proof.json", json.dumps(
            {**proof_document(self.rows, socket.gethostname(), sys.executable), "partial": True}, indent=2) + "\n")
        return row.result

    def requirements(self):
        if self.missing:
            return MISSING, (f"{sys.executable} lacks {', '.join(self.missing)} (requirements.txt) and so does python3 "
                             "on PATH: the schema, plan and agreement steps do not run")
        import packaging
        import yaml
        rerun = f" (run again from {os.environ[REEXEC_MARK]}, which lacks them)" if os.environ.get(REEXEC_MARK) else ""
        return PASS, f"{sys.executable}: packaging {packaging.__version__}, PyYAML {yaml.__version__}{rerun}"

    def probe(self):
        # No SGLang install here: its env file and cache are paths the probe finds absent.
        layout = NodeLayout.for_settings(str(self.torch_venv), "/nonexistent/sglang.env", "/nonexistent/sglang-cache",
                                         "sglang", managed=False)
        result = run(["sh", "-c", probe_command(ProbeInputs(layout))], 60)
        if result.returncode != 0:
            return FAIL, f"probe {last_line(result)}"
        self.facts = build_document(result.stdout.splitlines())
        write_whole(self.out / "facts.json", json.dumps(self.facts, indent=2) + "\n")
        shown = f"{len(self.facts['gpus'])} GPU(s), driver {(self.facts.get('driver') or {}).get('version')}"
        if self.missing:
            return MISSING, f"{shown}; schema not checked (needs packaging)"
        from bringup import facts_schema
        facts_schema.check(self.facts)
        return PASS, f"{shown}; facts.json fits the schema (bringup/facts_schema.py)"

    def health(self):
        problems = health_problems(self.facts)
        if problems:
            return FAIL, "; ".join(problems)
        from bringup.findings import HEALTH_CODES
        found = [finding for finding in (self.plan or {}).get("findings") or []
                 if finding["code"] in HEALTH_CODES or finding["code"].startswith("GPU_")]
        return PASS, health_evidence(self.facts, found)

    def dcgm_diag(self):
        """NVIDIA's diagnostic at level 1 through the probe's own section (the gpu_diag
        input), as validate runs it with ``gpu_diag: 1``: dcgmi found and run as the probe
        finds and runs its driver tools; "not run" where DCGM is not installed."""
        if self.missing:
            return MISSING, f"the diagnostic's findings need {', '.join(self.missing)}"
        layout = NodeLayout.for_settings(str(self.torch_venv), "/nonexistent/sglang.env", "/nonexistent/sglang-cache",
                                         "sglang", managed=False)
        result = run(["sh", "-c", probe_command(ProbeInputs(layout, gpu_diag="1"), ("gpu_diag",))], DIAG_SECONDS)
        if result.returncode != 0:
            return FAIL, f"probe with gpu_diag=1 {last_line(result)}"
        diag = build_document(result.stdout.splitlines(), ["gpu_diag"]).get("gpu_diag")
        # The health query's bus ids name the GPUs DCGM's findings speak of.
        facts = {**(self.facts or {}), "gpu_diag": diag}
        if diag and diag.get("installed") is False:
            return NOT_RUN, "DCGM's dcgmi is not installed here (optional: its reader is proven on a machine with DCGM)"
        write_whole(self.out / "gpu-diag.json", json.dumps(diag, indent=2) + "\n")
        problems = diag_problems(diag)
        if problems:
            return FAIL, "; ".join(problems)
        from bringup.config import Config
        from bringup.plan.diag import diag_findings
        found = []
        diag_findings(facts, Config(), found.append)
        return PASS, diag_evidence(diag, [{"code": finding.code, "severity": finding.severity} for finding in found])

    def driver_layer(self):
        problems = driver_layer_problems(self.facts)
        return (FAIL if problems else PASS), "; ".join(problems) or driver_layer_evidence(self.facts)

    def plan_step(self):
        if self.missing:
            return MISSING, f"python -m bringup.plan needs {', '.join(self.missing)}"
        config = self.out / "proof-settings.yaml"
        write_whole(config, f"venv_path: {json.dumps(str(self.torch_venv))}\nvenv_managed: false\n")
        result = run([sys.executable, "-m", "bringup.plan", "--json", str(self.out / "facts.json"), "--config", str(config),
                      "--host", socket.gethostname()], 30, cwd=ROOT)
        if result.returncode not in (0, 1):  # 1: the plan has blockers, judged below
            return FAIL, f"python -m bringup.plan {last_line(result)}"
        self.plan = json.loads(result.stdout)
        write_whole(self.out / "plan.json", result.stdout)
        problems = plan_problems(self.plan, self.facts)
        blockers = [finding["code"] for finding in self.plan["findings"] if finding["severity"] == "blocker"]
        return (FAIL if problems else PASS), "; ".join(problems) or (
            f"arch_list {self.plan['arch_list']}, torch_cuda {self.plan['torch_cuda']}, toolkit "
            f"{self.plan['toolkit'].get('home')}; blockers: {' '.join(blockers) or 'none'}")

    def cuda(self):
        python = self.torch_venv / "bin" / "python"
        # From /: "python -c" puts the working directory first on sys.path, and a module
        # another user left there (tempfile.py, torch/) would be root's import.
        result = run([*run_as(python, self.torch_venv), str(python), "-c", CUDA_SCRIPT], 90, cwd="/")
        answer = parse_cuda_output(result.stdout)
        if answer is None:
            return FAIL, f"{python} {last_line(result)}"
        wrong = cuda_verdict(len(self.facts.get("gpus") or []), answer)
        return (FAIL if wrong else PASS), wrong or (
            f"tests/node/cuda.py's check: {answer['count']} device(s), kernels {answer['kernels']}")

    def nvcc(self):
        # The toolkit the plan picks for torch's CUDA build (bringup/layout.py's home).
        torch_cuda = (self.facts.get("torch") or {}).get("cuda")
        if not torch_cuda:
            return FAIL, f"no torch CUDA build in {self.torch_venv} (the probe's torch fact), so no toolkit to pick"
        nvcc = Path(toolkit_home(".".join(torch_cuda.split(".")[:2]))) / "bin" / "nvcc"
        as_owner = run_as(nvcc)
        version = run([*as_owner, str(nvcc), "--version"], 15)
        self.nvcc_release = parse_nvcc_release(version.stdout)
        if version.returncode != 0:
            return FAIL, f"{nvcc} (torch's CUDA {torch_cuda}) {last_line(version)}"
        sms = sorted({gpu["compute_cap"].replace(".", "") for gpu in self.facts["gpus"]})
        with tempfile.TemporaryDirectory(prefix="gpu-proof-") as scratch:
            source, binary = Path(scratch) / "add.cu", Path(scratch) / "add"
            source.write_text(KERNEL)
            if as_owner:
                # nvcc's owner builds here, and its binary runs as that user too.
                shutil.chown(scratch, as_owner[2])
            gencode = [f"-gencode=arch=compute_{sm},code=sm_{sm}" for sm in sms]
            built = run([*as_owner, str(nvcc), *gencode, "-o", str(binary), str(source)], 60)
            if built.returncode != 0:
                return FAIL, f"nvcc {' '.join(gencode)} {last_line(built)}"
            ran = run([*as_owner, str(binary)], 30)
        lines = [line for line in ran.stdout.splitlines() if line.startswith("@@nvcc device=")]
        caps = {gpu["compute_cap"] for gpu in self.facts["gpus"]}
        wrong = [line for line in lines if "error=cudaSuccess wrong=0" not in line
                 or line.split(" sm=")[1].split()[0] not in caps]
        if ran.returncode != 0 or not lines or wrong or len(lines) != len(self.facts["gpus"]):
            return FAIL, f"the kernel: {'; '.join(wrong or lines) or last_line(ran)}"
        return PASS, (f"nvcc {self.nvcc_release} ({nvcc}) {' '.join(gencode)}: "
                      + "; ".join(line.removeprefix("@@nvcc ") for line in lines))

    def agreement(self):
        if self.missing:
            return MISSING, f"bringup/cuda.py needs {', '.join(self.missing)}"
        torch_cuda, driver = (self.facts.get("torch") or {}).get("cuda"), self.facts.get("driver")
        problems = agreement_problems(torch_cuda, self.nvcc_release, driver)
        if problems:
            return FAIL, "; ".join(problems)
        from bringup.cuda import driver_floor_for_cuda
        from bringup.versions import major_minor
        return PASS, (f"torch CUDA {torch_cuda}, nvcc {self.nvcc_release}, driver {driver['version']} (CUDA "
                      f"{driver['cuda_version']}; floor for CUDA {major_minor(torch_cuda)}: "
                      f"{driver_floor_for_cuda(major_minor(torch_cuda))})")

    def comm(self, step, bound):
        """Run tests/node/comm.py's script for ``step`` ("p2p" or "all-reduce") as the
        torch venv's python, its part killed at ``bound`` seconds or at what is left of
        the proof's five minutes, whichever comes first."""
        left = PROOF_SECONDS - (time.monotonic() - self.started) - COMM_START_SECONDS
        if step == "p2p":
            left -= 60  # what the all-reduce after it gets at least
        seconds = min(bound, left)
        if seconds < 10:
            return FAIL, f"not run: {PROOF_SECONDS} s of the proof spent before it (its bound: {bound} s)"
        python = self.torch_venv / "bin" / "python"
        script = comm_script(p2p_seconds=seconds, all_reduce_seconds=seconds)
        result = run([*run_as(python, self.torch_venv), str(python), "-c", script, step], seconds + COMM_START_SECONDS,
                     cwd="/")  # as the cuda step: nothing imported from the working directory
        answer = parse_comm_output(result.stdout)
        if answer is None:
            return FAIL, f"{python} {last_line(result)}"
        return comm_result(step, len(self.facts.get("gpus") or []), answer,
                           (self.facts.get("driver_layer") or {}).get("topology"))

    def p2p(self):
        return self.comm("p2p", P2P_SECONDS)

    def all_reduce(self):
        return self.comm("all-reduce", ALL_REDUCE_SECONDS)

    def run_all(self):
        self.step("requirements", self.requirements)
        if self.step("probe", self.probe) == FAIL:
            return
        reason = no_gpu_reason(self.facts, glob.glob("/dev/nvidia[0-9]*"))
        if reason:
            self.rows.append(Step("driver layer", NO_GPU, 0.0, reason).as_dict())
            self.stop_line = (f"gpu-proof: no GPU here ({reason}): stopped before 'driver layer', the first step "
                              "that needs one; run it on a GPU machine (docs/contributing.md)")
            return
        self.step("driver layer", self.driver_layer)
        self.step("plan", self.plan_step)
        self.step("health", self.health)
        self.step("cuda", self.cuda)
        self.step("nvcc", self.nvcc)
        self.step("agreement", self.agreement)
        self.step("p2p", self.p2p)
        self.step("all-reduce", self.all_reduce)
        self.step("dcgm diag", self.dcgm_diag)


def python_with_requirements():
    """The python to run as: this one when it has the planner's requirements, else
    python3 on PATH when that one has them, else this one (the steps needing them say
    so). Returns (python, missing)."""
    missing = missing_requirements(sys.executable)
    other = shutil.which("python3")
    if missing and other and not os.environ.get(REEXEC_MARK) and not missing_requirements(other):
        return other, []
    return sys.executable, missing


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-venv", default=sys.prefix, help="the venv whose torch is proven (default: this "
                        "python's)")
    parser.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "bench" / "out"))
    args = parser.parse_args(argv)
    python, missing = python_with_requirements()
    if python != sys.executable:
        # The torch venv stays the one asked for: only the orchestrator changes python.
        os.environ[REEXEC_MARK] = sys.executable
        os.execv(python, [python, str(Path(__file__).resolve()), "--torch-venv", args.torch_venv, "--out", args.out])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    proof = Proof(Path(args.torch_venv), out, missing)
    proof.run_all()
    document = proof_document(proof.rows, socket.gethostname(), sys.executable)
    write_whole(out / "gpu-proof.json", json.dumps(document, indent=2) + "\n")
    table = render_table(proof.rows)
    write_whole(out / "gpu-proof.md", table + "\n" + (proof.stop_line + "\n" if proof.stop_line else ""))
    print(table)
    print(f"saved: {out / 'gpu-proof.json'}, {out / 'gpu-proof.md'}")
    if proof.stop_line:
        print(proof.stop_line)
    return document["exit"]


if __name__ == "__main__":
    sys.exit(main())
