"""Locks: what ``make lock`` generates from ``files/locks/*.in`` and how a plan finds them.

Two kinds, both generated (``control/locks.py``), both checked for staleness by a unit
test that compares each lock's ``input-sha256`` header with its ``.in``:

- venv locks ``<input>-cp<XY>-<machine>.txt`` (pins with hashes, ``uv pip compile``), for
  every CPython a supported platform builds its venv with and every supported CPU;
- toolkit locks ``cuda-<X.Y>-<distro>-<machine>.txt`` (``package=version`` lines), read
  from the CUDA repository's ``Packages`` index of that distro and CPU, holding the
  release ``cuda-<X.Y>.in`` names;
- driver locks ``driver-<branch>-<distro>-<machine>.txt`` (``<role> package=version``
  lines), from the same index: ``driver-<branch>.in``'s version, each kernel module
  flavour's packages with everything of the repository they depend on, Fabric Manager's,
  NVLSM's and the pinning package (bringup/driver_packages.py names them).

Pure functions only: reading, fetching and running uv is control/locks.py's job.
"""

import hashlib
import posixpath
import re
from dataclasses import dataclass

LOCKS_DIR = "files/locks"
HEADER_KEYS = ("input-sha256", "target", "omits", "index", "branch", "version")
VENV_LOCK_NAME = re.compile(r"-cp(?P<major>3)(?P<minor>\d+)-(?P<machine>x86_64|aarch64)\.txt$")
# The wheels' platform tag the venv locks are resolved for. sglang 0.5.23's wheel is
# manylinux_2_34 (sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl on PyPI); every
# supported distribution's glibc is newer (Ubuntu 22.04: 2.35, Debian 12: 2.36,
# Ubuntu 24.04: 2.39, Debian 13: 2.41: their libc6 package versions).
MANYLINUX = "manylinux_2_34"
# A driver lock's package groups (bringup/driver_packages.py ROLES).
DRIVER_ROLES = ("open", "proprietary", "fabric", "nvlink5", "pinning")


@dataclass(frozen=True)
class Omission:
    """A package a venv lock leaves out, why, and what a node then cannot do."""

    package: str
    reason: str
    unavailable: str
    service_args: str  # regex: service_args that need the package


# (input stem, CPython X.Y) -> packages the lock omits (``uv pip compile --no-emit-package``).
# outlines-core 0.1.26 (sglang 0.5.23 -> outlines==0.1.11 -> outlines-core==0.1.26) has
# wheels up to cp312 only and an sdist that builds Rust from crates.io (PyPI's file list
# for outlines-core 0.1.26); nodes never build sdists (build-venv.sh --no-build). sglang
# 0.5.23 imports outlines/outlines_core only in sglang/srt/constrained/outlines_backend.py
# and outlines_jump_forward.py, which create_grammar_backend
# (sglang/srt/constrained/base_grammar_backend.py) imports only when grammar_backend ==
# "outlines"; the default is xgrammar (sglang/srt/arg_groups/serving_hook.py
# handle_grammar_backend). check_env.py only reads outlines' version metadata.
OMISSIONS = {
    ("sglang-0.5.23", "3.13"): (
        Omission("outlines-core",
                 "outlines-core 0.1.26 has no CPython 3.13 wheel; its sdist builds Rust from crates.io",
                 "--grammar-backend outlines",
                 r"--grammar-backend(?:=|\s+)outlines\b"),
    ),
}


def sha256(data):
    """Hex sha256 of bytes.

    >>> sha256(b"")[:8]
    'e3b0c442'
    """
    return hashlib.sha256(data).hexdigest()


def cp_tag(python):
    """``3.13`` -> ``cp313``.

    >>> cp_tag("3.11")
    'cp311'
    """
    return "cp" + python.replace(".", "")


def venv_lock_name(stem, python, machine):
    """The venv lock of an input for a CPython and CPU.

    >>> venv_lock_name("sglang-0.5.23", "3.12", "aarch64")
    'files/locks/sglang-0.5.23-cp312-aarch64.txt'
    """
    return f"{LOCKS_DIR}/{stem}-{cp_tag(python)}-{machine}.txt"


