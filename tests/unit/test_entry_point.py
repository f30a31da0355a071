"""The unit's entry point as systemd runs it (SERVICE_ENTRY_POINT_BROKEN): the decision on
a table of ``entry_point`` facts, the real probe (files/probe.d/) on scratch venvs (one copied
from another path, as on the sandbox node where bin/sglang named the source node's
python), and ``python -m bringup.plan`` on a recorded node's facts."""

import json
import shutil
import subprocess
import sys

import pytest

from bringup.config import Config
from bringup.findings import BLOCKER, WARNING
from bringup.plan import plan
from bringup.plan.venv import entry_point_problem
from tests.unit.scenarios import FIXTURES, converged, varied
from tests.unit.test_probe_script import run_probe

VENV = "/opt/torch-venv"
SCRIPT = f"{VENV}/bin/sglang"
ROOT_755 = {"user": "root", "mode": "755", "kind": "regular file"}


def entry(**changes):
    """An external venv's healthy bin/sglang, naming the venv's own python."""
    return {"path": SCRIPT, "script": ROOT_755, "format": "script", "first_line": f"#!{VENV}/bin/python", "wrapper": None,
            "interpreter": f"{VENV}/bin/python", "interpreter_file": ROOT_755, "interpreter_owner": None,
            "interpreter_dir": f"{VENV}/bin", "venv_bin": f"{VENV}/bin", **changes}


COPIED = "/opt/sglang/venvs/4f2a9c/bin/python"
# name, the fact, severity (None: nothing wrong), words the message must hold
CASES = [
    ("healthy", entry(), None, ()),
    ("the venv's python through a link of the venv path", entry(interpreter_dir="/data/venv/bin",
                                                                 venv_bin="/data/venv/bin"), None, ()),
    ("copied from another node: the source's python is not here",
     entry(first_line=f"#!{COPIED}", interpreter=COPIED, interpreter_file=None, interpreter_dir=None),
     BLOCKER, (SCRIPT, COPIED, "does not exist on this node")),
    ("copied on one node: another venv's python answers", entry(interpreter="/srv/old-venv/bin/python",
                                                                interpreter_dir="/srv/old-venv/bin"),
     BLOCKER, ("another venv's python", "/srv/old-venv/bin", f"{VENV}/bin")),
    ("pip's /bin/sh form for a long path, its exec'd python missing",
     entry(first_line="#!/bin/sh", wrapper="/bin/sh", interpreter=COPIED, interpreter_file=None,
           interpreter_dir=None), BLOCKER, ("through /bin/sh", COPIED)),
    ("no bin/sglang", entry(script=None), BLOCKER, (SCRIPT, "does not exist")),
    ("bin/sglang not executable", entry(script={"user": "root", "mode": "644", "kind": "regular file"}),
     BLOCKER, ("cannot be executed by the service user sglang",)),
    ("no #! line", entry(format="other", first_line=None, interpreter=None, interpreter_file=None,
                         interpreter_dir=None), BLOCKER, ("neither a script with a #! line nor an executable",)),
    ("a program of its own (ELF)", entry(format="elf", first_line=None, interpreter=None, interpreter_file=None,
                                         interpreter_dir=None), None, ()),
    ("an interpreter only root may execute", entry(interpreter_file={"user": "root", "mode": "700",
                                                                     "kind": "regular file"}),
     BLOCKER, ("cannot execute", "mode 700")),
    ("the interpreter is a directory", entry(interpreter_file={"user": "root", "mode": "755", "kind": "directory"}),
     BLOCKER, ("cannot execute", "directory")),
    ("/usr/bin/env finds python on PATH", entry(first_line="#!/usr/bin/env python3", interpreter="/usr/bin/env",
                                                interpreter_dir="/usr/bin"), None, ()),
    ("an interpreter others may change", entry(interpreter_owner="nobody"), BLOCKER, ("a user other than root",)),
    ("an interpreter another user owns", entry(interpreter_owner="alice"), WARNING, ("alice may change",)),
]


@pytest.mark.parametrize("name,fact,severity,words", CASES, ids=[case[0] for case in CASES])
def test_entry_point_decision(name, fact, severity, words):
    problem = entry_point_problem(fact, "sglang", enabled=True)
    if severity is None:
        assert problem is None, problem
        return
    assert problem[0] == severity
    assert all(word in problem[1] for word in words), problem[1]


