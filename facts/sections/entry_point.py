"""The ``entry_point`` section: the unit's ExecStart program as the kernel starts it -> ``entry_point``.

Its shell fragment is files/probe.d/entry_point.sh (``probe_entry_point``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import FILE_STATE, OPT_STR, STR, Optional
from facts.probe_framing import Key, ProbeSection, _file_state, parse_assignments


def entry_point(section):
    """The ``entry_point`` section -> the unit's ExecStart program as the kernel runs it
    (files/probe.d/entry_point.sh probe_entry_point): the script, its first line, the interpreter it
    names and that interpreter's state; None when the probe did not look.

    >>> from facts.probe_framing import Section
    >>> found = entry_point(Section("entry_point", 0, ("path", "/v/bin/sglang"), ["script=root 755 regular file",
    ...     "format=script", "line=#!/old/venv/bin/python", "wrapper=", "interpreter=/old/venv/bin/python", "interpreter_file=",
    ...     "interpreter_owner=", "interpreter_dir=", "venv_bin=/v/bin"]))
    >>> found["interpreter"], found["interpreter_file"], found["venv_bin"]
    ('/old/venv/bin/python', None, '/v/bin')
    """
    if section is None:
        return None
    path = section.attribute("path")
    values = parse_assignments(section.text) if section.rc == 0 else {}
    return {
        "path": path,
        "script": _file_state(values.get("script"), f"{path}"),
        "format": values.get("format"),
        "first_line": values.get("line"),
        "wrapper": values.get("wrapper"),
        "interpreter": values.get("interpreter"),
        "interpreter_file": _file_state(values.get("interpreter_file"), f"{path}'s interpreter"),
        "interpreter_owner": values.get("interpreter_owner"),
        "interpreter_dir": values.get("interpreter_dir"),
        "venv_bin": values.get("venv_bin"),
    }


SECTION = ProbeSection(
    name="entry_point",
    group=2,
    raw=("entry_point",),
    keys={
        # Absent from an older report.
        "entry_point": Key(
            parse=lambda by_name: entry_point(by_name.get("entry_point")),
            schema=Optional({
                "path": STR,
                "script": Optional(FILE_STATE),
                "format": OPT_STR,
                "first_line": OPT_STR,
                "wrapper": OPT_STR,
                "interpreter": OPT_STR,
                "interpreter_file": Optional(FILE_STATE),
                "interpreter_owner": OPT_STR,
                "interpreter_dir": OPT_STR,
                "venv_bin": OPT_STR,
            }),
            meaning=(
                "the program the unit's `ExecStart` runs (`<venv_path>/bin/sglang`) as the kernel starts it: the "
                "script and the interpreter its `#!` names; null (or absent) from an older probe"
            ),
        ),
    },
)