def sglang_lock_name(stack_sglang, python, machine):
    """The SGLang venv lock ``make lock`` writes for a stack, CPython and CPU.

    >>> sglang_lock_name("0.5.23", "3.13", "x86_64")
    'files/locks/sglang-0.5.23-cp313-x86_64.txt'
    """
    return venv_lock_name(f"sglang-{stack_sglang}", python, machine)


def uv_lock_name(python, machine):
    """The lock uv is bootstrapped from on a node of that CPython and CPU.

    >>> uv_lock_name("3.11", "x86_64")
    'files/locks/uv-cp311-x86_64.txt'
    """
    return venv_lock_name("uv", python, machine)


def venv_lock_target(path):
    """(CPython ``X.Y``, machine) a venv lock is resolved for, from its name, else None.

    >>> venv_lock_target("files/locks/sglang-0.5.23-cp311-x86_64.txt")
    ('3.11', 'x86_64')
    >>> venv_lock_target("my.txt") is None
    True
    """
    match = VENV_LOCK_NAME.search(posixpath.basename(path or ""))
    if not match:
        return None
    return f"{match['major']}.{match['minor']}", match["machine"]


def python_platform(machine):
    """uv's ``--python-platform`` for a CPU.

    >>> python_platform("aarch64")
    'aarch64-manylinux_2_34'
    """
    return f"{machine}-{MANYLINUX}"


def omissions(stem, python):
    """What the venv lock of ``stem`` for CPython ``python`` leaves out.

    >>> [o.package for o in omissions("sglang-0.5.23", "3.13")], omissions("uv", "3.13")
    (['outlines-core'], ())
    """
    return OMISSIONS.get((stem, python), ())


def is_toolkit_input(name):
    """Whether an ``.in`` under files/locks is a toolkit release (``cuda-X.Y.in``).

    >>> is_toolkit_input("cuda-13.0.in"), is_toolkit_input("sglang-0.5.23.in")
    (True, False)
    """
    return bool(re.fullmatch(r"cuda-\d+\.\d+\.in", posixpath.basename(name)))


def venv_lock_matrix(stems, pythons, machines):
    """Every venv lock ``make lock`` writes: (stem, python, machine, lock path).

    >>> [m[3] for m in venv_lock_matrix(["uv"], ["3.11"], ["x86_64", "aarch64"])]
    ['files/locks/uv-cp311-x86_64.txt', 'files/locks/uv-cp311-aarch64.txt']
    """
    return [(stem, python, machine, venv_lock_name(stem, python, machine))
            for stem in stems for python in pythons for machine in machines]


def venv_lock_header(stem, input_bytes, python, machine):
    """The comment lines that open a venv lock: provenance, the input's digest (the
    staleness check compares it), the target, and what is omitted and what that costs.

    >>> venv_lock_header("sglang-0.5.23", b"sglang==0.5.23\\n", "3.13", "x86_64")[2:4]
    ['# target: cp313 x86_64-manylinux_2_34', '# omits: outlines-core (outlines-core 0.1.26 has no CPython \
3.13 wheel; its sdist builds Rust from crates.io)']
    """
    lines = [f"# Generated by `make lock` from {LOCKS_DIR}/{stem}.in: do not edit; edit the .in and run `make lock`.",
             f"# input-sha256: {sha256(input_bytes)}",
             f"# target: {cp_tag(python)} {python_platform(machine)}"]
    for omission in omissions(stem, python):
        lines.append(f"# omits: {omission.package} ({omission.reason})")
        lines.append(f"# CPython {python} nodes: {omission.unavailable} is unavailable.")
    return lines


def toolkit_lock_name(cuda, distro, machine):
    """The toolkit lock of CUDA ``X.Y`` for a repository distro and a CPU.

    >>> toolkit_lock_name("13.0", "debian12", "x86_64")
    'files/locks/cuda-13.0-debian12-x86_64.txt'
    """
    return f"{LOCKS_DIR}/cuda-{cuda}-{distro}-{machine}.txt"


def toolkit_input_name(cuda):
    """The release file a CUDA ``X.Y``'s toolkit locks are generated from.

    >>> toolkit_input_name("13.0")
    'files/locks/cuda-13.0.in'
    """
    return f"{LOCKS_DIR}/cuda-{cuda}.in"


