"""NVIDIA's diagnostic when asked (gpu_diag): the probe's section (files/probe.d/gpu_diag.sh)
run here with stand-in tools on the base PATH, as tests/unit/test_probe_driver.py runs the
driver layer; its parser on the samples of tests/fixtures/dcgm/ (DCGM 4's JSON as NVIDIA's
sources define it, README there); the findings (bringup/plan/diag.py) as a scenario table;
the setting and the probe's input."""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.facts_schema import check
from bringup.findings import BLOCKER, WARNING
from bringup.layout import DEFAULT_LAYOUT, ProbeInputs
from bringup.plan import plan
from bringup.plan.diag import diag_findings
from control.host_plan import probe_inputs
from facts.probe_output import build_document
from facts.sections.gpu_diag import read_diag
from tests.unit.scenarios import converged
from tests.unit.test_gpu_health import healthy_gpu
from tests.unit.test_probe_driver import NOBODY, SCRIPT, replay, standin

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm"
OS = {"id": "debian", "version_id": "12", "arch": "x86_64"}
BUS = [f"0000:{n}8:00.0" for n in range(1, 5)]


def sample(name):
    return (FIXTURES / name).read_text()


def run_diag_probe(tmp_path, level="1", systemd=True):
    """The gpu_diag section with PROBE_GPU_DIAG=level -> (raw output, its document or None)."""
    root, bin_dir = (tmp_path / "root").resolve(), tmp_path / "bin"
    (root / "run" / "systemd" / "system").mkdir(parents=True, exist_ok=True) if systemd else root.mkdir(exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    for tool in ("env", "runuser", "timeout"):
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin"))
    environment = {"PATH": "/usr/bin:/bin", "PROBE_SECTIONS": "gpu_diag", "PROBE_SERVICE_PATH": str(bin_dir),
                   "PROBE_FS_ROOT": str(root), "PROBE_UNIT": "sglang.service", "PROBE_GPU_DIAG": level}
    run = subprocess.run(["sh", "-c", SCRIPT], env=environment, capture_output=True, text=True, timeout=60,
                         check=True)
    document = build_document(run.stdout.splitlines(), ["gpu_diag"])
    check({"os": OS, "gpus": [], **document})
    return run.stdout, document.get("gpu_diag")


def idle_node(bin_dir, diag=None, diag_rc=0):
    """A node whose unit is inactive and whose GPUs no process holds; dcgmi answers ``diag``."""
    standin(bin_dir, "systemctl", 'echo inactive\nexit 3\n')
    replay(bin_dir, "nvidia-smi", "")
    if diag is not None:
        replay(bin_dir, "dcgmi", diag, diag_rc)


def test_not_asked_runs_nothing(tmp_path):
    """Without the setting the section writes nothing and starts no tool: dcgmi here would fail the test."""
    bin_dir = tmp_path / "bin"
    idle_node(bin_dir)
    standin(bin_dir, "dcgmi", "echo ran > /dev/stderr\nexit 99\n")
    out, diag = run_diag_probe(tmp_path, level="")
    assert out.strip() == "" and diag is None


def test_a_passing_diag(tmp_path):
    idle_node(tmp_path / "bin", sample("diag-r1-pass.json"))
    _, diag = run_diag_probe(tmp_path)
    assert (diag["level"], diag["busy"], diag["ran"], diag["installed"], diag["dcgm_version"], diag["error"]) == (
        1, [], True, True, "4.2.3", None)
    assert {(r["test"], r["status"]) for r in diag["results"]} == {("software", "pass")}
    assert len(diag["results"]) == 4


def test_a_failing_diag_is_read_whatever_dcgmi_exits(tmp_path):
    """dcgmi exits non-zero (DCGM_ST_NVVS_ISOLATE_ERROR) when a test fails: the JSON is read."""
    idle_node(tmp_path / "bin", sample("diag-r2-fail.json"), 226)
    _, diag = run_diag_probe(tmp_path, level="2")
    failed = [r for r in diag["results"] if r["status"] == "fail"]
    assert diag["error"] is None and [(r["test"], r["category"], r["entity_id"]) for r in failed] == [
        ("memory", "Hardware", 3)]
    assert failed[0]["warnings"] == [{"message": "Detected 2 volatile double-bit ECC error(s) in GPU 3.",
                                      "severity": 2, "category": 10, "error_id": 4}]


@pytest.mark.parametrize("unit_state, apps, busy", [
    ("active", "", ["unit sglang.service active"]),
    ("activating", "", ["unit sglang.service activating"]),
    ("inactive", "4242, python3, 00000000:18:00.0", ["process 4242, python3, 00000000:18:00.0"]),
    ("active", "4242, python3, 00000000:18:00.0", ["unit sglang.service active",
                                                   "process 4242, python3, 00000000:18:00.0"]),
])
def test_busy_gpus_are_not_diagnosed(tmp_path, unit_state, apps, busy):
    bin_dir = tmp_path / "bin"
    standin(bin_dir, "systemctl", f"echo {unit_state}\n")
    replay(bin_dir, "nvidia-smi", apps + "\n" if apps else "")
    standin(bin_dir, "dcgmi", "echo ran > /dev/stderr\nexit 99\n")
    out, diag = run_diag_probe(tmp_path)
    assert diag["busy"] == busy and not diag["ran"] and "@@ gpu-diag " not in out


def test_a_compute_apps_query_that_fails_is_not_idle(tmp_path):
    bin_dir = tmp_path / "bin"
    standin(bin_dir, "systemctl", "echo inactive\nexit 3\n")
    replay(bin_dir, "nvidia-smi", "", 9)
    _, diag = run_diag_probe(tmp_path)
    assert diag["busy"] == ["unknown nvidia-smi's compute-apps query exited 9"] and not diag["ran"]


def test_no_dcgmi(tmp_path):
    standin(tmp_path / "bin", "systemctl", "echo inactive\nexit 3\n")
    replay(tmp_path / "bin", "nvidia-smi", "")
    _, diag = run_diag_probe(tmp_path)
    assert (diag["ran"], diag["installed"], diag["results"]) == (False, False, [])


@pytest.mark.skipif(os.geteuid() != 0, reason="the planted dcgmi must be chowned to another user")
def test_a_dcgmi_another_user_owns_is_run_as_that_user_never_as_root():
    """Root never runs a dcgmi another user owns (run_program_within, root_may_run): it runs
    as its owner (here nobody, recorded by its uid); its JSON is read all the same."""
    scratch = Path(tempfile.mkdtemp(prefix="probe-diag-"))
    try:
        scratch.chmod(0o755)
        records = scratch / "records"
        records.mkdir()
        records.chmod(0o777)
        bin_dir = scratch / "bin"
        idle_node(bin_dir)
        data = scratch / "data" / "diag.json"
        data.write_text(sample("diag-r1-pass.json"))
        standin(bin_dir, "dcgmi", f"/usr/bin/id -u >> {records}/dcgmi\n/bin/cat {data}\n")
        os.chown(bin_dir / "dcgmi", NOBODY, NOBODY)
        _, diag = run_diag_probe(scratch)
        assert (records / "dcgmi").read_text().split() == [str(NOBODY)] and diag["error"] is None
    finally:
        shutil.rmtree(scratch)


# name, dcgmi's answer, exit status, the error (None: read)
READS = [
    ("DCGM 4 pass", sample("diag-r1-pass.json"), 0, None),
    ("a line before the JSON", "Successfully ran diagnostic for group.\n" + sample("diag-r1-pass.json"), 0, None),
    ("DCGM 3's shape", sample("diag-dcgm3.json"), 0,
     "DCGM 3.3.9 wrote it: this release reads the diagnostic of DCGM 4 only"),
    ("DCGM 5", sample("diag-r1-pass.json").replace('"4.2.3"', '"5.0.1"'), 0,
     "DCGM 5.0.1 wrote it: this release reads the diagnostic of DCGM 4 only"),
    ("no version", '{"DCGM Diagnostic": {"test_categories": []}}', 0,
     "it carries no DCGM version: this release reads the diagnostic of DCGM 4 only"),
    ("no host engine", "Error: unable to establish a connection to the specified host: localhost", 255,
     "dcgmi exited 255 without a JSON answer: Error: unable to establish a connection to the specified host: "
     "localhost"),
    ("cut short", sample("diag-r2-fail.json")[:500], 0, "dcgmi exited 0 without a JSON answer: {"),
    ("timed out", "", 124, "dcgmi ran past its time and was stopped"),
    ("runtime error", '{"DCGM Diagnostic": {"version": "4.2.3", "runtime_error": "Error: GPUs busy"}}', 226,
     "DCGM's diagnostic could not run: Error: GPUs busy"),
    ("no results", '{"metadata": {"version": "4.2.3"}, "DCGM Diagnostic": {"test_categories": []}}', 0,
     "DCGM's answer lists no test result"),
    ("not an object", '{"DCGM Diagnostic": [1, 2]}', 0,
     "it carries no DCGM version: this release reads the diagnostic of DCGM 4 only"),
]


@pytest.mark.parametrize("name, text, rc, error", READS, ids=[row[0] for row in READS])
def test_read_diag(name, text, rc, error):
    version, results, said = read_diag(text, rc)
    assert (said if error is None or said is None else said[:len(error)]) == error
    assert bool(results) == (error is None)


def result(gpu, status, test="memory", warnings=()):
    return {"category": "Hardware", "test": test, "entity_group": "GPU", "entity_id": gpu, "status": status,
            "warnings": [{"message": message, "severity": severity, "category": 10, "error_id": 4}
                         for message, severity in warnings]}


def node(results=(), busy=(), installed=True, error=None, level=2, exit_status=0):
    return {"gpu_health": {"query_error": None, "kernel_log": {"source": "journal", "read_error": None, "xid": []},
                           "gpus": [{**healthy_gpu(n), "bus_id": bus} for n, bus in enumerate(BUS)]},
            "gpu_diag": {"level": level, "busy": list(busy), "ran": installed and not busy, "installed": installed,
                         "exit_status": exit_status if installed and not busy else None, "dcgm_version": "4.2.3", "error": error, "results": list(results)}}


DBE = ("Detected 2 volatile double-bit ECC error(s) in GPU 3.", 2)
# name, facts, accept, [(code, severity, words in the message, words in the fix)]
SCENARIOS = [
    ("not asked", {"gpu_diag": None}, (), []),
    ("passed", node([result(n, "pass") for n in range(4)]), (), []),
    ("failed, isolate", node([result(3, "fail", warnings=[DBE])]), (),
     [("GPU_DIAG_FAILED", BLOCKER, ["GPU 3 (0000:48:00.0)", "test memory (Hardware)", "double-bit", "ISOLATE",
                                    "-r 2"], ["contact NVIDIA support"])]),
    ("failed, reset", node([result(1, "fail", warnings=[("Xid 79", 6)])]), (),
     [("GPU_DIAG_FAILED", BLOCKER, ["GPU 1 (0000:28:00.0)", "RESET"], ["nvidia-smi -r -i 1"])]),
    ("failed, the worst error acts", node([result(1, "fail", warnings=[("slow", 1), ("Xid 79", 6)])]), (),
     [("GPU_DIAG_FAILED", BLOCKER, ["slow; Xid 79", "RESET"], ["nvidia-smi -r -i 1"])]),
    ("failed, monitor only", node([result(0, "fail", warnings=[("SBE", 1)])]), (),
     [("GPU_DIAG_FAILED", WARNING, ["MONITOR"], ["watch it"])]),
    ("failed, configuration", node([result(0, "fail", test="software", warnings=[("Persistence mode", 5)])]), (),
     [("GPU_DIAG_FAILED", BLOCKER, ["test software", "CONFIG"], ["fix the configuration"])]),
    ("failed, no message nor severity", node([result(2, "fail")]), (),
     [("GPU_DIAG_FAILED", BLOCKER, ["DCGM gave no message", "not given"], ["dcgmi diag -r 3"])]),
    ("failed, accepted on its GPU", node([result(3, "fail", warnings=[DBE])]), ("GPU_DIAG_FAILED@0000:48:00.0",),
     [("GPU_DIAG_FAILED", WARNING, ["accepted by gpu_health_accept GPU_DIAG_FAILED@0000:48:00.0"], [])]),
    ("failed, accepted on another GPU", node([result(3, "fail", warnings=[DBE])]),
     ("GPU_DIAG_FAILED@0000:18:00.0",), [("GPU_DIAG_FAILED", BLOCKER, ["GPU 3"], [])]),
    ("a GPU the health query does not list", node([result(7, "fail", warnings=[DBE])]), (),
     [("GPU_DIAG_FAILED", BLOCKER, ["GPU 7: "], [])]),
    ("warned", node([result(0, "warn", warnings=[("Clocks throttled", 1)])]), (),
     [("GPU_DIAG_WARNING", WARNING, ["passed its test memory", "Clocks throttled"], [])]),
    ("passed with a message", node([result(0, "pass", warnings=[("note", 1)])]), (),
     [("GPU_DIAG_WARNING", WARNING, ["note"], [])]),
    ("skipped is not a pass", node([result(0, "skip", test="pulse_test"), result(1, "not run"),
                                    result(2, "pass")]), (),
     [("GPU_DIAG_WARNING", WARNING, ["did not pass 2 test(s)", "GPU 0 (0000:18:00.0) pulse_test (skipped)",
                                     "GPU 1 (0000:28:00.0) memory (not run)"], [])]),
    ("busy", node(busy=["unit sglang.service active"]), (),
     [("GPU_DIAG_NOT_RUN", WARNING, ["was not run", "needs them idle", "unit sglang.service active"],
       ["drained"])]),
    ("not installed", node(installed=False), (),
     [("GPU_DIAG_NOT_RUN", WARNING, ["not installed"], ["datacenter-gpu-manager-4"])]),
    ("unread", node(error="DCGM 3.3.9 wrote it: this release reads the diagnostic of DCGM 4 only"), (),
     [("GPU_DIAG_UNREAD", WARNING, ["could not be read", "DCGM 3.3.9"], [])]),
    ("unread, dcgmi says a test failed: a failure", node(error="dcgmi exited 226 without a JSON answer",
                                                         exit_status=226), (),
     [("GPU_DIAG_FAILED", BLOCKER, ["exited 226 (DCGM_ST_NVVS_ERROR", "which GPU and test failed is not known"],
       ["dcgmi diag -r 2"])]),
    ("unread, dcgmi says isolate: a failure", node(error="no JSON", exit_status=205), (),
     [("GPU_DIAG_FAILED", BLOCKER, ["DCGM_ST_NVVS_ISOLATE_ERROR"], [])]),
    ("unread failure, accepted", node(error="no JSON", exit_status=226), ("GPU_DIAG_FAILED",),
     [("GPU_DIAG_FAILED", WARNING, ["accepted by gpu_health_accept GPU_DIAG_FAILED"], [])]),
    ("unread, another diagnostic running", node(error="no JSON", exit_status=217), (),
     [("GPU_DIAG_UNREAD", WARNING, ["exit 217: DCGM_ST_DIAG_ALREADY_RUNNING"], [])]),
]


@pytest.mark.parametrize("name, facts, accept, expected", SCENARIOS, ids=[row[0] for row in SCENARIOS])
def test_findings(name, facts, accept, expected):
    found = []
    diag_findings(facts, Config.from_data({"gpu_health_accept": list(accept)}), found.append)
    assert [(f.code, f.severity) for f in found] == [(code, severity) for code, severity, _, _ in expected]
    for finding, (_, _, said, fix) in zip(found, expected):
        assert all(words in finding.message for words in said), finding.message
        assert all(words in finding.fix for words in fix), finding.fix


def test_the_planner_blocks_a_failed_diag_and_accepting_it_lets_it_through():
    facts = {**converged(), **node([result(3, "fail", warnings=[DBE])])}
    assert plan(facts, Config()).codes("blocker") == ["GPU_DIAG_FAILED"]
    through = plan(facts, Config.from_data({"gpu_health_accept": "GPU_DIAG_FAILED"}))
    assert through.codes("blocker") == [] and "GPU_DIAG_FAILED" in through.codes("warning")


@pytest.mark.parametrize("value, parsed", [("off", "off"), ("1", "1"), (1, "1"), (2, "2"), ("2", "2")])
def test_the_setting(value, parsed):
    config = Config.from_data({"gpu_diag": value})
    assert config.gpu_diag == parsed
    assert probe_inputs(config).gpu_diag == ("" if parsed == "off" else parsed)


@pytest.mark.parametrize("value", ["3", "on", "true", "-r 1", "", "1 ", True])
def test_a_bad_setting_is_refused_with_its_fix(value):
    with pytest.raises(Exception) as refused:
        Config.from_data({"gpu_diag": value})
    assert "use off (the default: no diagnostic), 1" in str(refused.value)


def test_the_probe_input():
    assert "PROBE_GPU_DIAG" not in ProbeInputs(DEFAULT_LAYOUT).environment()
    inputs = ProbeInputs(DEFAULT_LAYOUT, gpu_diag="2")
    assert inputs.environment()["PROBE_GPU_DIAG"] == "2" and str(inputs).endswith(", gpu_diag=2")


@pytest.mark.skipif(os.geteuid() != 0, reason="the planted systemctl must be chowned to another user")
def test_a_systemctl_another_user_owns_is_never_run_as_root():
    """The unit's state is asked of systemctl as every tool is (run_program_within): one
    another user owns runs as that user, never as root (review1: it ran as root)."""
    scratch = Path(tempfile.mkdtemp(prefix="probe-diag-"))
    try:
        scratch.chmod(0o755)
        records = scratch / "records"
        records.mkdir()
        records.chmod(0o777)
        bin_dir = scratch / "bin"
        idle_node(bin_dir)
        standin(bin_dir, "systemctl", f"/usr/bin/id -u >> {records}/systemctl\necho inactive\nexit 3\n")
        os.chown(bin_dir / "systemctl", NOBODY, NOBODY)
        run_diag_probe(scratch)
        assert (records / "systemctl").read_text().split() == [str(NOBODY)]
    finally:
        shutil.rmtree(scratch)


def test_a_unit_state_systemctl_cannot_tell_is_not_idle(tmp_path):
    """systemctl that cannot reach systemd (no state on its output) leaves the unit's state
    unknown: the diagnostic is not run (review1: it ran)."""
    bin_dir = tmp_path / "bin"
    standin(bin_dir, "systemctl", "echo 'Failed to connect to bus: Connection refused' >&2\nexit 1\n")
    replay(bin_dir, "nvidia-smi", "")
    standin(bin_dir, "dcgmi", "echo ran > /dev/stderr\nexit 99\n")
    out, diag = run_diag_probe(tmp_path)
    assert diag["busy"] == ["unknown systemctl is-active sglang.service exited 1 without a state"]
    assert not diag["ran"] and "@@ gpu-diag " not in out


V4 = '{"metadata": {"version": "4.2.3"}, "DCGM Diagnostic": %s}'


@pytest.mark.parametrize("text", [
    V4 % '"x"',
    V4 % '{"test_categories": [{"tests": 5}]}',
    V4 % '{"test_categories": [{"tests": [{"results": 5}]}]}',
    V4 % '{"test_categories": [{"tests": [{"name": "t", "results": [{"status": "Fail", "warnings": 7}]}]}]}',
])
def test_an_answer_of_another_shape_is_not_a_crash(text):
    """A value of another JSON type where a list or object is read is an answer without results,
    never an exception (which would fail the whole host's facts; review1: it raised)."""
    version, results, error = read_diag(text, 0)
    assert version == "4.2.3" and all(result["warnings"] == [] for result in results)
    assert error is None or error == "DCGM's answer lists no test result"


def test_dcgms_strings_reach_the_findings_as_printable_ascii():
    """JSON escapes decode to control characters the probe's `printable` never saw (a
    terminal's escape sequences, a right-to-left override): none reaches a finding (review1)."""
    evil = "x\u001b]0;owned\u0007\u001b[2J\u202eevil\u0000"
    text = (V4 % ('{"test_categories": [{"category": "Hardware\\u001b[31m", "tests": [{"name": "memory\\u001b[2J", '
                  '"results": [{"entity_group": "GPU", "entity_id": 3, "status": "Fail", "warnings": [{"warning": '
                  + json.dumps(evil) + ', "error_severity": 2}]}]}]}]}')).replace('"4.2.3"', '"4.2.3\\u001b[1m"')
    version, results, _ = read_diag(text, 226)
    found = []
    diag_findings(node(results), Config(), found.append)
    said = found[0].message + version + read_diag(text.replace('"4.2.3', '"3.2.3'), 0)[2]
    assert all(" " <= char <= "~" for char in said), repr(said)


def test_a_test_failed_as_a_whole_is_a_failure():
    """DCGM writes the errors tied to no GPU (DCGM_FE_NONE) under the test's ``test_summary``
    only (dcgmi/Diag.cpp HelperJsonAddTestSummary), and a test that failed before it ran on a
    GPU has no other result: its failure is one, not a pass (review1: it was dropped)."""
    text = V4 % json.dumps({"test_categories": [{"category": "Deployment", "tests": [
        {"name": "software", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Pass"}],
         "test_summary": {"status": "Pass"}},
        {"name": "pcie", "test_summary": {"status": "Fail", "warnings": [
            {"warning": "Unable to load the CUDA library", "error_severity": 5, "error_id": 99}]}}]}]})
    version, results, error = read_diag(text, 226)
    found = []
    diag_findings(node(results), Config(), found.append)
    assert [(f.code, f.severity) for f in found] == [("GPU_DIAG_FAILED", BLOCKER)]
    assert found[0].message.startswith("the test as a whole: ") and "CUDA library" in found[0].message


def test_a_child_the_tool_detaches_does_not_hold_the_probe(tmp_path):
    """A dcgmi that leaves a detached child (setsid) holding its output open: the probe reads
    the tool's answer when the tool exits (run_program_within spools it to files), not when
    the last holder of a pipe lets go."""
    bin_dir = tmp_path / "bin"
    idle_node(bin_dir)
    answer = tmp_path / "answer.json"
    answer.write_text(sample("diag-r1-pass.json"))
    setsid, sleep, cat = (shutil.which(tool) for tool in ("setsid", "sleep", "cat"))
    standin(bin_dir, "dcgmi", f"{setsid} {sleep} 61 &\n{cat} {answer}\n")
    started = time.monotonic()
    _, diag = run_diag_probe(tmp_path)
    assert time.monotonic() - started < 30, "the probe waited on the detached child"
    assert diag["error"] is None and diag["exit_status"] == 0 and len(diag["results"]) == 4, diag
    subprocess.run(["pkill", "-f", f"^{sleep} 61$"], check=False)