def test_a_venv_without_sglang_is_a_warning_where_the_unit_is_not_enabled():
    """An external venv of torch and FlashInfer only (the pre-warm's): deploy can run; the
    unit it writes could not start."""
    assert entry_point_problem(entry(script=None), "sglang", enabled=False)[0] == WARNING
    node = plan(varied(converged(), entry_point=entry(script=None)),
                Config.from_data({"venv_managed": False, "venv_path": VENV}))
    assert [f"{f.code}:{f.severity}" for f in node.findings if f.code == "SERVICE_ENTRY_POINT_BROKEN"] == [
        "SERVICE_ENTRY_POINT_BROKEN:warning"] and node.ok


def broken_facts(**changes):
    return varied(converged(), entry_point=entry(first_line=f"#!{COPIED}", interpreter=COPIED, interpreter_file=None,
                                                 interpreter_dir=None, **changes))


@pytest.mark.parametrize("facts,settings,codes", [
    (broken_facts(), {"venv_managed": False, "venv_path": VENV}, ["SERVICE_ENTRY_POINT_BROKEN:blocker"]),
    # A managed venv is built on the node (its scripts name its own python); an older
    # report has no entry_point; a venv without a python is another finding's.
    (broken_facts(), {}, []),
    (converged(), {"venv_managed": False, "venv_path": VENV}, []),
    (varied(broken_facts(), torch=None, flashinfer=None), {"venv_managed": False, "venv_path": VENV}, []),
], ids=["external, copied", "managed", "older report", "no venv python"])
def test_entry_point_in_the_plan(facts, settings, codes):
    node = plan(facts, Config.from_data({"service_model": "m", **settings}))
    found = [f"{f.code}:{f.severity}" for f in node.findings if f.code == "SERVICE_ENTRY_POINT_BROKEN"]
    assert found == codes, node.findings
    assert node.ok is (not codes)


def scratch_venv(path):
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(path)], check=True)
    return path


def console_script(venv, interpreter, form="plain"):
    """bin/sglang as pip writes a console script: a plain #! line, or (a long or spaced
    path) #!/bin/sh execing the interpreter on its second line (distlib _build_shebang)."""
    script = venv / "bin" / "sglang"
    body = "import sys\nfrom sglang.cli.main import main\nsys.exit(main())\n"
    if form == "plain":
        script.write_text(f"#!{interpreter}\n{body}")
    else:
        script.write_text(f"#!/bin/sh\n'''exec' \"{interpreter}\" \"$0\" \"$@\"\n' '''\n{body}")
    script.chmod(0o755)
    return script


def external(venv):
    # Built directly: the settings' check refuses paths under /tmp before any probe.
    return Config(venv_path=str(venv), venv_managed=False, service_model="m")


def entry_findings(facts, venv):
    return [f for f in plan(facts, external(venv)).findings if f.code == "SERVICE_ENTRY_POINT_BROKEN"]


def test_probe_finds_a_venv_copied_from_another_path(tmp_path):
    """The real probe on a venv copied from another path: its python answers (torch's
    error is the venv's, not the interpreter's), its bin/sglang names the source's
    python, which is gone; a blocker names both."""
    source = scratch_venv(tmp_path / "source" / "venv")
    console_script(source, source / "bin" / "python")
    venv = tmp_path / "node" / "venv"
    venv.parent.mkdir()
    shutil.copytree(source, venv, symlinks=True)
    shutil.rmtree(tmp_path / "source")
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(venv))
    assert "ModuleNotFoundError" in facts["torch"]["error"]  # bin/python runs
    point = facts["entry_point"]
    assert (point["path"], point["interpreter"], point["interpreter_file"]) == (
        str(venv / "bin" / "sglang"), str(source / "bin" / "python"), None), point
    blocker, = entry_findings(facts, venv)
    assert blocker.severity == BLOCKER
    assert blocker.message == (f"{venv}/bin/sglang starts {source}/bin/python (its #! line), which does not exist "
                               "on this node"), blocker.message
    assert "status=203/EXEC" in blocker.fix and str(venv) in blocker.fix