def toolkit_lock_header(cuda, input_bytes, distro, arch, index_url):
    """The comment lines that open a toolkit lock.

    >>> toolkit_lock_header("13.0", b"", "debian12", "amd64", "http://m/debian12/x86_64/Packages")[2]
    '# target: debian12 amd64'
    """
    return [f"# Generated by `make lock` from {toolkit_input_name(cuda)}: do not edit; edit the .in and run "
            "`make lock CUDA_REPO_URL=...`.",
            f"# input-sha256: {sha256(input_bytes)}",
            f"# target: {distro} {arch}",
            f"# index: {index_url}"]


def read_header(text):
    """``key: value`` of a lock's leading comment lines (``HEADER_KEYS``); ``omits`` is a list.

    >>> read_header("# input-sha256: ab\\n# omits: x (y)\\nfoo==1\\n")
    {'omits': ['x'], 'input-sha256': 'ab'}
    """
    header = {"omits": []}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].strip().partition(": ")
        if sep and key in HEADER_KEYS:
            if key == "omits":
                header["omits"].append(value.split(" ", 1)[0])
            else:
                header[key] = value
    return header


class LockError(ValueError):
    """A lock input or index cannot give a lock; the message names what and the fix."""


def parse_toolkit_input(text, name="cuda.in"):
    """A toolkit release file: ``<package> <upstream version>`` per line -> {package: version}.

    >>> parse_toolkit_input("# CUDA 13.0 update 2\\ncuda-nvcc-13-0 13.0.88\\n")
    {'cuda-nvcc-13-0': '13.0.88'}
    """
    wanted = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2 or not re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", fields[0]) \
                or not re.fullmatch(r"[0-9][A-Za-z0-9.+~]*", fields[1]):
            raise LockError(f"{name}:{number}: expected '<package> <upstream version>', got {line!r}")
        if fields[0] in wanted:
            raise LockError(f"{name}:{number}: {fields[0]} is listed twice")
        wanted[fields[0]] = fields[1]
    return wanted


def parse_toolkit_lock(text):
    """A toolkit lock -> {package: Debian version}.

    >>> parse_toolkit_lock("# x\\ncuda-nvcc-13-0=13.0.88-1\\n")
    {'cuda-nvcc-13-0': '13.0.88-1'}
    """
    pins = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, sep, version = line.partition("=")
            if not sep or not name or not version:
                raise LockError(f"not a package=version line: {line!r}")
            pins[name] = version
    return pins


def parse_index(text):
    """A Debian ``Packages`` index -> one dict of fields per stanza (continuation lines
    joined; only the fields a lock needs are kept).

    >>> parse_index("Package: a\\nVersion: 1-1\\nDepends: b (>= 1),\\n c\\n\\nPackage: b\\n")[0]["Depends"]
    'b (>= 1), c'
    """
    stanzas, current, key = [], {}, None
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current, key = {}, None
        elif line[0] in " \t":
            if key:
                current[key] += " " + line.strip()
        else:
            key, _, value = line.partition(":")
            current[key] = value.strip()
    if current:
        stanzas.append(current)
    keep = ("Package", "Version", "Architecture", "Depends", "Pre-Depends")
    return [{k: v for k, v in stanza.items() if k in keep} for stanza in stanzas if "Package" in stanza]


def upstream_version(version):
    """The upstream part of a Debian version: no epoch, no revision.

    >>> upstream_version("1:13.0.88-1"), upstream_version("10.4.0.35-1")
    ('13.0.88', '10.4.0.35')
    """
    version = version.split(":", 1)[1] if ":" in version else version
    return version.rsplit("-", 1)[0] if "-" in version else version


DEPENDENCY = re.compile(r"^(?P<name>[a-z0-9][a-z0-9.+-]*)(?::[a-z0-9-]+)?"
                        r"\s*(?:\((?P<op><<|<=|=|>=|>>)\s*(?P<version>[^)\s]+)\))?")


def parse_depends(text):
    """``Depends`` -> [[(name, op, version), ...alternatives], ...].

    >>> parse_depends("a (>= 1.0), b | c")
    [[('a', '>=', '1.0')], [('b', None, None), ('c', None, None)]]
    """
    groups = []
    for group in (text or "").split(","):
        alternatives = []
        for term in group.split("|"):
            match = DEPENDENCY.match(term.strip())
            if match:
                alternatives.append((match["name"], match["op"], match["version"]))
        if alternatives:
            groups.append(alternatives)
    return groups


