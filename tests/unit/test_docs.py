"""The docs document every finding code (docs/findings.md) and every node check
(docs/node-suite.md). docs/settings.md's table is generated from the settings'
declarations (tests/unit/test_settings.py)."""

import re
from pathlib import Path

import pytest

from bringup.findings import CODES

DOCS = Path(__file__).resolve().parents[2] / "docs"
FINDINGS = (DOCS / "findings.md").read_text()
NODE_SUITE = (DOCS / "node-suite.md").read_text()


@pytest.mark.parametrize("code", sorted(CODES))
def test_finding_code_is_documented(code):
    assert re.search(rf"^\| `{code}` \|", FINDINGS, re.M), f"{code} missing from docs/findings.md's table"


def node_checks():
    """Every check of the node suite (tests/node/test_*.py), by name."""
    names = []
    for module in sorted((Path(__file__).resolve().parents[1] / "node").glob("test_*.py")):
        names += re.findall(r"^def test_(\w+)\(", module.read_text(), re.M)
    return names


@pytest.mark.parametrize("check", node_checks())
def test_node_check_is_documented(check):
    assert re.search(rf"^\| `{check}(\[[^`]*\])?` \|", NODE_SUITE, re.M), f"{check} missing from docs/node-suite.md's table"
