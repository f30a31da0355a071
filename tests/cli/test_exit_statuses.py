"""docs/exit-statuses.md held to the code: every ``python -m`` entry point of bringup/,
control/, facts/ and sandbox/ is a row of its table, has argparse's ``--help`` (exit 0) and
refuses an unknown option with exit status 2; the planner, the report and explain exit
0 for yes, 1 for no and 2 for bad input, each run as the operator runs it."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "exit-statuses.md"
FACTS = ROOT / "tests" / "fixtures" / "facts"
READY_FACTS = FACTS / "incident.json"  # the incident: fixes, no blocker
BLOCKED_FACTS = FACTS / "driver_layer" / "fabric-manager-missing.json"  # HGX B200, FABRIC_MANAGER_MISSING
FAILURES = ROOT / "tests" / "fixtures" / "failures"


def entry_points():
    """``bringup.plan``, ``sandbox.aptrepo``, ...: every module of bringup/, control/, facts/
    and sandbox/ that runs under ``python -m`` (a ``__main__.py``, or ``if __name__ == "__main__"``)."""
    found = set()
    for top in ("bringup", "control", "facts", "sandbox"):
        for path in (ROOT / top).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if path.name == "__main__.py":
                found.add(".".join(path.parent.relative_to(ROOT).parts))
            elif re.search(r"^if __name__ == .__main__.:", text, re.M):
                found.add(".".join(path.with_suffix("").relative_to(ROOT).parts))
    return sorted(found)


def documented():
    """The modules the page's table names as ``python -m MODULE``."""
    return set(re.findall(r"`python -m ([\w.]+)", PAGE.read_text(encoding="utf-8")))


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)


def test_every_entry_point_is_in_the_table():
    points = entry_points()
    assert {"bringup.plan", "bringup.report", "bringup.explain", "control.locks"} <= set(points)
    assert set(points) - documented() == set(), "python -m entry points docs/exit-statuses.md does not name"


@pytest.mark.parametrize("module", entry_points())
def test_help_exits_zero_and_an_unknown_option_two(module):
    helped = run(module, "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: "), helped.stdout + helped.stderr
    wrong = run(module, "--no-such-option")
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr, wrong.stderr
    assert wrong.stdout == "" and "error:" in wrong.stderr.splitlines()[-1]


def test_plan_yes_no_and_bad_input(tmp_path):
    ready = run("bringup.plan", str(READY_FACTS), "--host", "gpu-01")
    assert ready.returncode == 0, ready.stderr
    assert ready.stdout.startswith("== gpu-01: READY TO DEPLOY\n") and "fix: " in ready.stdout
    blocked = run("bringup.plan", str(BLOCKED_FACTS), "--host", "b200-01")
    assert blocked.returncode == 1, blocked.stderr
    assert blocked.stdout.startswith("== b200-01: BLOCKED\n")
    assert "  [BLOCKER] FABRIC_MANAGER_MISSING: " in blocked.stdout
    assert "            fix: install Fabric Manager at the driver's version" in blocked.stdout
    document = run("bringup.plan", "--json", str(BLOCKED_FACTS))
    assert document.returncode == 1 and json.loads(document.stdout)["ok"] is False
    bad = tmp_path / "settings.yaml"
    bad.write_text("driver_reboot: always\n")
    for args in (["/nonexistent/facts.json"], [str(BLOCKED_FACTS), "--config", str(bad)], []):
        refused = run("bringup.plan", *args)
        assert refused.returncode == 2 and refused.stdout == "" and "Traceback" not in refused.stderr, refused


def test_plan_names_the_host_of_a_saved_report(tmp_path):
    report = tmp_path / "gpu-07.json"
    report.write_text(json.dumps({"host": "gpu-07", "facts": json.loads(BLOCKED_FACTS.read_text()), "plan": {}}))
    shown = run("bringup.plan", str(report))
    assert shown.returncode == 1 and shown.stdout.startswith("== gpu-07: BLOCKED\n"), shown.stderr


def test_report_renders_a_plan_document_and_says_yes_or_no(tmp_path):
    for facts, name, status, head in ((READY_FACTS, "ready", 0, "READY TO DEPLOY"),
                                      (BLOCKED_FACTS, "what-if", 1, "BLOCKED")):
        planned = run("bringup.plan", "--json", str(facts))
        (tmp_path / f"{name}.json").write_text(planned.stdout)
        shown = run("bringup.report", str(tmp_path / f"{name}.json"))
        assert shown.returncode == status, shown.stderr
        assert shown.stdout.startswith(f"== {name}: {head}\n  plan      : CUDA 13.0 at ")
    both = run("bringup.report", str(tmp_path / "ready.json"), str(tmp_path / "what-if.json"))
    assert both.returncode == 1 and "[BLOCKER] FABRIC_MANAGER_MISSING" in both.stdout
    (tmp_path / "list.json").write_text("[]")
    for args in (["--help"], [], [str(tmp_path / "list.json")], [str(tmp_path / "none.json")]):
        result = run("bringup.report", *args)
        assert result.returncode == (0 if args == ["--help"] else 2), result
        assert "Traceback" not in result.stderr and "No such file or directory" not in result.stderr.split(":")[0]


