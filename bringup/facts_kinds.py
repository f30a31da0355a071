"""The kinds the facts document's schema is written in: each probe section declares its
keys' kinds (facts/sections/), bringup/facts_keys.py holds them all and
bringup/facts_schema.py checks a document against them.

A dict is an object with those keys (keys not listed are allowed: a newer probe may add
some); ``Optional`` marks a value that may be null, ``Items`` a list of that kind,
``Values`` an object of any keys whose values are of that kind, ``VERSION`` a string
``packaging.version`` parses (the planner compares every version so: "three point
eleven" must not read as an old python), ``ANY`` a value of any shape.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Optional:
    kind: object


@dataclass(frozen=True)
class Items:
    kind: object


@dataclass(frozen=True)
class Values:
    kind: object


STR, INT, BOOL, ANY = str, int, bool, object
VERSION = "version"
OPT_STR, OPT_VERSION = Optional(STR), Optional(VERSION)
# What the probe says of a file (``stat -L -c '%U %a %F'``: owner, octal mode, kind), as
# facts/probe_framing.py's _file_state parses it.
FILE_STATE = {"user": STR, "mode": STR, "kind": STR}

# How docs/facts.md's tables name a kind that is not an object or a list.
_ATOM_TYPES = {STR: "string", VERSION: "string", INT: "integer", BOOL: "bool", ANY: "any"}


def described(kind):
    """A kind as the type column of docs/facts.md's tables names it.

    >>> described(Optional(Items({"path": STR}))), described(Values(OPT_STR)), described(OPT_STR)
    ('list or null', 'object', 'string or null')
    """
    if isinstance(kind, Optional):
        return f"{described(kind.kind)} or null"
    if isinstance(kind, Items):
        return "list"
    if isinstance(kind, (dict, Values)):
        return "object"
    return _ATOM_TYPES[kind]
