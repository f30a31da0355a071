"""The probe's section registry (facts/sections/) is the one list: each registered section
has its shell fragment (files/probe.d/<name>.sh) defining ``probe_<name>`` and writing
exactly the raw sections it declares; every fragment is registered; the facts document's
keys, bringup/facts_schema.py's SCHEMA and docs/facts.md's top-level table are the
registry's keys, in its order; the assembled probe is one script with every section."""

import re
import subprocess
from pathlib import Path

from bringup.facts_schema import SCHEMA
from facts.probe_output import PARTS, REPEATED
from facts.probe_script import PROBE_D, probe_script, runner
from facts.sections import SECTIONS

ROOT = Path(__file__).resolve().parents[2]
# The lib.sh helpers that write a section named by their first argument.
WRITERS = re.compile(r"(?:^\s*|&& )(?:emit|capture|nvcc_section|driver_file) \"?([a-z-]+)\"? ", re.M)
FUNCTION = re.compile(r"^([a-z_]+)\(\) \{$", re.M)


def registry_keys():
    return [key for section in SECTIONS for key in section.keys]


def test_every_section_has_its_fragment_and_every_fragment_its_section():
    fragments = sorted(path.name for path in PROBE_D.glob("*.sh") if path.name != "lib.sh")
    assert fragments == sorted(section.fragment for section in SECTIONS)
    names = [section.name for section in SECTIONS]
    assert len(set(names)) == len(names)
    for section in SECTIONS:
        assert f"probe_{section.name}" in FUNCTION.findall((PROBE_D / section.fragment).read_text()), section.name


def test_each_fragment_writes_the_raw_sections_it_declares():
    """What a fragment writes (emit, capture, nvcc_section, driver_file) is what its module
    declares; no two sections write the same raw section; the repeated ones are its own."""
    for section in SECTIONS:
        written = set(WRITERS.findall((PROBE_D / section.fragment).read_text()))
        assert written == set(section.raw), section.name
        assert set(section.repeated) <= set(section.raw), section.name
    raw = [name for section in SECTIONS for name in section.raw]
    assert len(set(raw)) == len(raw)
    assert set(REPEATED) == {"toolkit", "path", "python-alt", "apt-source", "apt-keyring"}


def test_no_function_is_defined_twice_across_the_probe():
    """The fragments and the library share one shell namespace: a function defined twice
    would silently replace the first."""
    defined = FUNCTION.findall(probe_script())
    assert len(defined) == len(set(defined)), sorted(name for name in defined if defined.count(name) > 1)


def test_the_document_schema_and_facts_page_follow_the_registry():
    keys = registry_keys()
    assert list(PARTS) == keys
    assert list(SCHEMA) == keys
    top = (ROOT / "docs" / "facts.md").read_text().split("## Top level\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `(\w+)` \|", top, re.M) == keys
    for section in SECTIONS:
        for key, reads in section.reads.items():
            assert key in section.keys and section.name in reads, (section.name, key)
            assert set(reads) <= {other.name for other in SECTIONS}


def test_the_runner_runs_each_section_once_in_its_group():
    text = runner()
    calls = re.findall(r"probe_([a-z_]+);", text.split("else", 1)[0])
    assert sorted(calls) == sorted(section.name for section in SECTIONS)
    default = re.search(r"PROBE_SECTIONS:-([a-z_ ]+)\}", text).group(1).split()
    assert default == [section.name for section in SECTIONS]


def test_the_assembled_probe_is_valid_shell():
    result = subprocess.run(["sh", "-n"], input=probe_script(), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