def satisfies(version, op, wanted, compare):
    """Whether ``version`` meets ``op wanted`` under ``compare`` (Debian ordering: -1/0/1)."""
    if op is None:
        return True
    order = compare(version, wanted)
    return {"<<": order < 0, "<=": order <= 0, "=": order == 0, ">=": order >= 0, ">>": order > 0}[op]


def _served(stanzas, arch):
    """{package: [stanza, ...]} of an index's packages for ``arch`` (``all`` counts too)."""
    served = {}
    for stanza in stanzas:
        if stanza.get("Architecture") in (arch, "all"):
            served.setdefault(stanza["Package"], []).append(stanza)
    return served


def _highest(candidates, compare, prefer=None):
    """The candidate of the highest Debian version, among those of upstream version
    ``prefer`` when there are any."""
    preferred = [c for c in candidates if prefer and upstream_version(c["Version"]) == prefer] or candidates
    best = preferred[0]
    for candidate in preferred[1:]:
        if compare(candidate["Version"], best["Version"]) > 0:
            best = candidate
    return best


def resolve_packages(wanted, stanzas, arch, compare, where="the index", closure=False, prefer=None):
    """Pick each wanted package's Debian version from an index, and make the set whole:
    every dependency that the index itself serves is met by a version in the set.

    + wanted: {package: upstream version, or None for the index's highest}
    + stanzas: ``parse_index`` of the repository's Packages
    + arch: the dpkg architecture (``Architecture: all`` also counts)
    + compare: Debian version ordering (``dpkg --compare-versions``), ``(a, b) -> -1/0/1``
    + where: the index's URL, for messages
    + closure: False (a toolkit release): a served dependency outside ``wanted`` is an
      error; True (a driver lock): it joins the set, at the first alternative the index
      can meet, its version of upstream ``prefer`` when it has one that meets the
      constraint, else its highest that does
    + prefer: the upstream version a closure prefers (the driver's)

    Among versions with the wanted upstream part the highest Debian revision wins.
    Returns {package: Debian version} sorted by name; raises LockError naming the
    package, the index and the fix.

    >>> index = parse_index("Package: a\\nVersion: 2-1\\nArchitecture: all\\nDepends: b (>= 2), dkms\\n\\n"
    ...                     "Package: b\\nVersion: 2-1\\nArchitecture: all\\n\\n"
    ...                     "Package: b\\nVersion: 3-1\\nArchitecture: all\\n")
    >>> order = lambda x, y: (x > y) - (x < y)
    >>> resolve_packages({"a": "2"}, index, "amd64", order, closure=True, prefer="2")
    {'a': '2-1', 'b': '2-1'}
    """
    served = _served(stanzas, arch)
    chosen, picked = {}, {}
    for name, upstream in sorted(wanted.items()):
        candidates = [s for s in served.get(name, []) if upstream is None or upstream_version(s["Version"]) == upstream]
        if not candidates:
            have = sorted({upstream_version(s["Version"]) for s in served.get(name, [])})
            raise LockError(f"{name} {upstream or ''} is not in {where} for {arch} (it has: {', '.join(have) or 'none'}); "
                            "name a version the index serves in the .in, or point CUDA_REPO_URL at a mirror that "
                            "carries it")
        best = _highest(candidates, compare, prefer)
        chosen[name], picked[name] = best["Version"], best
    queue = sorted(picked)
    while queue:
        name = queue.pop(0)
        stanza = picked[name]
        for group in parse_depends(stanza.get("Pre-Depends")) + parse_depends(stanza.get("Depends")):
            ours = [alt for alt in group if alt[0] in served]
            if not ours:
                continue  # a distribution package: apt resolves it
            if any(alt[0] in chosen and satisfies(chosen[alt[0]], alt[1], alt[2], compare) for alt in ours):
                continue
            need = " | ".join(f"{n}{f' ({op} {v})' if op else ''}" for n, op, v in ours)
            added = closure and _join(ours, served, chosen, picked, compare, prefer)
            if not added:
                fix = ("which no version in the index meets together with the rest" if closure else
                       "which the release does not hold; add it (or the version that meets it) to the .in")
                raise LockError(f"{name} {chosen[name]} depends on {need}, {fix}")
            queue.append(added)
    return dict(sorted(chosen.items()))


