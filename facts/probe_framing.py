"""The probe's framing, shared by every section's parser (facts/sections/): the probe
writes each section as a header ``@@ <name> rc=<exit> [key=value]`` and its body lines
behind ``|`` (files/probe.d/lib.sh ``emit``); the helpers read those and the lines most
sections share (``KEY=value``, ``nvcc --version``, ``stat`` lines). ``ProbeSection``, with a
``Key`` per document key, is what each section module declares (facts/sections/__init__.py
lists them).

Pure functions: malformed input raises ValueError; the fact turns it into pyinfra's
FactProcessError so only that host fails.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field

SECTION_HEADER = re.compile(r"^@@ (?P<name>[a-z_-]+) rc=(?P<rc>-?\d+)(?: (?P<key>[a-z_]+)=(?P<value>.*))?$")
# The probe writes every body line behind this mark (files/probe.d/lib.sh emit): a line a
# program printed can never start a section, whatever it holds.
BODY_MARK = "|"
# Longest piece of a bad line quoted in an error (one line per host, never a dump).
QUOTE_LIMIT = 120
NVCC_RELEASE = re.compile(r"release (\d+\.\d+),")


@dataclass
class Section:
    """One ``@@ name rc=N [key=value]`` block of probe output and its body lines."""

    name: str
    rc: int
    attr: tuple = ()
    lines: list = field(default_factory=list)

    @property
    def text(self):
        return "\n".join(self.lines)

    def attribute(self, key):
        """The header's ``key=value``, which this section must have.

        >>> Section("path", 0, ("role", "venv")).attribute("role")
        'venv'
        """
        if not self.attr or self.attr[0] != key:
            raise ValueError(f"probe section {self.name} has no {key}= in its header")
        return self.attr[1]


def _quoted(line):
    """A line as an error quotes it: repr, cut to QUOTE_LIMIT characters.

    >>> _quoted("x" * 200)[-4:]
    "...'"
    """
    return repr(line[:QUOTE_LIMIT]) if len(line) <= QUOTE_LIMIT else repr(line[:QUOTE_LIMIT])[:-1] + "...'"


def split_sections(lines):
    """Split probe output into Sections: a header (``@@ name rc=N [key=value]``), then
    its body lines, each behind ``|`` (stripped here). An unmarked line, a marked line
    before the first header or a malformed header is an error: no program the probe
    runs can open a section or hide its output among the probe's.

    >>> [(s.name, s.lines) for s in split_sections(["@@ uname rc=0", "|x86_64"])]
    [('uname', ['x86_64'])]
    """
    sections = []
    for number, line in enumerate(lines, 1):
        if line.startswith(BODY_MARK) and sections:
            sections[-1].lines.append(line[len(BODY_MARK):])
        elif line.startswith("@@ "):
            match = SECTION_HEADER.match(line)
            if not match:
                raise ValueError(f"probe output line {number} is a malformed section header: {_quoted(line)}")
            attr = (match["key"], match["value"]) if match["key"] else ()
            sections.append(Section(match["name"], int(match["rc"]), attr))
        elif line.strip():
            where = "does not start with a section header" if not sections else "has a line outside the probe's framing"
            raise ValueError(f"probe output {where} (line {number}): {_quoted(line)}")
    return sections


def parse_nvcc_release(text):
    """The ``X.Y`` release ``nvcc --version`` prints, or None.

    >>> parse_nvcc_release("Cuda compilation tools, release 12.8, V12.8.93")
    '12.8'
    """
    match = NVCC_RELEASE.search(text or "")
    return match.group(1) if match else None


def parse_assignments(text):
    """``KEY=value`` lines -> dict, empty values kept as None. Lines are the body's lines as
    the framing has them (split at ``\\n`` only): a value that holds a carriage return or
    another of str.splitlines()' separators (a script's first line) stays one value and
    cannot set a key written before it.

    >>> parse_assignments("CUDA_HOME=\\nvia=PATH")
    {'CUDA_HOME': None, 'via': 'PATH'}
    >>> parse_assignments("script=nobody 777 regular file\\nline=#!/bin/sh\\rscript=root 755 regular file")["script"]
    'nobody 777 regular file'
    """
    values = {}
    for line in text.split("\n"):
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value or None
    return values


def _file_state(text, what):
    """``owner mode kind`` (``stat -L -c '%U %a %F'``) -> {"user", "mode", "kind"}; None
    for "" (nothing there).

    >>> _file_state("root 755 regular file", "script")
    {'user': 'root', 'mode': '755', 'kind': 'regular file'}
    """
    if not text:
        return None
    fields = text.split(" ", 2)
    if len(fields) != 3 or not fields[1].isdigit():
        raise ValueError(f"unexpected {what} state: {_quoted(text)}")
    return dict(zip(("user", "mode", "kind"), fields))


def _stat_line(line, what):
    """``owner mode kind|path`` (files/probe.d/lib.sh path_chain: stat -c '%U %a %F|%n') ->
    {"path", "user", "mode", "kind"}; ``what`` names the line in the error.

    >>> _stat_line("root 755 directory|/opt", "path line")
    {'path': '/opt', 'user': 'root', 'mode': '755', 'kind': 'directory'}
    """
    attributes, _, path = line.partition("|")
    fields = attributes.split(" ", 2)
    if len(fields) != 3 or not fields[1].isdigit():
        raise ValueError(f"unexpected {what}: {_quoted(line)}")
    user, mode, kind = fields
    return {"path": path, "user": user, "mode": mode, "kind": kind}


@dataclass(frozen=True)
class Key:
    """One key of the facts document, declared by the section that makes it: ``parse``
    makes its value (``by_name`` -> value), ``schema`` is the kind the planner checks it
    against (bringup/facts_kinds.py), ``meaning`` and ``example`` are its row of
    docs/facts.md's top-level table (``example`` None: the key's own table there shows
    one); ``required``: a document without it is refused; ``partial``: its objects may
    lack fields (an older probe's, or fields present only on one outcome).

    >>> Key(parse=len, schema=int, meaning="how many").example is None
    True
    """

    parse: Callable
    schema: object
    meaning: str
    example: object = None
    required: bool = False
    partial: bool = False


@dataclass(frozen=True)
class ProbeSection:
    """One section of the probe, declared once in its module under facts/sections/: its
    shell fragment is files/probe.d/<name>.sh, whose ``probe_<name>`` function writes the
    raw sections ``raw`` (``repeated``: those it writes once per item); ``keys`` maps each
    key of the facts document it makes to its ``Key`` (parser, schema, docs row), ``reads`` the
    probe sections a key's parser reads where more than its own (in probe order); ``group``
    is the group it runs in when the whole probe runs (facts/probe_script.py).

    >>> section = ProbeSection(name="os", group=1, raw=("os-release", "uname"), keys={})
    >>> section.sections_for("os"), section.fragment
    (('os',), 'os.sh')
    """

    name: str
    group: int
    raw: tuple
    keys: dict
    repeated: tuple = ()
    reads: dict = field(default_factory=dict)

    @property
    def fragment(self):
        """Its shell fragment's name in files/probe.d/."""
        return f"{self.name}.sh"

    def sections_for(self, key):
        """The probe sections ``key``'s parser reads."""
        return self.reads.get(key, (self.name,))
