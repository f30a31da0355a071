"""Disabling the CUDA repository's entries in a shared apt source file: the editor
(bringup/apt_source_edit.py) edits by the stanzas and lines of the one parser
(bringup/apt_sources.py), and every result is read back by that parser and by apt itself
(``apt-get update --print-uris`` on a scratch configuration: offline, it parses the
sources and prints the index URIs it would fetch, or fails with "Malformed stanza")."""

import difflib
import shutil
import subprocess

import pytest

from bringup.apt_source_edit import SourceEditError, disabled
from bringup.apt_sources import deb822_problems, source_entries, source_problems

CUDA = "https://r.example/cuda/debian12/x86_64/"
DEBIAN = "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n"
CUDA_STANZA = f"Types: deb\nURIs: {CUDA}\nSuites: /\nSigned-By: /usr/share/keyrings/cuda-archive-keyring.gpg\n"
SOURCES = "/etc/apt/sources.list.d/mixed.sources"
LIST = "/etc/apt/sources.list"


def apt_reads(path, text, tmp_path):
    """(exit status, sorted InRelease URIs) of apt reading ``text`` as its only source file."""
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.skip("apt-get is not installed here")
    root = tmp_path / "apt"
    parts, lists, cache = root / "parts", root / "lists" / "partial", root / "cache"
    for directory in (parts, lists, cache):
        directory.mkdir(parents=True, exist_ok=True)
    name = "x.sources" if path.endswith(".sources") else "x.list"
    (parts / name).write_text(text)
    run = subprocess.run([apt, "-o", "Dir::Etc::sourcelist=/dev/null", "-o", f"Dir::Etc::sourceparts={parts}",
                          "-o", f"Dir::State::lists={lists.parent}", "-o", f"Dir::Cache={cache}",
                          "-o", "Debug::NoLocking=1", "-o", "APT::Architecture=amd64",
                          "-o", "APT::Architectures=amd64", "update", "--print-uris"],
                         capture_output=True, text=True)
    uris = sorted(line.split("'")[1] for line in run.stdout.splitlines() if line.startswith("'")
                  and line.split("'")[1].endswith("InRelease"))
    return run.returncode, uris, run.stdout + run.stderr


def release_uris(entries):
    """The InRelease URIs apt fetches for these entries (flat suites end in /)."""
    uris = set()
    for entry in entries:
        for uri in entry["uris"]:
            base = uri.rstrip("/") + "/"
            for suite in entry["suites"]:
                uris.add(base + (suite.lstrip("/") if suite.endswith("/") else f"dists/{suite}/") + "InRelease")
    return sorted(uris)


# name, file, text: each has enabled entries for CUDA and others that must survive
EDITS = [
    ("two blank lines before the CUDA stanza", SOURCES, DEBIAN + "\n\n" + CUDA_STANZA),
    ("three blank lines and a comment between", SOURCES, DEBIAN + "\n\n# NVIDIA\n\n" + CUDA_STANZA),
    ("the CUDA stanza first, blank lines at the end", SOURCES, "\n" + CUDA_STANZA + "\n\n" + DEBIAN + "\n\n"),
    ("comments between fields", SOURCES, DEBIAN + "\n" + CUDA_STANZA.replace("Suites:", "# a note\nSuites:")),
    ("a line of spaces inside a stanza is no separator", SOURCES,
     DEBIAN + "\n" + CUDA_STANZA.replace("Suites:", "   \nSuites:") + "\n" + DEBIAN.replace("main", "contrib")),
    ("a line of spaces between two blank lines", SOURCES, DEBIAN + "\n  \n\n" + CUDA_STANZA),
    ("Enabled: yes already there", SOURCES, DEBIAN + "\n" + CUDA_STANZA + "Enabled: yes\n"),
    ("Enabled: yes first, lower case, continued", SOURCES, DEBIAN + "\nenabled:\n yes\n" + CUDA_STANZA),
    ("several CUDA stanzas", SOURCES, CUDA_STANZA + "\n" + DEBIAN + "\n\n\n" + CUDA_STANZA.replace("deb", "deb-src", 1)),
    ("CRLF line ends", SOURCES, (DEBIAN + "\n" + CUDA_STANZA).replace("\n", "\r\n")),
    ("trailing spaces and tabs", SOURCES, (DEBIAN + "\n \t\n" + CUDA_STANZA).replace("\n", "  \n", 3)),
    ("no newline at the end", SOURCES, DEBIAN + "\n" + CUDA_STANZA.rstrip("\n")),
    ("one-line: a shared sources.list with a comment after the entry", LIST,
     f"deb http://deb.debian.org/debian bookworm main\n\ndeb [arch=amd64] {CUDA} / # NVIDIA's\n"),
    ("one-line: CRLF and the same entry twice", LIST,
     f"deb http://deb.debian.org/debian bookworm main\r\ndeb {CUDA} /\r\ndeb {CUDA} /\r\n"),
    ("one-line: a %-encoded URI is the same repository to apt", LIST,
     f"deb http://deb.debian.org/debian bookworm main\ndeb {CUDA[:-1]}%2F /\n"),
    ("one-line: a form feed is no line break to apt", LIST,
     f"deb http://deb.debian.org/debian bookworm main\x0ccontrib\ndeb {CUDA} /\n"),
]


