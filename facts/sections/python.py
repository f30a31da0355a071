"""The ``python`` section: the node's CPythons and the operator's ``venv_python`` -> ``python``, ``python_interpreters``, ``venv_python``.

Its shell fragment is files/probe.d/python.sh (``probe_python``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import FILE_STATE, INT, OPT_STR, STR, VERSION, Items, Optional
from facts.probe_framing import Key, ProbeSection, _file_state, parse_assignments


def _python(by_name):
    python = by_name.get("python")
    return {"version": python.text.split()[-1]} if python and python.rc == 0 and python.text.strip() else None


def python_interpreters(sections):
    """``python-alt`` sections -> [{"path", "version"}] of the interpreters that answered.

    >>> from facts.probe_framing import Section
    >>> python_interpreters([Section("python-alt", 0, ("path", "/usr/bin/python3.11"), ["Python 3.11.0rc1"])])
    [{'path': '/usr/bin/python3.11', 'version': '3.11.0rc1'}]
    """
    return [{"path": s.attribute("path"), "version": s.text.split()[-1]}
            for s in sections if s.rc == 0 and s.text.strip()]


def venv_python(section):
    """The ``venv-python`` section -> the operator's CPython (``venv_python``) as the probe
    found it (files/probe.d/python.sh probe_venv_python): its state, who may change it and the
    first path that lets them (``blocked``: it, a link on its way, a directory above them
    or a file it loads from its prefix, files/root-may-run.sh; None: root alone), and,
    only when it ran, what it said; None when the setting is empty.

    >>> from facts.probe_framing import Section
    >>> found = venv_python(Section("venv-python", 0, ("path", "/opt/py/bin/python3.11"), [
    ...     "file=root 755 regular file", "owner=", "real=/opt/py/bin/python3.11", "ran=0", "version=3.11.2",
    ...     "releaselevel=final", "pip=22.3.1", "venv=ok"]))
    >>> found["file"]["user"], found["owner"], found["ran"], found["version"], found["venv"]
    ('root', None, 0, '3.11.2', 'ok')
    """
    if section is None:
        return None
    values = parse_assignments(section.text)
    ran = values.get("ran")
    return {
        "path": section.attribute("path"),
        "file": _file_state(values.get("file"), f"{section.attribute('path')}"),
        "owner": values.get("owner"),
        "blocked": values.get("blocked"),
        "real": values.get("real"),
        "ran": int(ran) if ran and ran.isdigit() else None,
        "version": values.get("version"),
        "releaselevel": values.get("releaselevel"),
        "pip": values.get("pip"),
        "venv": values.get("venv"),
    }


SECTION = ProbeSection(
    name="python",
    group=3,
    raw=("python", "python-alt", "venv-python"),
    repeated=("python-alt",),
    keys={
        "python": Key(
            parse=_python,
            schema=Optional({"version": VERSION}),
            meaning="the node's `python3`; null without one",
            example={"version": "3.11.2"},
        ),
        "python_interpreters": Key(
            parse=lambda by_name: python_interpreters(by_name["python-alt"]),
            schema=Items({"path": STR, "version": VERSION}),
            meaning=(
                "every `/usr/bin/python3.N` that answers `--version` (the distribution's versioned CPythons, "
                "`python3`'s own included)"
            ),
        ),
        # Null when the setting is empty; version and the rest only from one that ran
        # (root's alone); blocked is absent from an older report (partial).
        "venv_python": Key(
            parse=lambda by_name: venv_python(by_name.get("venv-python")),
            schema=Optional({
                "path": STR,
                "file": Optional(FILE_STATE),
                "owner": OPT_STR,
                "blocked": OPT_STR,
                "real": OPT_STR,
                "ran": Optional(INT),
                "version": OPT_STR,
                "releaselevel": OPT_STR,
                "pip": OPT_STR,
                "venv": OPT_STR,
            }),
            meaning=(
                "the operator's CPython (the `venv_python` setting) as the probe found it; null when the setting is "
                "empty"
            ),
            partial=True,
        ),
    },
)
