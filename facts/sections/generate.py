"""What the section registry (facts/sections/) makes of its keys' declarations, written
into the files that cannot import it: bringup/facts_keys.py (the planner's ``SCHEMA``,
``REQUIRED`` and ``PARTIAL``: bringup/ never imports facts/) and docs/facts.md's
top-level table (between its markers).

``python -m facts.sections.generate`` writes both, each whole (a new file renamed over
it, its mode kept); ``--check`` writes nothing and exits 1 with a line naming each file
that is not what it would write (tests/unit/test_probe_sections.py fails then too).
"""

import argparse
import json
import sys
from pathlib import Path

from bringup.facts_kinds import ANY, BOOL, INT, OPT_STR, OPT_VERSION, STR, VERSION, Items, Optional, Values, described
from bringup.generated_block import with_block, write_whole
from facts.sections import MODULES

ROOT = Path(__file__).resolve().parents[2]
KEYS_MODULE = Path("bringup/facts_keys.py")
FACTS_PAGE = Path("docs/facts.md")
COMMAND = "python -m facts.sections.generate"
BEGIN = f"<!-- generated: {COMMAND} -->"
END = "<!-- end generated -->"
# The generated module's lines stay within the project's width.
WIDTH = 120
# bringup/facts_kinds.py's names for its kinds, as the generated module imports them
# (the Optional ones before a plain Optional(...) would be written).
ATOMS = (("OPT_STR", OPT_STR), ("OPT_VERSION", OPT_VERSION), ("STR", STR), ("INT", INT), ("BOOL", BOOL),
         ("ANY", ANY), ("VERSION", VERSION))
WRAPPERS = (Optional, Items, Values)


def atom_name(kind):
    """The name bringup/facts_kinds.py gives ``kind``, or None for an object or a wrapper.

    >>> atom_name(Optional(STR)), atom_name(Optional(INT))
    ('OPT_STR', None)
    """
    return next((name for name, atom in ATOMS if kind == atom), None)


def wrapped(kind):
    """``kind``'s wrapper's name and what it wraps; a kind bringup/facts_kinds.py does not
    define is an error naming it.

    >>> wrapped(Items(STR))
    ('Items', <class 'str'>)
    """
    if not isinstance(kind, WRAPPERS):
        raise ValueError(f"not a kind of bringup/facts_kinds.py: {kind!r}")
    return type(kind).__name__, kind.kind


def one_line(kind):
    """``kind`` as Python source on one line.

    >>> one_line(Optional({"path": STR, "version": OPT_VERSION}))
    'Optional({"path": STR, "version": OPT_VERSION})'
    """
    if atom_name(kind):
        return atom_name(kind)
    if isinstance(kind, dict):
        return "{" + ", ".join(f"{json.dumps(key)}: {one_line(sub)}" for key, sub in kind.items()) + "}"
    wrapper, inner = wrapped(kind)
    return f"{wrapper}({one_line(inner)})"


def source(kind, indent, room):
    """``kind`` as Python source that starts with ``room`` columns left on its line: on
    that line where it fits, else each key of an object on a line of its own, ``indent``
    deeper, and the object closed at ``indent``.

    >>> print(source(Optional({"path": STR, "version": OPT_VERSION}), 0, 30))
    Optional({
        "path": STR,
        "version": OPT_VERSION,
    })
    """
    text = one_line(kind)
    if len(text) <= room or atom_name(kind):
        return text
    if isinstance(kind, dict):
        inner, entries = " " * (indent + 4), ["{"]
        for key, sub in kind.items():
            quoted = json.dumps(key)
            # What the line leaves the value: less its indent, the key, ": " and the ",".
            entries.append(f"{inner}{quoted}: {source(sub, indent + 4, WIDTH - len(inner) - len(quoted) - 3)},")
        return "\n".join([*entries, " " * indent + "}"])
    wrapper, sub = wrapped(kind)
    return f"{wrapper}({source(sub, indent, room - len(wrapper) - 2)})"


def kind_names(kind):
    """The names of bringup/facts_kinds.py that ``kind``'s source uses.

    >>> sorted(kind_names(Optional({"a": Items(STR), "b": OPT_STR})))
    ['Items', 'OPT_STR', 'Optional', 'STR']
    """
    if atom_name(kind):
        return {atom_name(kind)}
    if isinstance(kind, dict):
        return set().union(*(kind_names(sub) for sub in kind.values()))
    wrapper, inner = wrapped(kind)
    return {wrapper} | kind_names(inner)


