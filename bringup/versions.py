"""Version helpers shared by the tables; every comparison goes through packaging."""

import re

from packaging.version import InvalidVersion, Version

# A Debian package version's upstream part: [epoch:]X.Y[.Z...] before the revision.
UPSTREAM = re.compile(r"^(?:\d+:)?(\d+(?:\.\d+)+)")


def parse(text):
    """Parse a version string, returning None when it is missing or malformed.

    >>> parse("580.95.05")
    <Version('580.95.5')>
    >>> parse("n/a") is None
    True
    """
    if text is None:
        return None
    try:
        return Version(str(text))
    except InvalidVersion:
        return None


def major_minor(text):
    """The ``X.Y`` release of a CUDA-like version, as a Version (``13.0.88`` -> ``13.0``).

    >>> str(major_minor("13.0.88"))
    '13.0'
    """
    version = parse(text)
    if version is None:
        return None
    return Version(f"{version.major}.{version.minor}")


def same_major_minor(left, right):
    """True when both versions parse and share major and minor.

    >>> same_major_minor("13.0", "13.0.88")
    True
    """
    left_mm, right_mm = major_minor(left), major_minor(right)
    return left_mm is not None and left_mm == right_mm


def upstream(version):
    """A package or module version's upstream part, as a Version (None when it has none).

    >>> upstream("580.95.05-0ubuntu1"), upstream("1:580.95.05-1"), upstream("n/a"), upstream(None)
    (<Version('580.95.5')>, <Version('580.95.5')>, None, None)
    """
    match = UPSTREAM.match(str(version or ""))
    try:
        return Version(match.group(1)) if match else None
    except InvalidVersion:
        return None
