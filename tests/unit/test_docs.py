"""The docs document every finding code (docs/findings.md), every setting with its default
(docs/settings.md) and every node check (docs/node-suite.md)."""

import re
from dataclasses import fields
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.findings import CODES

DOCS = Path(__file__).resolve().parents[2] / "docs"
FINDINGS = (DOCS / "findings.md").read_text()
SETTINGS = (DOCS / "settings.md").read_text()
NODE_SUITE = (DOCS / "node-suite.md").read_text()


@pytest.mark.parametrize("code", sorted(CODES))
def test_finding_code_is_documented(code):
    assert re.search(rf"^\| `{code}` \|", FINDINGS, re.M), f"{code} missing from docs/findings.md's table"


@pytest.mark.parametrize("setting", [item.name for item in fields(Config)])
def test_setting_is_documented_with_its_default(setting):
    row = re.search(rf"^\| `{setting}` \| (?P<default>[^|]+) \|", SETTINGS, re.M)
    assert row, f"{setting} missing from docs/settings.md's table"
    default = getattr(Config(), setting)
    if isinstance(default, bool):
        assert f"`{str(default).lower()}`" in row["default"]
    elif default and not isinstance(default, tuple):
        assert f"`{default}`" in row["default"]


def node_checks():
    """Every check of the node suite (tests/node/test_*.py), by name."""
    names = []
    for module in sorted((Path(__file__).resolve().parents[1] / "node").glob("test_*.py")):
        names += re.findall(r"^def test_(\w+)\(", module.read_text(), re.M)
    return names


@pytest.mark.parametrize("check", node_checks())
def test_node_check_is_documented(check):
    assert re.search(rf"^\| `{check}(\[[^`]*\])?` \|", NODE_SUITE, re.M), f"{check} missing from docs/node-suite.md's table"
