"""The README links every page of docs/, and every relative link in the README, docs/,
tests/README.md and bench/README.md reaches a file that exists (and, for a Markdown
file, the heading its #anchor names)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINKING = [README, *PAGES, ROOT / "tests" / "README.md", ROOT / "bench" / "README.md"]

# [text](target): inline links only; code spans and fenced blocks hold no links.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def links(path):
    """Relative link targets of a Markdown file, as written.

    >>> import tempfile; page = Path(tempfile.mkdtemp()) / "p.md"
    >>> _ = page.write_text("[a](x.md#b) `[c](d.md)` [e](https://f) [g](#h)")
    >>> links(page)
    ['x.md#b', '#h']
    """
    text = CODE.sub("", FENCE.sub("", path.read_text()))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def anchors(path):
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation gone,
    blanks to ``-``.

    >>> import tempfile; page = Path(tempfile.mkdtemp()) / "p.md"
    >>> _ = page.write_text("# Locks (`make lock`)\\n## Explain a failed start\\n")
    >>> sorted(anchors(page))
    ['explain-a-failed-start', 'locks-make-lock']
    """
    text = FENCE.sub("", path.read_text())
    headings = re.findall(r"^#{1,6} (.+?)\s*$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(README.parent / target.split("#")[0]).resolve() for target in links(README)}
    unlinked = [page.name for page in PAGES if page.resolve() not in linked]
    assert PAGES and unlinked == [], f"docs/ pages the README does not link: {unlinked}"


@pytest.mark.parametrize("path", LINKING, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(path):
    broken = []
    for target in links(path):
        name, _, anchor = target.partition("#")
        dest = (path.parent / name).resolve() if name else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert broken == [], f"{path.relative_to(ROOT)}: {broken}"
