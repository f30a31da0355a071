"""Locks: what ``make lock`` generates from ``files/locks/*.in`` and how a plan finds them.

Two kinds, both generated (``control/locks.py``), both checked for staleness by a unit
test that compares each lock's ``input-sha256`` header with its ``.in``:

- venv locks ``<input>-cp<XY>-<machine>.txt`` (pins with hashes, ``uv pip compile``), for
  every CPython a supported platform builds its venv with and every supported CPU;
- toolkit locks ``cuda-<X.Y>-<distro>-<machine>.txt`` (``package=version`` lines), read
  from the CUDA repository's ``Packages`` index of that distro and CPU, holding the
  release ``cuda-<X.Y>.in`` names.

Pure functions only: reading, fetching and running uv is control/locks.py's job.
"""

import hashlib
import posixpath
import re
from dataclasses import dataclass

LOCKS_DIR = "files/locks"
HEADER_KEYS = ("input-sha256", "target", "omits", "index")
VENV_LOCK_NAME = re.compile(r"-cp(?P<major>3)(?P<minor>\d+)-(?P<machine>x86_64|aarch64)\.txt$")
# The wheels' platform tag the venv locks are resolved for. sglang 0.5.23's wheel is
# manylinux_2_34 (sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl on PyPI); every
# supported distribution's glibc is newer (Ubuntu 22.04: 2.35, Debian 12: 2.36,
# Ubuntu 24.04: 2.39, Debian 13: 2.41: their libc6 package versions).
MANYLINUX = "manylinux_2_34"


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


def resolve_toolkit(wanted, stanzas, arch, compare, where="the index"):
    """Pick each wanted package's Debian version from an index, and check the set is
    whole: every dependency that the index itself serves must be in ``wanted`` and be
    met by the version picked for it.

    + wanted: {package: upstream version} (a release file)
    + stanzas: ``parse_index`` of the repository's Packages
    + arch: the dpkg architecture (``Architecture: all`` also counts)
    + compare: Debian version ordering (``dpkg --compare-versions``), ``(a, b) -> -1/0/1``
    + where: the index's URL, for messages

    Among versions with the wanted upstream part the highest Debian revision wins.
    Returns {package: Debian version} sorted by name; raises LockError naming the
    package, the index and the fix.
    """
    served = {}
    for stanza in stanzas:
        if stanza.get("Architecture") in (arch, "all"):
            served.setdefault(stanza["Package"], []).append(stanza)
    chosen, picked = {}, {}
    for name, upstream in sorted(wanted.items()):
        candidates = [s for s in served.get(name, []) if upstream_version(s["Version"]) == upstream]
        if not candidates:
            have = sorted({upstream_version(s["Version"]) for s in served.get(name, [])})
            raise LockError(f"{name} {upstream} is not in {where} for {arch} (it has: {', '.join(have) or 'none'}); "
                            "name a version the index serves in the .in, or point CUDA_REPO_URL at a mirror that "
                            "carries it")
        best = candidates[0]
        for candidate in candidates[1:]:
            if compare(candidate["Version"], best["Version"]) > 0:
                best = candidate
        chosen[name], picked[name] = best["Version"], best
    for name, stanza in sorted(picked.items()):
        for group in parse_depends(stanza.get("Pre-Depends")) + parse_depends(stanza.get("Depends")):
            ours = [alt for alt in group if alt[0] in served]
            if not ours:
                continue  # a distribution package: apt resolves it
            if any(alt[0] in chosen and satisfies(chosen[alt[0]], alt[1], alt[2], compare) for alt in ours):
                continue
            need = " | ".join(f"{n}{f' ({op} {v})' if op else ''}" for n, op, v in ours)
            raise LockError(f"{name} {chosen[name]} depends on {need}, which the release does not hold; add it "
                            "(or the version that meets it) to the .in")
    return dict(sorted(chosen.items()))


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