def _join(alternatives, served, chosen, picked, compare, prefer):
    """Add the first alternative the index can meet to the set; its name, or None."""
    for name, op, version in alternatives:
        if name in chosen:
            continue
        candidates = [s for s in served[name] if satisfies(s["Version"], op, version, compare)]
        if candidates:
            best = _highest(candidates, compare, prefer)
            chosen[name], picked[name] = best["Version"], best
            return name
    return None


def resolve_toolkit(wanted, stanzas, arch, compare, where="the index"):
    """A toolkit release's lock: ``resolve_packages`` of exactly the release's packages
    (a served dependency the release does not list is an error)."""
    return resolve_packages(wanted, stanzas, arch, compare, where)


DRIVER_INPUT = re.compile(r"driver-(?P<branch>\d+)\.in")


def is_driver_input(name):
    """Whether an ``.in`` under files/locks is a driver branch (``driver-<branch>.in``).

    >>> is_driver_input("files/locks/driver-580.in"), is_driver_input("cuda-13.0.in")
    (True, False)
    """
    return bool(DRIVER_INPUT.fullmatch(posixpath.basename(name)))


def driver_input_name(branch):
    """The file a driver branch's locks are generated from.

    >>> driver_input_name("580")
    'files/locks/driver-580.in'
    """
    return f"{LOCKS_DIR}/driver-{branch}.in"


def driver_lock_name(branch, distro, machine):
    """The driver lock of a branch for a repository distro and a CPU.

    >>> driver_lock_name("580", "debian12", "x86_64")
    'files/locks/driver-580-debian12-x86_64.txt'
    """
    return f"{LOCKS_DIR}/driver-{branch}-{distro}-{machine}.txt"


@dataclass(frozen=True)
class DriverInput:
    """A driver branch file: the branch, the driver version locked, and NVLSM's own
    version ("" for the index's newest)."""

    branch: str
    version: str
    nvlsm: str = ""


def parse_driver_input(text, name="driver.in"):
    """``branch <N>``, ``version <upstream>`` and optionally ``nvlsm <upstream>`` lines.

    >>> parse_driver_input("# x\\nbranch 580\\nversion 580.95.05\\n")
    DriverInput(branch='580', version='580.95.05', nvlsm='')
    >>> parse_driver_input("branch 580\\nversion 570.1\\n")
    Traceback (most recent call last):
    ...
    bringup.locks.LockError: driver.in: version 570.1 is not of branch 580
    """
    fields = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) != 2 or words[0] not in ("branch", "version", "nvlsm") or words[0] in fields \
                or not re.fullmatch(r"[0-9][0-9.]*", words[1]):
            raise LockError(f"{name}:{number}: expected 'branch <N>', 'version <upstream>' or 'nvlsm <upstream>' "
                            f"once each, got {line!r}")
        fields[words[0]] = words[1]
    if "branch" not in fields or "version" not in fields:
        raise LockError(f"{name}: name the branch and the version ('branch 580', 'version 580.95.05')")
    if fields["version"].split(".")[0] != fields["branch"]:
        raise LockError(f"{name}: version {fields['version']} is not of branch {fields['branch']}")
    return DriverInput(fields["branch"], fields["version"], fields.get("nvlsm", ""))


def driver_lock_header(source, input_bytes, distro, arch, index_url, driver):
    """The comment lines that open a driver lock.

    >>> driver_lock_header("driver-580.in", b"", "debian12", "amd64", "u", DriverInput("580", "580.95.05"))[4:]
    ['# branch: 580', '# version: 580.95.05']
    """
    return [f"# Generated by `make lock` from {LOCKS_DIR}/{source}: do not edit; edit the .in and run "
            "`make lock CUDA_REPO_URL=...`.",
            f"# input-sha256: {sha256(input_bytes)}",
            f"# target: {distro} {arch}",
            f"# index: {index_url}",
            f"# branch: {driver.branch}",
            f"# version: {driver.version}"]


