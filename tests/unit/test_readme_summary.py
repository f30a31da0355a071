"""The README's and docs/fleets.md's fleet summary example is what bringup/summary.py
prints (rows collapsed to ``...`` aside), the README's verdict list and fleets.md's
verdict table name every verdict the summary can print, and the table's exit status
column is the code's (``good_verdicts``): as tests/unit/test_steps.py does for the step
list."""

import re
from pathlib import Path

import pytest

from bringup import summary
from bringup.steps import STEPS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FLEETS = ROOT / "docs" / "fleets.md"

GPUS = [{"compute_cap": "12.0"}] * 8
FACTS = {"gpus": GPUS, "driver": {"version": "580.95.05"}, "resolution": {"version": "12.8"}}
FIXES = ["TOOLKIT_MISSING", "JIT_CACHE_COLD"]
PLAN = {"ok": True, "toolkit": {"version": "13.0"}, "service": {"enable": True},
        "findings": [{"code": code, "severity": "fix", "message": "m", "fix": "f"} for code in FIXES]}
TASK = {step.name: step.tasks[0] for step in STEPS}
CHANGED = [{"name": f"{TASK[name]} | op {index}", "status": "changed", "error": ""}
           for name, count in (("repo", 3), ("toolkit", 2), ("env", 4)) for index in range(count)]
APT_ERROR = "fl-09: apt is still locked after 20 s; ..."


def example_outcomes():
    """Ten hosts of a deploy: eight serving, one whose apt stayed locked, one down."""
    serving = [{"host": f"fl-{index:02}", "facts": FACTS, "plan": PLAN, "operations": CHANGED, "reached": True,
                "service_serving": {"state": "serving", "reason": "/health answered 200", "waited": 90}}
               for index in range(1, 9)]
    locked = {"host": "fl-09", "facts": FACTS, "plan": PLAN, "reached": True, "failed": True,
              "operations": [{"name": "apt locks | Wait for apt's and dpkg's locks", "status": "error",
                              "error": APT_ERROR}]}
    down = {"host": "fl-10", "reached": False, "connect_error": "Could not connect (timed out)"}
    return [*serving, locked, down]


def printed_example():
    """The summary as deploy.py prints it, the rows between the first and the last two
    hosts collapsed to ``...``."""
    lines = summary.render(summary.summary_document("deploy", example_outcomes())).splitlines()
    rows = [index for index, line in enumerate(lines) if re.match(r"fl-0[2-8] ", line)]
    return "\n".join(lines[:rows[0]] + ["..."] + lines[rows[-1] + 1:])


def example_in(page):
    blocks = re.findall(r"^```\n(== fleet summary: .*?)^```", page.read_text(), re.S | re.M)
    assert blocks, f"{page.name} has no fleet summary example"
    return blocks[0].rstrip("\n")


@pytest.mark.parametrize("page", [README, FLEETS], ids=lambda page: page.name)
def test_the_summary_example_is_what_the_summary_prints(page):
    assert example_in(page) == printed_example()


def test_the_readme_lists_every_verdict():
    text = README.read_text()
    listed = re.search(r"^Verdicts: (.*?\(both\))", text, re.S | re.M)
    assert listed, "README: no 'Verdicts: ...' list"
    named = re.findall(r"`([a-z ]+)`", listed.group(1))
    assert sorted(set(named)) == sorted(summary.VERDICTS)


def verdict_table():
    """fleets.md's verdict table: verdict -> its exit status cell."""
    text = FLEETS.read_text().split("## Verdicts", 1)[1]
    rows = re.findall(r"^\| `([a-z ]+)` \| .*? \| ([^|]+) \| [^|]+ \|$", text, re.M)
    return {verdict: cell.strip() for verdict, cell in rows}


def test_one_verdict_table_with_every_verdict_and_its_exit_status():
    table = verdict_table()
    assert list(table) == list(summary.VERDICTS)  # in the order the summary groups them
    for verdict, cell in table.items():
        if verdict == summary.ROLLED_BACK:
            assert cell == "deploy.py 1 (the change is not live); rollback.py 0"
            assert verdict in summary.good_verdicts("rollback") and verdict not in summary.good_verdicts("deploy")
        else:
            assert cell == ("0" if verdict in summary.GOOD else "1"), verdict
