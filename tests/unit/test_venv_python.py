"""The operator's CPython (``venv_python``): what the probe finds, what the plan decides.

Ubuntu 22.04's archive has no final CPython >= 3.11 (bringup/platforms.py): fleets bring
their own (deadsnakes' python3.11, a build under /opt) and name it. The decision is a
table (bringup.platforms.operator_python); the plan is the real planner CLI on the
facts recorded on Ubuntu 22.04; the probe is the real one (files/probe.d/), run here on scratch
interpreter paths: root's alone (run, its answer read), and writable by another user
(the file, a link on its way, a directory above it: never run).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.layout import NodeLayout, ProbeInputs
from bringup.platforms import operator_python
from bringup.versions import major_minor
from facts.node import probe_command
from facts.probe_output import build_document

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts" / "ubuntu2204-x86_64-h100.json"
PATH = "/opt/cpython-3.11/bin/python3.11"
ROOTS = {"user": "root", "mode": "755", "kind": "regular file"}
GOOD = {"path": PATH, "file": ROOTS, "owner": None, "real": PATH, "ran": 0, "version": "3.11.2",
        "releaselevel": "final", "pip": "22.3.1", "venv": "ok"}
NOT_RUN = dict(GOOD, ran=None, version=None, releaselevel=None, pip=None, venv=None)

# the fact (changes to GOOD; None: no fact) -> what the plan says is wrong (None: usable)
CASES = [
    ("usable", {}, None),
    ("not looked at", None, f"{PATH} was not looked at"),
    ("not found", dict(NOT_RUN, file=None, real=None), f"{PATH} does not exist on this node"),
    ("another user's", dict(NOT_RUN, file=dict(ROOTS, user="alice"), owner="alice"),
     f"{PATH} (regular file, owner alice, mode 755) can be changed by alice"),
    ("a directory others may write", dict(NOT_RUN, owner="nobody"), "can be changed by nobody"),
    ("a directory", dict(NOT_RUN, file=dict(ROOTS, kind="directory")), "is not an executable file"),
    ("no answer", dict(GOOD, ran=1, version=None), f"did not answer `{PATH} -I -c` (exit 1)"),
    ("too old", dict(GOOD, version="3.10.12"), f"{PATH} is CPython 3.10.12; SGLang needs CPython >= 3.11"),
    ("pre-release", dict(GOOD, version="3.11.0", releaselevel="candidate"),
     f"{PATH} is CPython 3.11.0 (releaselevel candidate), a pre-release"),
    ("no venv", dict(GOOD, venv="ensurepip.__main__"), "has no venv support: ensurepip.__main__ missing"),
]


@pytest.mark.parametrize("name,changes,problem", CASES, ids=[case[0] for case in CASES])
def test_operator_python_decision(name, changes, problem):
    found = None if changes is None else dict(GOOD, **changes)
    choice, refused = operator_python(PATH, found, major_minor("3.11"))
    if problem is None:
        assert refused is None and (choice.version, choice.path, choice.source) == ("3.11", PATH, "setting")
    else:
        assert choice is None and refused[0].startswith(problem) if problem.startswith("/") else problem in refused[0]
        assert refused[1], refused


def plan_cli(tmp_path, fact, settings):
    facts = json.loads(FACTS.read_text())
    if fact is not None:
        facts["venv_python"] = fact
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    (tmp_path / "settings.yaml").write_text(json.dumps(settings))
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(tmp_path / "facts.json"), "--config",
                             str(tmp_path / "settings.yaml")], capture_output=True, text=True, cwd=ROOT, timeout=120,
                            check=False)
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    return json.loads(result.stdout)


def codes(plan):
    return {f["code"]: f["severity"] for f in plan["findings"] if f["severity"] == "blocker"}


def test_ubuntu2204_without_venv_python_names_it_in_the_fix(tmp_path):
    plan = plan_cli(tmp_path, None, {})
    unusable = next(f for f in plan["findings"] if f["code"] == "PYTHON_UNUSABLE")
    assert "set venv_python to a final CPython >= 3.11" in unusable["fix"], unusable
    assert "deadsnakes' python3.11" in unusable["fix"] and "/opt/cpython-3.11" in unusable["fix"], unusable


def test_ubuntu2204_with_the_operators_cpython_plans_the_cp311_venv(tmp_path):
    plan = plan_cli(tmp_path, GOOD, {"venv_python": PATH})
    assert codes(plan) == {} and plan["ok"], plan["findings"]
    venv = plan["venv"]
    assert (venv["python"], venv["python_version"]) == (PATH, "3.11")
    assert venv["lock"] == "files/locks/sglang-0.5.23-cp311-x86_64.txt"
    assert venv["uv_lock"] == "files/locks/uv-cp311-x86_64.txt"
    # Nothing from the archive: not its python3.11 (3.11.0rc1) nor its venv package.
    assert venv["system_packages"] == ["python3-venv", "g++"]
    assert not [f for f in plan["findings"] if f["code"].startswith("PYTHON_")], plan["findings"]


@pytest.mark.parametrize("name,changes,problem", [case for case in CASES if case[2]], ids=[c[0] for c in CASES if c[2]])
def test_an_unusable_operators_cpython_is_one_blocker(tmp_path, name, changes, problem):
    plan = plan_cli(tmp_path, None if changes is None else dict(GOOD, **changes), {"venv_python": PATH})
    assert codes(plan) == {"VENV_PYTHON_UNUSABLE": "blocker"}, plan["findings"]
    blocker = next(f for f in plan["findings"] if f["code"] == "VENV_PYTHON_UNUSABLE")
    assert blocker["message"].startswith("venv_python: ") and problem in blocker["message"], blocker
    assert "\n" not in blocker["message"] + blocker["fix"]


def probe(tmp_path, interpreter):
    layout = NodeLayout.for_settings("/nonexistent", "/nonexistent", str(tmp_path / "cache"), "sglang")
    command = probe_command(ProbeInputs(layout, (), venv_python=str(interpreter)), ("python",))
    result = subprocess.run(["sh", "-c", command], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                            timeout=60, check=True)
    return build_document(result.stdout.splitlines(), ["venv_python"])["venv_python"]


@pytest.fixture
def scratch(tmp_path):
    """Directories root alone may change, up to /: the test runs as root (the probe's
    user on a node), so tmp_path's parents are root's."""
    if os.geteuid() != 0:
        pytest.fail("the probe's ownership checks are root's: run this suite as root (the sandbox machines do)")
    for folder in [tmp_path, *tmp_path.parents]:
        mode = folder.stat().st_mode
        assert folder.stat().st_uid == 0 and (not mode & 0o022 or mode & 0o1000), folder
    return tmp_path


def marker_interpreter(folder, marker):
    """A program that leaves a mark when it runs, in place of a python."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "python3.11"
    program.write_text(f"#!/bin/sh\ntouch {marker}\necho version=3.11.2\n")
    program.chmod(0o755)
    return program


