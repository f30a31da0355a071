"""Version helpers shared by the tables; every comparison goes through packaging."""

from packaging.version import InvalidVersion, Version


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