def resolve_driver(driver, names, stanzas, arch, compare, where="the index"):
    """Each role's packages at the lock: {role: {package: Debian version}}.

    + driver: the ``DriverInput``
    + names: bringup.driver_packages.DriverNames of the index's distribution family

    Each flavour is its roots' closure at the driver's version (``resolve_packages``);
    Fabric Manager's packages are at the driver's version; NVLSM at the input's version
    or the index's newest. The fabric, NVLink5 and pinning roles are left out where the
    index serves none of their packages; a flavour's root that is missing is an error.
    """
    served = _served(stanzas, arch)
    groups = {flavour: {root: driver.version for root in roots} for flavour, roots in names.roots.items()}
    groups["fabric"] = {name: driver.version for name in names.fabric}
    groups["nvlink5"] = {name: driver.nvlsm or None for name in names.nvlink5}
    groups["pinning"] = {names.pinning: driver.version}
    locked = {}
    for role, wanted in groups.items():
        if role not in names.roots and not any(name in served for name in wanted):
            continue
        locked[role] = resolve_packages(wanted, stanzas, arch, compare, where, closure=True,
                                        prefer=None if role == "nvlink5" else driver.version)
    return locked


def driver_lock_text(header, locked):
    """A driver lock's text: the header, then ``<role> package=version`` lines.

    >>> driver_lock_text(["# h"], {"open": {"a": "1-1"}, "fabric": {"b": "1-1"}})
    '# h\\nopen a=1-1\\nfabric b=1-1\\n'
    """
    lines = [f"{role} {name}={version}" for role, pins in locked.items() for name, version in pins.items()]
    return "\n".join([*header, *lines]) + "\n"


@dataclass(frozen=True)
class DriverLock:
    """A driver lock as read: its branch and version, {role: {package: Debian version}}."""

    branch: str
    version: str
    roles: dict

    def pins(self, *roles):
        """{package: version} of the roles named, in lock order.

        >>> DriverLock("580", "580.95.05", {"open": {"a": "1"}, "fabric": {"b": "1"}}).pins("open", "nvlink5")
        {'a': '1'}
        """
        return {name: version for role in roles for name, version in self.roles.get(role, {}).items()}


def parse_driver_lock(text):
    """A driver lock -> ``DriverLock``; LockError when a line or the header is not one.

    >>> parse_driver_lock("# branch: 580\\n# version: 580.95.05\\nopen a=580.95.05-1\\n").roles
    {'open': {'a': '580.95.05-1'}}
    """
    header = read_header(text)
    if not header.get("branch") or not header.get("version"):
        raise LockError("no '# branch:' and '# version:' header lines")
    roles = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        role, _, pin = line.partition(" ")
        name, sep, version = pin.partition("=")
        if role not in DRIVER_ROLES or not sep or not name or not version:
            raise LockError(f"not a '<role> package=version' line: {line!r}")
        roles.setdefault(role, {})[name] = version
    return DriverLock(header["branch"], header["version"], roles)


def toolkit_lock_text(header, pins):
    """A toolkit lock's text: the header, then ``package=version`` lines.

    >>> toolkit_lock_text(["# h"], {"a": "1-1"})
    '# h\\na=1-1\\n'
    """
    return "\n".join([*header, *(f"{name}={version}" for name, version in sorted(pins.items()))]) + "\n"


class LockFiles:
    """Read access to the control side's lock files, relative paths under ``root`` (the
    directory pyinfra and ``python -m bringup.plan`` run in: the repository root). The
    one place the planner reads a file; tests hand it a dict (``LockFiles.of``)."""

    def __init__(self, root=".", files=None):
        self.root, self.files = root, files

    @classmethod
    def of(cls, files):
        """Lock files held in memory: {path: text}.

        >>> LockFiles.of({"a.txt": "x"}).read("a.txt"), LockFiles.of({}).read("a.txt")
        ('x', None)
        """
        return cls(files=dict(files))

    def read(self, path):
        """The lock's text, or None when there is no such file."""
        if self.files is not None:
            return self.files.get(path)
        full = path if posixpath.isabs(path) else posixpath.join(self.root, path)
        try:
            with open(full, encoding="utf-8") as handle:
                return handle.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