@pytest.mark.parametrize("name,path,text", EDITS, ids=[e[0] for e in EDITS])
def test_disabling_leaves_a_file_apt_reads(name, path, text, tmp_path):
    before = source_entries({path: text})
    kept = [entry for entry in before if CUDA.rstrip("/") not in (u.rstrip("/") for u in entry["uris"])]
    assert kept != before and kept, "the case must have entries to disable and entries to keep"
    rc, uris, output = apt_reads(path, text, tmp_path)
    assert rc == 0 and uris == release_uris(before), output

    action, new_text = disabled(path, text, CUDA, "the repository's source is /etc/apt/sources.list.d/nvidia.sources")
    assert action == "rewrite"
    assert source_problems(path, new_text) == []
    assert source_entries({path: new_text}) == kept
    rc, uris, output = apt_reads(path, new_text, tmp_path)
    assert rc == 0, output
    assert uris == release_uris(kept), output
    # Only the disabled entries' lines changed: notes and Enabled: no added, Enabled
    # fields (with their continuation lines) dropped, one-line entries commented out.
    added, removed = changed_lines(text, new_text)
    if not text.endswith("\n"):
        added.remove("")  # the editor ends the file with a newline
    assert all(line.startswith("# Disabled by gpu-bringup (") or line.rstrip("\r") == "Enabled: no" for line in added)
    if path.endswith(".sources"):
        assert all(line.lower().startswith("enabled") or line.startswith(" ") for line in removed)
    else:
        assert [f"{line.strip()}" for line in removed] == [line.split("): ", 1)[1].rstrip("\r") for line in added]


def changed_lines(old, new):
    added, removed = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old.split("\n"), new.split("\n")).get_opcodes():
        if tag != "equal":
            removed += old.split("\n")[i1:i2]
            added += new.split("\n")[j1:j2]
    return added, removed

def test_two_blank_lines_disable_the_cuda_stanza_itself():
    """The bug: "\\n\\n" splitting put Enabled: no in an empty stanza between the blank lines."""
    _, new_text = disabled(SOURCES, DEBIAN + "\n\n" + CUDA_STANZA, CUDA, "r")
    assert new_text == DEBIAN + "\n\n# Disabled by gpu-bringup (r)\nEnabled: no\n" + CUDA_STANZA


def test_enabled_yes_is_replaced_not_shadowed():
    """apt takes the last of a repeated field: an Enabled: no above Enabled: yes changes nothing."""
    _, new_text = disabled(SOURCES, DEBIAN + "\n" + CUDA_STANZA + "Enabled: yes\n", CUDA, "r")
    assert new_text == DEBIAN + "\n# Disabled by gpu-bringup (r)\nEnabled: no\n" + CUDA_STANZA


def test_a_multi_line_reason_stays_one_comment():
    _, new_text = disabled(SOURCES, DEBIAN + "\n" + CUDA_STANZA, CUDA, "a\nTypes: deb")
    assert "# Disabled by gpu-bringup (a Types: deb)\nEnabled: no\n" in new_text


