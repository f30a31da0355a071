"""The facts document's shape (docs/facts.md), checked at the planner's door: a document
from another release, a hand-edited report or a broken probe gets one line naming the
field, never a traceback deep in the planner.

Each key's kind (bringup/facts_kinds.py), the keys a document must have (``REQUIRED``)
and those whose objects may lack fields (``PARTIAL``) are declared by the probe section
that makes the key (facts/sections/) and written into bringup/facts_keys.py, which this
module checks a document against (tests/unit/test_facts_doc.py holds them to
docs/facts.md's tables).
"""

from packaging.version import InvalidVersion, Version

from bringup.facts_keys import PARTIAL, REQUIRED, SCHEMA
from bringup.facts_kinds import ANY, VERSION, Items, Optional, Values
from bringup.setting_checks import shown


class FactsError(ValueError):
    """The facts document does not have the documented shape."""


def _type_name(kind):
    return {str: "a string", int: "an integer", bool: "true or false"}.get(kind, "an object")


def _check(value, kind, where, partial):
    if kind == VERSION:
        try:
            Version(value if isinstance(value, str) else "")
        except InvalidVersion:
            raise FactsError(f"{where}: expected a version such as 3.11.2 or 580.95.05 (packaging.version), got "
                             f"{type(value).__name__} {shown(value)}") from None
        return
    if isinstance(kind, Values):
        if not isinstance(value, dict):
            raise FactsError(f"{where}: expected an object, got {type(value).__name__}")
        for key, item in value.items():
            _check(item, kind.kind, f"{where}[{shown(key)}]", partial)
        return
    if isinstance(kind, Optional):
        if value is not None:
            _check(value, kind.kind, where, partial)
        return
    if isinstance(kind, Items):
        if not isinstance(value, list):
            raise FactsError(f"{where}: expected a list, got {type(value).__name__}")
        for index, item in enumerate(value):
            _check(item, kind.kind, f"{where}[{index}]", partial)
        return
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            raise FactsError(f"{where}: expected an object, got {type(value).__name__}")
        for key, sub in kind.items():
            if key in value:
                _check(value[key], sub, f"{where}.{key}", partial)
            elif not partial:
                raise FactsError(f"{where}: missing {key!r}")
        return
    if kind is ANY:
        return
    # bool is an int in Python: keep them apart.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FactsError(f"{where}: expected {_type_name(kind)}, got {type(value).__name__} {shown(value)}")


def check(document):
    """Raise FactsError naming the first field that does not fit docs/facts.md.

    >>> check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [{"index": 0}]})
    Traceback (most recent call last):
    ...
    bringup.facts_schema.FactsError: facts.gpus[0]: missing 'name'
    >>> check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [], "driver": {"version": 580}})
    Traceback (most recent call last):
    ...
    bringup.facts_schema.FactsError: facts.driver.version: expected a version such as 3.11.2 or 580.95.05 \
(packaging.version), got int 580
    >>> check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [],
    ...        "apt": {"sources": [], "keyrings": {"/k.gpg": 5}}})
    Traceback (most recent call last):
    ...
    bringup.facts_schema.FactsError: facts.apt.keyrings['/k.gpg']: expected a list, got int
    """
    if not isinstance(document, dict):
        raise FactsError(f"facts: expected an object (docs/facts.md), got {type(document).__name__}")
    for key in REQUIRED:
        if key not in document:
            raise FactsError(f"facts: missing {key!r} (is this a facts document or a validate report?)")
    for key, kind in SCHEMA.items():
        if key in document:
            _check(document[key], kind, f"facts.{key}", partial=key in PARTIAL)
