"""docs/findings.md's severity column held to the planner's: every severity the planner
gives a code (on the scenario table of tests/unit/test_plan.py and on every recorded
facts document under tests/fixtures/facts/, with the default settings) is named in that
code's row, and a row that names one severity alone names the planner's."""

import json
import re
from pathlib import Path

from bringup.config import Config
from bringup.findings import SEVERITIES
from bringup.plan import plan
from tests.unit.test_plan import EXACT_FINDINGS

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "fixtures" / "facts"


def documented():
    """code -> the severities its docs/findings.md row names."""
    text = (ROOT / "docs" / "findings.md").read_text()
    table = text.split("| code | severity | meaning |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \| ([^|]+) \|", table, re.M)
    return {code: set(re.findall(r"\b(" + "|".join(SEVERITIES) + r")\b", cell)) for code, cell in rows}


def planned():
    """code -> the severities the planner gives it."""
    seen = {}
    for findings in EXACT_FINDINGS.values():
        for entry in findings:
            code, severity = entry.split(":")
            seen.setdefault(code, set()).add(severity)
    for path in sorted(FACTS.rglob("*.json")):
        facts = json.loads(path.read_text())
        if not isinstance(facts, dict) or "os" not in facts:
            continue
        for finding in plan(facts, Config.from_data({})).findings:
            seen.setdefault(finding.code, set()).add(finding.severity)
    return seen


def test_every_planned_severity_is_the_documented_one():
    docs, seen = documented(), planned()
    assert len(seen) > 20
    wrong = {code: (sorted(severities), sorted(docs.get(code, ())))
             for code, severities in seen.items() if not severities <= docs.get(code, set())}
    assert wrong == {}, "code: (the planner's severities, docs/findings.md's)"