def names_tuple(names):
    """Python source of a tuple of strings.

    >>> names_tuple(["os"]), names_tuple(["os", "gpus"])
    ('("os",)', '("os", "gpus")')
    """
    return "(" + ", ".join(json.dumps(name) for name in names) + ("," if len(names) == 1 else "") + ")"


def module_path(module):
    """The file a section module is, from the repository's root.

    >>> from facts.sections import pci
    >>> module_path(pci)
    'facts/sections/pci.py'
    """
    return module.__name__.replace(".", "/") + ".py"


def declared_keys(modules):
    """``(name, Key)`` of every key the sections declare, in the registry's order."""
    return [(name, declared) for module in modules for name, declared in module.SECTION.keys.items()]


KEYS_HEADER = f'''"""The facts document's keys (docs/facts.md "Top level"), each with the kind the planner
checks it against (bringup/facts_schema.py), in the section registry's order.

Generated by `{COMMAND}` from the sections' declarations (facts/sections/):
do not edit; edit the section's module and run it.
"""
'''


def keys_module(modules=MODULES):
    """bringup/facts_keys.py's text: the sections' keys and their kinds, the keys a
    document must have and those whose objects may lack fields."""
    keys = declared_keys(modules)
    used = sorted(set().union(*(kind_names(declared.schema) for _, declared in keys)),
                  key=lambda name: (not name.isupper(), name))
    lines = [KEYS_HEADER, f"from bringup.facts_kinds import {', '.join(used)}", "", "SCHEMA = {"]
    for module in modules:
        if module.SECTION.keys:
            lines.append(f"    # {module_path(module)}")
        for name, declared in module.SECTION.keys.items():
            quoted = json.dumps(name)
            lines.append(f"    {quoted}: {source(declared.schema, 4, WIDTH - 4 - len(quoted) - 3)},")
    lines += ["}",
              "# Keys a document must have; the others may be absent (an older report).",
              f"REQUIRED = {names_tuple([name for name, declared in keys if declared.required])}",
              "# Keys whose objects may lack some of their fields (an older probe's, or one only an outcome has).",
              f"PARTIAL = {names_tuple([name for name, declared in keys if declared.partial])}", ""]
    return "\n".join(lines)


def example_text(example):
    """A key's example as the top-level table shows it.

    >>> example_text({"present": True, "error": None}), example_text(None)
    ('`{"present": true, "error": null}`', 'see below')
    """
    return "see below" if example is None else f"`{json.dumps(example)}`"


def top_level_table(modules=MODULES):
    """docs/facts.md's top-level table: a row per key, its type column named from its kind."""
    rows = [f"| `{name}` | {described(declared.schema)} | {declared.meaning} | {example_text(declared.example)} |"
            for name, declared in declared_keys(modules)]
    return "\n".join(["| key | type | meaning | example |", "| --- | --- | --- | --- |", *rows])


def with_table(page, table):
    """``page`` with ``table`` between its markers; a page without both, in order, is an error.

    >>> with_table(f"a\\n{BEGIN}\\nold\\n{END}\\nb", "new").splitlines()[1:4]
    ['<!-- generated: python -m facts.sections.generate -->', 'new', '<!-- end generated -->']
    """
    made = with_block(page, BEGIN, END, table)
    if made is None:
        raise ValueError(f"{FACTS_PAGE}: no generated-table markers ({BEGIN} ... {END}): put them around the "
                         "top-level table")
    return made


def generated(root=ROOT):
    """{path under ``root``: the text the registry makes of it}."""
    page = (root / FACTS_PAGE).read_text(encoding="utf-8")
    return {KEYS_MODULE: keys_module(), FACTS_PAGE: with_table(page, top_level_table())}


def current(path):
    """``path``'s text, or None when there is no such file yet."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def main(argv=None, root=ROOT):
    """Write bringup/facts_keys.py and docs/facts.md's top-level table from the section
    registry; ``--check``: exit 1 when either is not what it would write."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=main.__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale file")
    args = parser.parse_args(argv)
    try:
        made = generated(root)
    except OSError as error:
        print(f"{FACTS_PAGE}: cannot read it ({error.strerror})", file=sys.stderr)
        return 2
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    stale = [path for path, text in made.items() if current(root / path) != text]
    for path in stale:
        if args.check:
            print(f"{path}: not what the section registry makes: run {COMMAND}", file=sys.stderr)
            continue
        try:
            write_whole(root / path, made[path])
        except OSError as error:
            print(f"{path}: cannot write it ({error.strerror}); nothing of it changed", file=sys.stderr)
            return 2
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