def test_explain_yes_no_and_bad_input():
    logs = sorted(FAILURES.glob("*.log"))
    assert logs, "tests/fixtures/failures/ holds the recorded failure logs"
    found = run("bringup.explain", str(logs[0]))
    assert found.returncode == 0, found.stdout + found.stderr
    unknown = run("bringup.explain", "-", stdin="nothing known here\n")
    assert unknown.returncode == 1, unknown.stdout
    missing = run("bringup.explain", "/nonexistent.log")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_a_file_that_is_no_json_is_bad_input_in_one_line_naming_it(tmp_path):
    """JSON nested past the parser's depth (RecursionError) or bytes that are no UTF-8:
    the report ended in a traceback with exit status 1 (a "no"), the planner called the
    first a bug of the tool and named no file for the second."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    for module in ("bringup.report", "bringup.plan"):
        for path in (deep, binary):
            result = run(module, str(path))
            lines = result.stderr.splitlines()
            assert result.returncode == 2 and result.stdout == "", (module, path, result)
            assert len(lines) == 1 and "Traceback" not in result.stderr and "bug of this tool" not in lines[0]
            assert f"{path} is not JSON" in lines[0], (module, lines)


def test_explain_refuses_a_settings_alias_bomb_and_survives_a_closed_pipe(tmp_path):
    """bringup.explain read --config with yaml.safe_load, not the bounded loader the
    planner uses: a settings file of aliases ran until killed (review class: bounds that
    are not bounds). Its report into a reader that went away (``| head -1``) ended in a
    BrokenPipeError traceback."""
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join([*lines, "venv_extra_index_urls: *a8"]) + "\n")
    log = tmp_path / "one.log"
    log.write_text("nothing known here\n")
    result = subprocess.run([sys.executable, "-m", "bringup.explain", str(log), "--config", str(bomb)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == "", result
    assert len(result.stderr.splitlines()) == 1 and "alias bomb" in result.stderr, result.stderr
    for module, path in (("bringup.explain", sorted(FAILURES.glob("*.log"))[0]), ("bringup.report", None)):
        if path is None:
            path = tmp_path / "plan.json"
            path.write_text(run("bringup.plan", "--json", str(BLOCKED_FACTS)).stdout)
        reader = subprocess.Popen([sys.executable, "-m", module, str(path)], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        reader.stdout.close()  # the reader went away before the first line (| head -0)
        _, stderr = reader.communicate(timeout=120)
        assert "Traceback" not in stderr and "Broken pipe" not in stderr, (module, stderr)
        assert reader.returncode in (0, 1), (module, reader.returncode)


def test_settings_page_says_a_page_not_utf8_is_bad_input(tmp_path):
    """--check of a file that is no UTF-8 ended in a UnicodeDecodeError traceback with exit
    status 1, which the table gives to "the table differs"."""
    page = tmp_path / "settings.md"
    page.write_bytes(b"\xff\xfe# settings\n")
    result = run("bringup.settings_page", "--check", str(page))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == f"{page}: cannot read it (not UTF-8: byte 0): name the settings page, docs/settings.md\n"


@pytest.mark.parametrize("flags", [("-y", "--no-wait"), ("--dry",), ("--json",)],
                         ids=["no-wait", "dry", "json-without-y"])
def test_a_refused_host_fails_the_run_in_one_line_however_it_runs(tmp_path, flags):
    """pyinfra's --no-wait stops a host at its first error without failing it, and gevent printed
    the stopped greenlet's traceback; a run that executes nothing (--dry, --json without -y)
    never ran the refusal: each exited 0 while the summary said 1. The run says no, in one line."""
    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = [("@local", {"target_sms": "12.0", "service_port": "x"})]\n')
    result = subprocess.run([str(Path(sys.executable).parent / "pyinfra"), *flags, str(inventory),
                             "deploy.py"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL, env={**os.environ, "GPU_BRINGUP_REPORTS": str(tmp_path / "r")})
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "@local: failed: @local: setting service_port='x' is invalid: use a TCP port number (1-65535)" in output


def test_an_operation_that_raises_under_no_wait_fails_its_host_and_is_printed(tmp_path):
    """Not pyinfra's own "Error in operation": an exception raised in an operation's body (a fact
    read at execution) is printed as gevent prints it, and the host fails (the run exited 0)."""
    inventory = tmp_path / "inventory.py"
    inventory.write_text("from control import fleet\nfleet.watch_connections()\nhosts = ['@local']\n")
    deploy = tmp_path / "deploy.py"
    deploy.write_text("from pyinfra.api import operation\nfrom pyinfra.api.exceptions import MissingCommandError\n\n\n"
                      "@operation()\ndef boom():\n    yield 'true'\n    raise MissingCommandError('no such tool here')\n\n\n"
                      "boom(name='boom')\n")
    result = subprocess.run([str(Path(sys.executable).parent / "pyinfra"), "-y", "--no-wait", str(inventory),
                             str(deploy)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "GPU_BRINGUP_REPORTS": str(tmp_path / "r")})
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "MissingCommandError: Command not found on remote host: no such tool here" in output, output[-3000:]
