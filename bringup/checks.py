"""The kinds of value a setting can hold, each with its parse and its fix.

``bringup.config`` declares one check per setting; a check turns the raw value (YAML
or ``--data`` text) into the setting's value or raises ``Invalid`` with the fix to
tell the operator. No string of any kind may hold a control character: settings
reach shells, unit files, apt sources and environment files.
"""

import posixpath
import re
import shlex
from urllib.parse import urlsplit

from packaging.version import InvalidVersion, Version

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# What a node path may be made of: no spaces, quotes, globs or shell syntax.
PATH_CHARS = re.compile(r"^[A-Za-z0-9._+@/-]+$")
# Directories a setting must never name or place files directly in: the deploy
# would write into them or hand them to the service account.
SYSTEM_DIRS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt", "/opt",
    "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/include", "/usr/lib",
    "/usr/libexec", "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/local/sbin", "/usr/sbin",
    "/usr/share", "/var", "/var/cache", "/var/lib", "/var/log", "/var/opt", "/var/spool", "/var/tmp",
})
# Trees anyone may write into: a root-built venv or a service cache there can be
# raced or planted by another user.
SHARED_TREES = ("/tmp", "/var/tmp", "/dev/shm", "/run/user")
# POSIX portable user names, as useradd accepts them on Debian and Ubuntu.
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


class Invalid(ValueError):
    """A value does not fit its setting; the message is the fix."""


def text(value):
    """A value as text, refusing containers and control characters."""
    if isinstance(value, (dict, list, tuple, set)):
        raise Invalid("use a single value, not a list or mapping")
    value = "" if value is None else str(value)
    if CONTROL.search(value):
        raise Invalid("remove the control characters (newlines, tabs, escapes)")
    return value


class Check:
    """Parse one raw value; subclasses override ``parse``."""

    default_fix = ""

    def __call__(self, value):
        return self.parse(value)

    def parse(self, value):
        return text(value)


class Bool(Check):
    def parse(self, value):
        if isinstance(value, bool):
            return value
        lowered = text(value).strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise Invalid("use true or false")


class Choice(Check):
    def __init__(self, *choices):
        self.choices = choices

    def parse(self, value):
        value = text(value)
        if value not in self.choices:
            raise Invalid(f"use one of {', '.join(self.choices)}")
        return value


class Pattern(Check):
    """Text matching ``pattern`` (empty allowed when ``optional``)."""

    def __init__(self, pattern, fix, optional=False):
        self.pattern, self.fix, self.optional = re.compile(pattern), fix, optional

    def parse(self, value):
        value = text(value)
        if (value or not self.optional) and not self.pattern.match(value):
            raise Invalid(self.fix)
        return value


class Release(Check):
    """A public release number (``0.7.2``, ``2.14.1``): no local build part."""

    def parse(self, value):
        value = text(value)
        try:
            version = Version(value)
        except InvalidVersion:
            raise Invalid("use a release number such as 0.7.2") from None
        if version.local or str(version) != version.public:
            raise Invalid(f"use the public release {version.public}; a build such as +cu130 "
                          "is stack_torch_cuda")
        return value


class CudaRelease(Check):
    """torch's CUDA build as X.Y, of a major the tables know."""

    def __init__(self, known_majors):
        self.known_majors = known_majors

    def parse(self, value):
        value = text(value)
        try:
            version = Version(value)
        except InvalidVersion:
            version = None
        if version is None or len(version.release) != 2 or version.major not in self.known_majors \
                or str(version) != value:
            majors = " or ".join(f"{major}.x" for major in sorted(self.known_majors))
            raise Invalid(f"use torch's CUDA build as X.Y, one of {majors} (e.g. 13.0 for cu130)")
        return value


class Port(Check):
    def parse(self, value):
        value = text(value)
        if not re.fullmatch(r"[0-9]{1,5}", value) or not 0 < int(value) < 65536:
            raise Invalid("use a TCP port number (1-65535)")
        return value


class Seconds(Check):
    """A duration in whole seconds, from ``least`` up to ``most``."""

    def __init__(self, least=0, most=86400):
        self.least, self.most = least, most

    def parse(self, value):
        value = text(value).strip()
        if not re.fullmatch(r"[0-9]{1,6}", value) or not self.least <= int(value) <= self.most:
            raise Invalid(f"use whole seconds from {self.least} to {self.most} (e.g. {max(self.least, 300)})")
        return int(value)


class UserName(Check):
    def parse(self, value):
        value = text(value)
        if not USER_NAME.match(value):
            raise Invalid("use a login name: lower-case letters, digits, _ and -, starting with a letter or _")
        if value == "root":
            raise Invalid("use an unprivileged account: the service and the pre-warm never run as root")
        return value


