"""Docs an operator reads in five minutes: the project's own words are in the glossary
(docs/glossary.md, linked from the README), the operator pages speak of pyinfra's
behaviour and not of its internals (those are docs/contributing.md's), and no page
states a count of tests, cases or locks that drifts as they are added."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GLOSSARY = DOCS / "glossary.md"
OPERATOR_PAGES = [ROOT / "README.md", *(page for page in sorted(DOCS.glob("*.md")) if page.name != "contributing.md")]
JARGON = ("the incident", "trap", "stand-in", "field state", "the gate", "finding", "blocker", "verdict",
          "the plan", "pre-warm", "lock", "release", "control machine", "the sandbox", "the node suite")
# pyinfra's internals: private names and its source files.
INTERNALS = re.compile(r"(?<![\w:])_run_\w+|State\.fail_hosts|fail_hosts|_set_fail_prompts|_get_inventory_pattern_matches|"
                       r"pyinfra_cli/|pyinfra/api/")
COUNT = re.compile(r"(?<!-n )\b\d+ (?:tests|cases|locks)\b")  # not pytest's "-n 2 tests/unit"


def glossary_words():
    return re.findall(r"\*\*([^*]+)\*\*", GLOSSARY.read_text())


@pytest.mark.parametrize("word", JARGON)
def test_the_projects_words_are_in_the_glossary(word):
    assert word in glossary_words(), f"docs/glossary.md does not say what {word!r} means"


def test_the_readme_links_the_glossary():
    assert "(docs/glossary.md)" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("page", OPERATOR_PAGES, ids=lambda page: page.name)
def test_operator_pages_name_no_pyinfra_internals(page):
    assert INTERNALS.findall(page.read_text()) == [], f"{page.name}: move these to docs/contributing.md"


@pytest.mark.parametrize("page", [*OPERATOR_PAGES, DOCS / "contributing.md", ROOT / "tests" / "README.md"],
                         ids=lambda page: page.name)
def test_no_count_that_drifts(page):
    assert COUNT.findall(page.read_text()) == []
