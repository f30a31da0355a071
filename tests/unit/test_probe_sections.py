"""The probe's section registry (facts/sections/) is the one list: each registered section
has its shell fragment (files/probe.d/<name>.sh) defining ``probe_<name>`` and writing
exactly the raw sections it declares; every fragment is registered; what the generator
makes of the sections' keys (bringup/facts_keys.py, docs/facts.md's top-level table) is
what is checked in, and each key's example fits its schema; the assembled probe is one
script with every section."""

import re
import subprocess
from pathlib import Path

import pytest

from bringup import generated_block
from bringup.facts_schema import check
from facts.probe_output import REPEATED
from facts.probe_script import PROBE_D, probe_script, runner
from facts.sections import SECTIONS, generate

ROOT = Path(__file__).resolve().parents[2]
# The lib.sh helpers that write a section named by their first argument.
WRITERS = re.compile(r"(?:^\s*|&& )(?:emit|capture|nvcc_section|driver_file) \"?([a-z_-]+)\"? ", re.M)
FUNCTION = re.compile(r"^([a-z_]+)\(\) \{$", re.M)


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


def test_the_generated_files_are_what_the_registry_makes():
    stale = [str(path) for path, text in generate.generated().items() if (ROOT / path).read_text() != text]
    assert stale == [], f"run {generate.COMMAND}"


def test_each_example_fits_its_keys_schema():
    """The top-level table's examples are documents the planner accepts."""
    keys = {name: declared for section in SECTIONS for name, declared in section.keys.items()}
    for name, declared in keys.items():
        if declared.example is not None:
            check({"os": keys["os"].example, "gpus": [], name: declared.example})


def test_a_key_is_declared_once():
    names = [name for section in SECTIONS for name in section.keys]
    assert len(set(names)) == len(names)


def test_each_keys_reads_name_registered_sections():
    for section in SECTIONS:
        for key, reads in section.reads.items():
            assert key in section.keys and section.name in reads, (section.name, key)
            assert set(reads) <= {other.name for other in SECTIONS}


def copy_generated(root):
    """The generator's outputs as checked in, under ``root``."""
    for path in generate.generated():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text((ROOT / path).read_text())
        (root / path).chmod(0o644)


def test_check_names_a_stale_file_and_the_generator_writes_it_whole(tmp_path, capsys):
    copy_generated(tmp_path)
    page = tmp_path / "docs" / "facts.md"
    text = page.read_text()
    page.write_text(text.replace("| `os` | object |", "| `os` | dict |"))
    assert generate.main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().err == f"docs/facts.md: not what the section registry makes: run {generate.COMMAND}\n"
    assert generate.main([], root=tmp_path) == 0
    assert page.read_text() == text and oct(page.stat().st_mode & 0o777) == "0o644"
    assert generate.main(["--check"], root=tmp_path) == 0 and capsys.readouterr().err == ""


def test_a_page_without_the_markers_is_refused_in_one_line(tmp_path, capsys):
    copy_generated(tmp_path)
    (tmp_path / "docs" / "facts.md").write_text("# The facts document\n")
    assert generate.main([], root=tmp_path) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "markers" in error
    assert (tmp_path / "docs" / "facts.md").read_text() == "# The facts document\n"


def test_a_write_that_fails_is_one_line_and_leaves_the_file_and_no_stage(tmp_path, capsys, monkeypatch):
    copy_generated(tmp_path)
    page = tmp_path / "docs" / "facts.md"
    stale = page.read_text().replace("| `os` | object |", "| `os` | dict |")
    page.write_text(stale)

    def full(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(generated_block.os, "replace", full)
    assert generate.main([], root=tmp_path) == 2
    assert capsys.readouterr().err == "docs/facts.md: cannot write it (No space left on device); nothing of it changed\n"
    assert page.read_text() == stale and sorted(path.name for path in page.parent.iterdir()) == ["facts.md"]


def test_a_kind_the_schema_does_not_define_is_named():
    with pytest.raises(ValueError, match="not a kind of bringup/facts_kinds.py: <class 'float'>"):
        generate.one_line({"ratio": float})


def test_the_runner_runs_each_section_once_in_its_group():
    text = runner()
    calls = re.findall(r"probe_([a-z_]+);", text.split("else", 1)[0])
    assert sorted(calls) == sorted(section.name for section in SECTIONS)
    default = re.search(r"PROBE_SECTIONS:-([a-z_ ]+)\}", text).group(1).split()
    assert default == [section.name for section in SECTIONS]


def test_the_assembled_probe_is_valid_shell():
    result = subprocess.run(["sh", "-n"], input=probe_script(), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