class NodePath(Check):
    """An absolute, normalised node path of plain characters, outside system and
    shared directories; ``own_dir``: its parent is the setting's own directory too
    (the venv's root holds venvs/, locks/ and tools/ beside it; the env file's
    directory is created for it), so the parent must not be a system directory."""

    def __init__(self, own_dir=False):
        self.own_dir = own_dir

    def parse(self, value):
        value = text(value)
        if not value.startswith("/") or posixpath.normpath(value) != value or not PATH_CHARS.match(value):
            raise Invalid("use an absolute, normalised path of letters, digits and . _ + @ - / "
                          "(no spaces, quotes or trailing /)")
        if value in SYSTEM_DIRS:
            raise Invalid(f"{value} is a system directory; use a directory of its own, such as /opt/sglang/venv")
        if any(value == tree or value.startswith(tree + "/") for tree in SHARED_TREES):
            raise Invalid("use a path outside directories every user can write (/tmp, /var/tmp, /dev/shm)")
        parent = posixpath.dirname(value)
        if self.own_dir and parent in SYSTEM_DIRS:
            raise Invalid(f"its directory {parent} is a system directory; use a directory of its own "
                          f"(such as {parent.rstrip('/')}/sglang/{posixpath.basename(value)})")
        return value


class Url(Check):
    """An http(s) or file URL, without whitespace, query or fragment."""

    def __init__(self, optional=False, paths=False):
        self.optional, self.paths = optional, paths

    def parse(self, value):
        value = text(value)
        if not value and self.optional:
            return value
        if self.paths and value.startswith("/") and PATH_CHARS.match(value):
            return value
        parts = urlsplit(value)
        fix = "use an http://, https:// or file:/ URL without spaces, query or fragment" + (
            ", or an absolute directory" if self.paths else "")
        if re.search(r"\s", value) or parts.query or parts.fragment:
            raise Invalid(fix)
        if parts.scheme in ("http", "https") and parts.hostname:
            return value
        if parts.scheme == "file" and parts.path.startswith("/") and not parts.netloc:
            return value
        raise Invalid(fix)


class Fingerprint(Check):
    def parse(self, value):
        value = text(value)
        if not re.fullmatch(r"[0-9A-Fa-f]{40}", value.replace(" ", "")):
            raise Invalid("use the key's full 40-hex-digit fingerprint")
        return value


class Arguments(Check):
    """Extra command-line arguments: must split like a shell line."""

    def parse(self, value):
        value = text(value)
        try:
            shlex.split(value)
        except ValueError as error:
            raise Invalid(f"quote the arguments so they split like a shell line ({error})") from None
        return value


class ListOf(Check):
    """A list (YAML) or comma/space separated text (``--data``) of ``item`` values."""

    def __init__(self, item):
        self.item = item

    def parse(self, value):
        if isinstance(value, str):
            items = value.replace(",", " ").split()
        elif isinstance(value, (list, tuple)):
            items = list(value)
        elif value is None:
            items = []
        else:
            items = [value]
        return tuple(self.item(item) for item in items)


class OneOfTable(Check):
    """A value a table of this release knows (``known``: parsed value -> anything)."""

    def __init__(self, known, parse_item, fix):
        self.known, self.parse_item, self.fix = known, parse_item, fix

    def parse(self, value):
        value = text(value)
        if self.parse_item(value) not in self.known:
            raise Invalid(self.fix)
        return value


class HeadDim(Check):
    """An attention head dimension FlashInfer's kernels are built for."""

    SUPPORTED = (64, 96, 128, 192, 256, 512)

    def parse(self, value):
        value = text(value)
        if not re.fullmatch(r"[0-9]{1,4}", value) or int(value) not in self.SUPPORTED:
            raise Invalid(f"use head dimensions of your model such as {', '.join(map(str, self.SUPPORTED))}")
        return value


class Assignments(Check):
    """Environment variables: a mapping (YAML) or ``KEY=value`` words (``--data``), as
    (key, value) pairs; keys are variable names, values plain text."""

    NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

    def parse(self, value):
        if isinstance(value, dict):
            pairs = [(text(key), text(item)) for key, item in value.items()]
        elif value is None or value == "":
            pairs = []
        else:
            try:
                words = shlex.split(text(value))
            except ValueError as error:
                raise Invalid(f"use KEY=value words or a mapping ({error})") from None
            pairs = [tuple(word.split("=", 1)) if "=" in word else (word, None) for word in words]
        for key, item in pairs:
            if not self.NAME.match(key) or item is None:
                raise Invalid(f"use KEY=value with KEY a variable name (got {key!r})")
        return tuple(pairs)