def test_the_probe_runs_a_root_owned_interpreter_through_its_links(scratch):
    # /usr/bin/python3 is this machine's final CPython >= 3.11 (Debian 12's 3.11.2).
    (scratch / "opt" / "bin").mkdir(parents=True)
    (scratch / "alternatives").mkdir()
    (scratch / "alternatives" / "python3.11").symlink_to("/usr/bin/python3")
    link = scratch / "opt" / "bin" / "python3.11"
    link.symlink_to("../../alternatives/python3.11")
    found = probe(scratch, link)
    assert found["owner"] is None and found["file"]["user"] == "root" and found["ran"] == 0, found
    assert found["real"] == os.path.realpath("/usr/bin/python3")
    itself = subprocess.run(["/usr/bin/python3", "-I", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert found["releaselevel"] == "final" and found["version"] == itself, found
    choice, problem = operator_python(str(link), found, major_minor("3.11"))
    # Debian's python3-venv is installed here (the control venv is made with it).
    assert problem is None and found["venv"] == "ok" and choice.version == "3.11", (found, problem)


@pytest.mark.parametrize("where", ["file", "directory", "link"])
def test_the_probe_never_runs_an_interpreter_another_user_may_change(scratch, where):
    marker = scratch / "ran"
    if where == "file":  # the interpreter is another user's
        program = marker_interpreter(scratch / "bin", marker)
        os.chown(program, 1, 1)
        named, owner = program, program.owner()
    elif where == "directory":  # root's interpreter in a directory every user may write
        program = marker_interpreter(scratch / "shared" / "bin", marker)
        (scratch / "shared").chmod(0o777)
        named, owner = program, "nobody"
    else:  # root's interpreter, reached through a link in a directory others may write
        program = marker_interpreter(scratch / "bin", marker)
        (scratch / "links").mkdir()
        (scratch / "links" / "python3.11").symlink_to(program)
        (scratch / "links").chmod(0o777)
        named, owner = scratch / "links" / "python3.11", "nobody"
    found = probe(scratch, named)
    assert found["owner"] == owner and found["ran"] is None and found["version"] is None, found
    assert not marker.exists(), "the probe ran an interpreter another user may change"
    choice, problem = operator_python(str(named), found, major_minor("3.11"))
    assert choice is None and f"can be changed by {owner}" in problem[0] and "nothing was run" in problem[0]


def test_the_probe_runs_a_root_owned_marker_interpreter(scratch):
    """The contrast: the same program root's alone is run (so the cases above prove the check)."""
    marker = scratch / "ran"
    program = marker_interpreter(scratch / "bin", marker)
    found = probe(scratch, program)
    assert found["owner"] is None and found["ran"] == 0 and found["version"] == "3.11.2", found
    assert marker.exists()


def test_a_missing_interpreter_is_reported_as_missing(scratch):
    found = probe(scratch, scratch / "none" / "python3.11")
    assert found["file"] is None and found["ran"] is None, found
    assert operator_python(str(scratch / "none" / "python3.11"), found, major_minor("3.11"))[1][0].endswith(
        "does not exist on this node")