@pytest.mark.parametrize("path,text,expected", [
    (SOURCES, DEBIAN + "\n" + CUDA_STANZA + "Enabled: no\n", None),
    (SOURCES, DEBIAN + "\n" + CUDA_STANZA + "Enabled: off\n", None),
    (SOURCES, DEBIAN + "\n" + CUDA_STANZA + "Enabled: bogus\n", "rewrite"),  # apt: still enabled
    (LIST, f"deb http://deb.debian.org/debian bookworm main\n# deb {CUDA} /\n", None),
    (LIST, f"deb http://deb.debian.org/debian bookworm main #deb {CUDA} /\n", None),
])
def test_what_apt_does_not_read_is_not_an_entry(path, text, expected, tmp_path):
    change = disabled(path, text, CUDA, "r")
    assert (change and change[0]) == expected
    rc, uris, output = apt_reads(path, text, tmp_path)
    assert rc == 0 and (CUDA + "InRelease" in uris) == (expected is not None), output


BROKEN = DEBIAN.replace("debian", "debian-security").replace("bookworm", "bookworm-security")


@pytest.mark.parametrize("broken,problem", [
    ("Enabled: no\n", "stanza 2 (line 6): no Types"),
    (BROKEN.replace("Components: main\n", ""), "stanza 2 (line 6): a suite without Components"),
    (BROKEN.replace("Suites: bookworm-security", "Suites: /"), "Components with a flat suite"),
    (BROKEN.replace("Types: deb", "Types: rpm"), "type 'rpm' is not known"),
    (BROKEN.replace("URIs:", "junk\nURIs:"), "no URIs"),
], ids=["no Types", "no Components", "flat suite with Components", "unknown type", "a line without a colon"])
def test_a_file_apt_cannot_read_is_refused_in_one_line(broken, problem, tmp_path):
    """Our parser and apt agree that it is malformed, and the editor writes nothing."""
    text = DEBIAN + "\n" + broken + "\n" + CUDA_STANZA
    assert any(problem in line for line in deb822_problems(text)), deb822_problems(text)
    rc, _, output = apt_reads(SOURCES, text, tmp_path)
    assert rc != 0 and "E: " in output
    with pytest.raises(SourceEditError) as raised:
        disabled(SOURCES, text, CUDA, "r")
    message = str(raised.value)
    assert "\n" not in message and SOURCES in message and problem in message and "fix the file by hand" in message


@pytest.mark.parametrize("text", [
    DEBIAN + "   \n" + CUDA_STANZA,  # a line of spaces continues the field above: one stanza, the last URIs win
    DEBIAN + "# a comment is no separator\n" + CUDA_STANZA,
    DEBIAN + "\r\n\r\r\n" + CUDA_STANZA,  # lines of carriage returns are blank
    DEBIAN + "\n" + CUDA_STANZA + "Enabled: 0\n",
    DEBIAN + "\n" + CUDA_STANZA + "Enabled: no\nEnabled: yes\n",
    DEBIAN + "\n" + CUDA_STANZA + "Trusted: true\n",
    f"deb http://deb.debian.org/debian bookworm main contrib # deb {CUDA} /\n deb\t{CUDA} /  \n",
    f"deb http://deb.debian.org/debian \"bookworm\" main\ndeb [ arch=amd64 signed-by=/k ] {CUDA} /\n",
], ids=["spaces line", "comment between stanzas", "CR-only lines", "Enabled: 0", "last Enabled wins",
        "Trusted: true", "one-line comments and tabs", "one-line quotes and brackets"])
def test_the_parser_reads_what_apt_reads(text, tmp_path):
    """Where apt reads the file, the parser finds the same entries; where apt refuses it
    (the first two: one stanza with a flat suite and Components), the parser says why."""
    path = LIST if text.startswith("deb ") else SOURCES
    rc, uris, output = apt_reads(path, text, tmp_path)
    assert (rc == 0) == (source_problems(path, text) == []), output
    if rc == 0:
        assert release_uris(source_entries({path: text})) == uris, output
