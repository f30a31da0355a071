"""The kinds of value a setting can hold, each with its parse and its fix.

``bringup.config`` declares one check per setting; a check turns the raw value (YAML
or ``--data`` text) into the setting's value or raises ``Invalid`` with the fix to
tell the operator. No string of any kind may hold a control character or a line
separator: settings reach shells, unit files, apt sources and environment files, all
read line by line. ``shown`` is how a value appears in an error line: bounded, with
any URL's user and password replaced.
"""

import posixpath
import re
import reprlib
import shlex
from urllib.parse import urlsplit

from packaging.version import InvalidVersion, Version

from bringup import redact

# C0 controls (\v \f \x1c-\x1e among them), DEL, and the other characters
# str.splitlines() ends a line at: NEL (U+0085), LINE and PARAGRAPH SEPARATOR.
CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")
# RFC 3986's characters: unreserved, reserved and %; a URL holding any other (a quote,
# a space, <>, \, ^, `, {|}, non-ASCII) is refused, never escaped on its way.
URL_CHARS = re.compile(r"^[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+$")
BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
# The longest a value is shown in an error line (an alias bomb expands to megabytes).
SHOWN_CHARS = 200
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
# Trees root reads configuration or programs from: a directory handed to the service
# account (its cache) must not be in one.
ROOT_TREES = ("/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys",
              "/dev", "/run", "/root", "/var/lib/dpkg", "/var/lib/apt", "/var/lib/systemd", "/var/spool/cron")
# A URL's host: a DNS name or IPv4 address (an IPv6 one is bracketed and checked by urlsplit).
HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
# POSIX portable user names, as useradd accepts them on Debian and Ubuntu.
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


class Invalid(ValueError):
    """A value does not fit its setting; the message is the fix."""


def without_userinfo(text):
    """``text`` with every URL's ``user:password@`` replaced, so no error line shows it.

    >>> without_userinfo("https://bob:s3cret@mirror/cuda and http://h/")
    'https://***@mirror/cuda and http://h/'
    >>> without_userinfo("'https://bob:s3/cr?e#t@mirror/cuda'")
    "'https://***@mirror/cuda'"
    >>> without_userinfo("https://bob:s3 cr'et@mirror/cuda")
    'https://***@mirror/cuda'
    """
    return redact.value(text, "***")


def cut(text, limit=SHOWN_CHARS):
    """``text`` cut to ``limit`` characters, the cut marked.

    >>> cut("x" * 500, limit=4)
    'xxxx... (496 more characters)'
    """
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