def test_probe_passes_the_venvs_own_python_and_reads_through_bin_sh(tmp_path):
    venv = scratch_venv(tmp_path / "venv")
    console_script(venv, venv / "bin" / "python")
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(venv))
    assert facts["entry_point"]["interpreter_dir"] == facts["entry_point"]["venv_bin"] == str(venv / "bin")
    assert entry_findings(facts, venv) == []
    # A path with a space: the kernel cuts a "#!" line at it, so pip writes the /bin/sh form.
    spaced = scratch_venv(tmp_path / "my venv")
    console_script(spaced, spaced / "bin" / "python", form="sh")
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(spaced))
    point = facts["entry_point"]
    assert (point["wrapper"], point["interpreter"]) == ("/bin/sh", str(spaced / "bin" / "python")), point
    assert entry_findings(facts, spaced) == []
    console_script(spaced, spaced / "bin" / "python")
    blocker, = entry_findings(run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(spaced)), spaced)
    assert f"starts {tmp_path}/my (its #! line), which does not exist" in blocker.message, blocker.message
    console_script(spaced, tmp_path / "gone" / "bin" / "python", form="sh")
    blocker, = entry_findings(run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(spaced)), spaced)
    assert "through /bin/sh" in blocker.message and f"{tmp_path}/gone/bin/python" in blocker.message


def test_probe_reports_no_entry_point_without_a_venv(tmp_path):
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(tmp_path / "none"))
    assert facts["entry_point"]["script"] is None and facts["entry_point"]["interpreter"] is None


def test_plan_cli_names_the_script_and_its_interpreter(tmp_path):
    """python -m bringup.plan on the incident node's recorded facts, its external venv's
    bin/sglang naming the python of the node it was copied from."""
    recorded = json.loads((FIXTURES / "facts" / "incident.json").read_text())
    venv = "/opt/venv_sglang211"
    recorded["entry_point"] = entry(path=f"{venv}/bin/sglang", first_line=f"#!{COPIED}", interpreter=COPIED,
                                    interpreter_file=None, interpreter_dir=None, venv_bin=f"{venv}/bin")
    facts, config = tmp_path / "facts.json", tmp_path / "settings.yaml"
    facts.write_text(json.dumps(recorded))
    config.write_text(f"venv_managed: false\nvenv_path: {venv}\nservice_model: Qwen/Qwen3-0.6B\n")
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(facts), "--config", str(config)],
                            capture_output=True, text=True, cwd=FIXTURES.parents[1])
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    printed = json.loads(result.stdout)
    broken, = [f for f in printed["findings"] if f["code"] == "SERVICE_ENTRY_POINT_BROKEN"]
    assert broken["severity"] == "blocker" and printed["ok"] is False
    assert broken["message"] == f"{venv}/bin/sglang starts {COPIED} (its #! line), which does not exist on this node"


def test_probe_reports_an_executable_and_a_file_without_a_line(tmp_path):
    """An ELF program is run by the kernel itself; a file that is neither cannot start.
    Neither's bytes reach the report."""
    venv = scratch_venv(tmp_path / "venv")
    script = venv / "bin" / "sglang"
    shutil.copyfile("/bin/true", script)
    script.chmod(0o755)
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(venv))
    assert (facts["entry_point"]["format"], facts["entry_point"]["first_line"]) == ("elf", None)
    assert entry_findings(facts, venv) == []
    script.write_text("import sys\nsys.exit(0)\n")
    facts = run_probe(tmp_path, "rtx-pro-6000-x8", venv=str(venv))
    assert (facts["entry_point"]["format"], facts["entry_point"]["interpreter"]) == ("other", None)
    blocker, = entry_findings(facts, venv)
    assert blocker.severity == BLOCKER and "neither a script with a #! line nor an executable" in blocker.message


def test_a_unit_failing_at_exec_is_explained_by_validate():
    """validate reads a failing unit's journal: systemd's 203/EXEC lines (the public
    sample) name SERVICE_ENTRY_POINT_BROKEN inside SERVICE_FAILED."""
    journal = [line for line in (FIXTURES / "failures" / "public-systemd-bad-interpreter.log").read_text().splitlines()
               if line.startswith("systemd[")]
    unit = {"name": "sglang.service", "active_state": "failed", "sub_state": "failed", "result": "exit-code",
            "restarts": 0, "journal": journal}
    failed, = [f for f in plan(varied(converged(), service_unit=unit), Config(service_model="m")).findings
               if f.code == "SERVICE_FAILED"]
    assert "SERVICE_ENTRY_POINT_BROKEN (systemd could not execute the unit's program (status=203/EXEC)" \
        in failed.message, failed.message
    assert "head -n 1 <venv_path>/bin/sglang" in failed.fix
