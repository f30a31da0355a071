"""One declaration per setting (bringup/settings.py): ``Config``'s fields, the schema and
docs/settings.md's table all come from it; a setting declared twice is an error."""

import re
import subprocess
import sys
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest

from bringup import config, settings, settings_page
from bringup import setting_checks as checks
from bringup.config import Config

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "settings.md"


def test_no_setting_is_declared_twice_in_the_source():
    """service_args was declared in SCHEMA and silently replaced by a later ``SCHEMA |=``."""
    names = []
    for module in ("bringup/config.py", "bringup/settings.py"):
        path = ROOT / module
        if path.exists():
            source = path.read_text()
            names += re.findall(r'"([a-z]+_[a-z_]+)": (?:checks\.)?[A-Z_]\w*\(', source)  # a SCHEMA literal's keys
            names += re.findall(r'^\s+Setting\("(\w+)"', source, re.MULTILINE)  # declarations
    assert names and [name for name, count in Counter(names).items() if count > 1] == []


def test_a_duplicate_declaration_is_an_error():
    one = settings.Setting("service_args", checks.Arguments(), "", meaning="extra arguments")
    with pytest.raises(ValueError, match="service_args is declared twice"):
        settings.declare([one, settings.Setting("service_port", checks.Port(), "30000", meaning="port"), one])


@pytest.mark.parametrize("name,why", [
    ("tp_size", "none of the prefixes"),  # a typo of it would never be named as unknown
    ("service_layout", "Config already has"),  # it would hide an attribute of Config's own
    ("service_Port", "lower-case"),
])
def test_a_declaration_config_could_not_hold_is_an_error(name, why):
    with pytest.raises(ValueError, match=why):
        settings.declare([settings.Setting(name, checks.Port(), "1", meaning="x")],
                         reserved=[*dir(Config), "service_layout"])


def test_config_schema_and_defaults_come_from_the_declarations():
    declared = list(settings.SETTINGS.values())
    assert [item.name for item in fields(Config)] == [item.name for item in declared]
    assert config.SCHEMA == {item.name: item.check for item in declared}
    assert all(getattr(Config(), item.name) == item.default for item in declared)
    assert all(field.type is type(item.default) for field, item in zip(fields(Config), declared, strict=True))


@pytest.mark.parametrize("item", [item for item in settings.SETTINGS.values() if item.name != "service_env"],
                         ids=lambda item: item.name)
def test_every_default_passes_its_own_check(item):
    """(service_env's default is the empty tuple its check makes of "" or {}.)"""
    assert item.check(item.default) == item.default


def test_the_settings_page_table_is_the_declarations():
    block = settings_page.docs_block(DOCS.read_text())
    assert block == settings_page.markdown_table(), ("docs/settings.md's table is not the declarations': "
                                                "python -m bringup.settings_page --write docs/settings.md")


def test_the_docs_are_rewritten_whole_by_the_module(tmp_path):
    page = tmp_path / "settings.md"
    text = DOCS.read_text()
    page.write_text(text.replace("| `stack_torch` | `2.14.1` |", "| `stack_torch` | `9.9` |"))
    page.chmod(0o644)
    run = [sys.executable, "-m", "bringup.settings_page"]
    result = subprocess.run([*run, "--check", str(page)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "--write" in result.stderr, result
    result = subprocess.run([*run, "--write", str(page)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert page.read_text() == text and oct(page.stat().st_mode & 0o777) == "0o644"
    result = subprocess.run([*run, "--check", str(page)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_a_page_without_the_markers_is_refused_in_one_line(tmp_path):
    page = tmp_path / "settings.md"
    page.write_text("# Settings\n")
    result = subprocess.run([sys.executable, "-m", "bringup.settings_page", "--write", str(page)], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "marker" in result.stderr, result
    assert page.read_text() == "# Settings\n"


@pytest.mark.parametrize("default,shown", [
    (True, "`true`"), (False, "`false`"), (900, "`900`"), ("uv", "`uv`"), ("", "(empty)"), ((), "`[]`"),
    (("repo", "driver"), "`repo, driver`"),
])
def test_a_default_is_shown_as_the_page_writes_it(default, shown):
    assert settings.Setting("report_x", checks.Check(), default, meaning="m").shown_default == shown