class _Shown(reprlib.Repr):
    """repr() bounded in depth, items and characters (a YAML alias bomb is a few lines
    that expand to millions of items); a cut string says how much was left out."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxset = 3, 6, 6, 6, 6
        self.maxother = limit

    def repr_str(self, value, level):
        value = without_userinfo(value)
        if len(value) <= self.limit:
            return repr(value)
        return repr(value[:self.limit]) + f"... ({len(value) - self.limit} more characters)"


def shown(value, limit=SHOWN_CHARS):
    """How a setting's value appears in an error line: its repr, at most about ``limit``
    characters per string and twice that in all (each cut marked), lists and mappings cut
    after a few items and levels, and any URL's user and password replaced.

    >>> shown("x" * 500, limit=4)
    "'xxxx'... (496 more characters)"
    >>> shown("https://u:pw@mirror/")
    "'https://***@mirror/'"
    >>> shown([[1] * 20])
    '[[1, 1, 1, 1, 1, 1, ...]]'
    """
    return cut(_Shown(limit).repr(value), 2 * max(limit, SHOWN_CHARS))


def text(value):
    """A value as text, refusing containers, control characters and line separators."""
    if isinstance(value, (dict, list, tuple, set)):
        raise Invalid("use a single value, not a list or mapping")
    value = "" if value is None else str(value)
    if CONTROL.search(value):
        raise Invalid("remove the control characters and line separators (newlines, tabs, escapes, "
                      "U+0085, U+2028, U+2029)")
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
        if str(version) != value:
            # The venv's packages report the canonical form: any other spelling would read
            # as drift on every run.
            raise Invalid(f"write it as {version}, the release's canonical form (packaging.version)")
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


def inside(path, tree):
    """Whether ``path`` is ``tree`` or below it (normalised absolute paths).

    >>> inside("/opt/sglang/locks", "/opt/sglang"), inside("/opt/sglangx", "/opt/sglang")
    (True, False)
    """
    return path == tree or path.startswith(tree.rstrip("/") + "/")


class ServiceDir(NodePath):
    """A directory handed to the service account (``install -d -o <service user>``): a
    node path outside the trees root reads configuration or programs from."""

    def parse(self, value):
        value = super().parse(value)
        tree = next((tree for tree in ROOT_TREES if inside(value, tree)), None)
        if tree:
            raise Invalid(f"the service account gets this directory, and {tree} is where root reads configuration "
                          "or programs from; use a directory of its own such as /var/cache/sglang")
        return value


class OwnDirFile(NodePath):
    """A file in a directory of its own: some directory of its path is named for
    ``owner`` (``/etc/sglang/sglang.env``), and none is a drop-in directory (``*.d``).

    Why a rule by name rather than a list of directories to avoid: every ``*.d`` and
    many other directories under /etc are read as configuration by some program
    (sudoers.d, cron.d and cron.daily, profile.d, apt/, systemd/, pam.d, security/,
    ld.so.conf.d, modprobe.d, udev/, logrotate.d ...), and no list is complete; a
    directory named for the service is the deploy's own, read by nobody else (its
    unit's drop-in directory, ``sglang.service.d``, is a ``*.d``).
    """

    def __init__(self, owner):
        super().__init__(own_dir=True)
        self.owner = owner

    def parse(self, value):
        value = super().parse(value)
        directories = value.split("/")[1:-1]
        if any(part.endswith(".d") for part in directories) or not any(self.owner in part for part in directories):
            raise Invalid(f"put it in a directory of its own, named for {self.owner} (such as /etc/{self.owner}/"
                          f"{posixpath.basename(value)}): other programs read the files of {posixpath.dirname(value)} "
                          "or of a *.d directory as their configuration (sudoers.d, cron.d, apt, systemd, pam.d ...)")
        return value


USERINFO_FIX = ("remove the user and password from the URL: it is written into the apt source, the reports and the "
                "venv build's command line; give them to apt in /etc/apt/auth.conf.d/ (apt_auth.conf(5)) and to "
                "pip/uv in root's ~/.netrc")


class Url(Check):
    """An http(s) or file URL of RFC 3986's characters, without user or password,
    query or fragment; its host a DNS name or an IP address.

    >>> Url()("https://[::1]:8443/cuda")
    'https://[::1]:8443/cuda'
    >>> Url()("http://[::1/x")
    Traceback (most recent call last):
    ...
    bringup.setting_checks.Invalid: use an http://, https:// or file:/ URL without spaces, query or fragment (Invalid IPv6 URL)
    """

    def __init__(self, optional=False, paths=False):
        self.optional, self.paths = optional, paths

    def parse(self, value):
        value = text(value)
        if not value and self.optional:
            return value
        if self.paths and value.startswith("/") and PATH_CHARS.match(value):
            return value
        if redact.has_userinfo(value):
            # Before urlsplit: a password holding "/", "?" or "#" ends its authority early,
            # and its port error would show the password.
            raise Invalid(USERINFO_FIX)
        fix = "use an http://, https:// or file:/ URL without spaces, query or fragment" + (
            ", or an absolute directory" if self.paths else "")
        if not URL_CHARS.match(value) or BAD_PERCENT.search(value):
            # A quote would end apt's `Pin: origin "..."`, a space a deb822 field.
            raise Invalid(f"{fix}, of RFC 3986's characters only (no quotes, spaces, <>, \\, ^, `, {{|}} or "
                          "non-ASCII; %XX for them)")
        try:
            parts = urlsplit(value)
            host, _ = parts.hostname, parts.port
        except ValueError as error:  # a bad [IPv6] host, a port out of range
            raise Invalid(f"{fix} ({error})") from None
        if "@" in parts.netloc:
            raise Invalid(USERINFO_FIX)
        if parts.query or parts.fragment:
            raise Invalid(fix)
        if parts.scheme in ("http", "https") and host and not ("[" in parts.netloc or HOST_NAME.match(host)):
            raise Invalid(f"{fix}, its host a DNS name or an IP address (not {host!r})")
        if parts.scheme in ("http", "https") and host:
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
    """A list (YAML) or comma/space separated text (``--data``) of ``item`` values;
    ``empty``: the fix when an empty list means nothing to do (refused)."""

    def __init__(self, item, empty=None):
        self.item, self.empty = item, empty

    def parse(self, value):
        if isinstance(value, str):
            items = value.replace(",", " ").split()
        elif isinstance(value, (list, tuple)):
            items = list(value)
        elif value is None:
            items = []
        else:
            items = [value]
        if not items and self.empty:
            raise Invalid(self.empty)
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
                raise Invalid(f"use KEY=value with KEY a variable name (got {shown(key)})")
            if redact.has_userinfo(item):
                raise Invalid(f"remove the user and password from {key}'s URL: the settings reach the probe's and "
                              "pyinfra's command lines; put the assignment with its credentials into the env file "
                              "yourself (service_env_file, root's, mode 0600), which deploy keeps and never shows")
        return tuple(pairs)


class ControlPath(Check):
    """A path on the control machine (the one pyinfra runs on), absolute or relative to
    the directory pyinfra runs in; empty: not set.

    >>> ControlPath()("/var/lib/node_exporter/textfile")
    '/var/lib/node_exporter/textfile'
    >>> ControlPath()("")
    ''
    """

    def parse(self, value):
        value = text(value)
        if len(value) > 1024:
            raise Invalid("use a path of at most 1024 characters")
        return value
