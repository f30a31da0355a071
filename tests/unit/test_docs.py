"""The README documents every finding code, every setting with its default and every node check."""

import re
from dataclasses import fields
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.findings import CODES

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("code", sorted(CODES))
def test_finding_code_is_documented(code):
    assert re.search(rf"^\| `{code}` \|", README, re.M), f"{code} missing from README's findings table"


@pytest.mark.parametrize("setting", [item.name for item in fields(Config)])
def test_setting_is_documented_with_its_default(setting):
    row = re.search(rf"^\| `{setting}` \| (?P<default>[^|]+) \|", README, re.M)
    assert row, f"{setting} missing from README's settings table"
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
    assert re.search(rf"^\| `{check}(\[[^`]*\])?` \|", README, re.M), f"{check} missing from README's node suite table"
