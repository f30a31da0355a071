"""The supported platforms: which NVIDIA CUDA apt repository serves a node, and which
CPython the distribution can build the SGLang venv with.

Repository layout. Source: NVIDIA CUDA installation guide for Linux, "Network Repo
Installation" (``https://developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/``,
keyring ``cuda-keyring_1.1-1_all.deb``, key 3bf863cc). Grace, GB200 and GB10 (DGX Spark)
are SBSA (Arm server) machines: their packages are in the ``sbsa`` directory; ``arm64``
is the Jetson/Tegra tree (``ubuntu2004/arm64`` stops at CUDA 12.2) and never used here.

CPython per distribution. Sources: the distributions' own package indexes (Debian's
``Packages.xz`` from deb.debian.org; Ubuntu's through ``apt-get update``/``apt-cache
policy`` against archive.ubuntu.com and security.ubuntu.com, every pocket and component),
read on 2026-11-29. packages.debian.org / packages.ubuntu.com render the same records;
their pages named below were not reachable from this project's machines:
- Debian 12 bookworm: ``python3`` 3.11.2-1+b1, ``python3.11``/``python3.11-venv``
  3.11.2-6+deb12u8 (main); no ``python3.12``/``python3.13`` in main, contrib, non-free,
  bookworm-updates or bookworm-backports
  (https://packages.debian.org/bookworm/python3, deb.debian.org dists/bookworm*/*/binary-amd64/Packages.xz).
- Debian 13 trixie: ``python3`` 3.13.5-1, ``python3.13``/``python3.13-venv`` 3.13.5-2+deb13u5
  (https://packages.debian.org/trixie/python3).
- Ubuntu 22.04 jammy: ``python3`` 3.10.6-1~22.04.1; ``python3.11``/``python3.11-venv``
  3.11.0~rc1-1~22.04.1 in jammy-updates/universe only, a release candidate that was never
  updated (https://packages.ubuntu.com/jammy-updates/python3.11,
  archive.ubuntu.com pool/universe/p/python3.11/python3.11_3.11.0~rc1-1~22.04.1_amd64.deb).
  uv and pip accept it for ``Requires-Python >=3.11`` (they compare 3.11.0).
  Fleets on 22.04 bring their own final CPython (deadsnakes' python3.11, a build into
  their image under /opt) and name it with ``venv_python`` (``operator_python``).
- Ubuntu 24.04 noble: ``python3`` 3.12.3-0ubuntu2.1, ``python3.12``/``python3.12-venv``;
  no ``python3.11``/``python3.13`` (https://packages.ubuntu.com/noble/python3).
"""

from dataclasses import dataclass

from bringup.versions import major_minor, parse


@dataclass(frozen=True)
class Interpreter:
    """A CPython the distribution packages: its ``X.Y``, its path and the packages that
    install it with venv support; ``note`` says what an operator should know about it."""

    version: str
    path: str
    packages: tuple
    note: str = ""
    # Why the stack does not run on it (observed on a real node of the release), or "".
    unusable: str = ""


@dataclass(frozen=True)
class Distribution:
    """One supported OS release: its repository directory, its ``python3`` and the
    interpreters its archive offers (the default one first)."""

    name: str
    repo_distro: str
    python3: str
    interpreters: tuple


def _cpython(version, note="", unusable=""):
    return Interpreter(version, f"/usr/bin/python{version}", (f"python{version}", f"python{version}-venv"), note,
                       unusable)


# (os-release ID, VERSION_ID) -> the distribution (sources: module docstring).
DISTRIBUTIONS = {
    ("ubuntu", "22.04"): Distribution(
        "Ubuntu 22.04", "ubuntu2204", "3.10",
        (_cpython("3.10"),
         _cpython("3.11", "python3.11 on Ubuntu 22.04 is 3.11.0~rc1 from jammy-updates/universe, a release "
                          "candidate without security support",
                  # Seen on an Ubuntu 22.04 sandbox node (tests/sandbox/test_ubuntu.py): SGLang's
                  # pre-warm imports transformers, which imports torch._dynamo.
                  "torch 2.14.1's torch._dynamo does not import on CPython 3.11.0rc1 (ValueError: Duplicate "
                  "dispatch rule for <built-in function intern>), and SGLang imports it"))),
    ("ubuntu", "24.04"): Distribution("Ubuntu 24.04", "ubuntu2404", "3.12", (_cpython("3.12"),)),
    ("debian", "12"): Distribution("Debian 12", "debian12", "3.11", (_cpython("3.11"),)),
    ("debian", "13"): Distribution("Debian 13", "debian13", "3.13", (_cpython("3.13"),)),
}

# uname -m -> (repository architecture directory, dpkg architecture of its packages).
REPO_ARCH = {
    "x86_64": ("x86_64", "amd64"),
    "aarch64": ("sbsa", "arm64"),
}

# What is known about each repository directory (none of it checked live from this
# project's machines: NVIDIA's server cannot be reached from them).
#   nvidia: NVIDIA's own installation guide, directory listing or Packages file shows it
#   third-party: only third-party scripts, Dockerfiles or repo catalogues use it
#   unverified: no evidence found; the plan warns (REPO_UNVERIFIED)
REPO_EVIDENCE = {
    # CUDA installation guide, network repo table.
    ("ubuntu2204", "x86_64"): "nvidia",
    # Third-party scripts installing cuda-keyring and cuda-toolkit-12-6/12-8 from it;
    # .../ubuntu2204/sbsa/cuda-cudart-dev-12-8_12.8.90-1_arm64.deb in public code.
    ("ubuntu2204", "sbsa"): "third-party",
    ("ubuntu2404", "x86_64"): "nvidia",
    # NVIDIA's listing "Index of /compute/cuda/repos/ubuntu2404/sbsa" (Packages, InRelease
    # 2026-02-24); NVIDIA's local installer cuda-repo-ubuntu2404-13-0-local_13.0.2-580.95.05-1_arm64.deb.
    ("ubuntu2404", "sbsa"): "nvidia",
    # NVIDIA's listing https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/.
    ("debian12", "x86_64"): "nvidia",
    # Third-party repo catalogues (baseUrl .../debian12/sbsa) and a test expecting
    # .../debian12/sbsa/cuda-keyring_1.1-1_all.deb.
    ("debian12", "sbsa"): "third-party",
    # Third-party Dockerfiles installing .../debian13/x86_64/cuda-keyring_1.1-1_all.deb,
    # then cuda-toolkit-13-1 (signing key 8793F200.pub).
    ("debian13", "x86_64"): "third-party",
    # Only debian13/cross-linux-sbsa (a cross compiler tree) is in NVIDIA's listings.
    ("debian13", "sbsa"): "unverified",
}


def distribution(os_id, version_id):
    """The supported distribution of an OS release, or None.

    >>> distribution("ubuntu", "22.04").python3
    '3.10'
    """
    return DISTRIBUTIONS.get((os_id, version_id))


def repo_distro(os_id, version_id):
    """The repository's distro directory, or None for an unsupported OS.

    >>> repo_distro("debian", "12")
    'debian12'
    """
    found = distribution(os_id, version_id)
    return found.repo_distro if found else None


def repo_arch(machine):
    """The repository's architecture directory, or None for an unsupported CPU.

    >>> repo_arch("aarch64")
    'sbsa'
    """
    return REPO_ARCH[machine][0] if machine in REPO_ARCH else None


def dpkg_arch(machine):
    """The dpkg architecture of a CPU's packages (``Architecture:`` in the index).

    >>> dpkg_arch("aarch64")
    'arm64'
    """
    return REPO_ARCH[machine][1] if machine in REPO_ARCH else None


def repo_evidence(distro, arch):
    """How well a repository directory is known to exist (``REPO_EVIDENCE``).

    >>> repo_evidence("debian13", "sbsa")
    'unverified'
    """
    return REPO_EVIDENCE.get((distro, arch), "unverified")


def repo_location(base_url, distro, arch):
    """The flat repository URL for a distro and arch under a base (NVIDIA's or a mirror).

    >>> repo_location("https://mirror.example/cuda/repos/", "debian12", "x86_64")
    'https://mirror.example/cuda/repos/debian12/x86_64/'
    """
    return f"{base_url.rstrip('/')}/{distro}/{arch}/"


def supported_pythons(minimum):
    """Every CPython ``X.Y`` a supported platform builds its venv with, sorted: the
    distributions' ``python3`` when new enough, else the interpreter the archive adds.

    >>> supported_pythons(major_minor("3.11"))
    ['3.11', '3.12', '3.13']
    """
    chosen = set()
    for dist in DISTRIBUTIONS.values():
        usable = [i.version for i in dist.interpreters if major_minor(i.version) >= minimum]
        if usable:
            chosen.add(usable[0])
    return sorted(chosen, key=major_minor)


def supported_platforms():
    """(distribution, machine) of every supported platform, as (os id, version id, machine).

    >>> len(supported_platforms())
    8
    """
    return [(os_id, version_id, machine) for (os_id, version_id) in DISTRIBUTIONS for machine in REPO_ARCH]


@dataclass(frozen=True)
class PythonChoice:
    """The CPython the managed venv is built with.

    ``source``: ``system`` (the node's python3), ``present`` (the archive's newer
    interpreter is already installed), ``install`` (deploy installs ``packages``),
    ``setting`` (the operator's, ``venv_python``) or ``none`` (nothing new enough can
    be had, or the operator's cannot be used: ``path`` is empty)."""

    version: str
    path: str
    packages: tuple
    source: str
    note: str = ""
    unusable: str = ""


def venv_python(dist, python3_version, interpreters, minimum):
    """Choose the venv's CPython.

    + dist: the node's ``Distribution`` (None for an OS outside the table)
    + python3_version: what ``python3 --version`` reported (None without python3)
    + interpreters: ``{path: version}`` of the ``/usr/bin/python3.N`` the probe found
    + minimum: the oldest ``X.Y`` the stack runs on (a Version)

    Versions are compared by ``X.Y`` (3.11.0rc1 is a 3.11, as pip and uv see it).

    >>> venv_python(DISTRIBUTIONS[("ubuntu", "22.04")], "3.10.12", {}, major_minor("3.11")).packages
    ('python3.11', 'python3.11-venv')
    >>> venv_python(DISTRIBUTIONS[("debian", "12")], "3.11.2", {}, major_minor("3.11")).source
    'system'
    """
    current = major_minor(python3_version)
    if current is not None and current >= minimum:
        return PythonChoice(str(current), "/usr/bin/python3", (), "system")
    for interpreter in (dist.interpreters if dist else ()):
        if major_minor(interpreter.version) < minimum:
            continue
        found = major_minor(interpreters.get(interpreter.path))
        source = "present" if found is not None and found == major_minor(interpreter.version) else "install"
        return PythonChoice(interpreter.version, interpreter.path, interpreter.packages, source, interpreter.note,
                            interpreter.unusable)
    return PythonChoice(str(current) if current else "", "", (), "none")


def operator_python(path, found, minimum):
    """Judge the operator's CPython (the ``venv_python`` setting) as the probe found it
    (the ``venv_python`` fact): ``(PythonChoice, None)`` when the venv can be built with
    it, else ``(None, (what is wrong, the fix))``. Checked in the order the probe learns:
    there, only root may change it (else it was never run), it answered, then what it said.

    + path: the setting; found: the fact (None: the probe was not given the setting)
    + minimum: the oldest ``X.Y`` the stack runs on (a Version)

    >>> good = {"file": {"user": "root", "mode": "755", "kind": "regular file"}, "owner": None, "ran": 0,
    ...         "version": "3.11.2", "releaselevel": "final", "venv": "ok"}
    >>> operator_python("/opt/py/bin/python3.11", good, major_minor("3.11"))[0].version
    '3.11'
    >>> operator_python("/opt/py/bin/python3.11", dict(good, releaselevel="candidate", version="3.11.0"),
    ...                 major_minor("3.11"))[1][0]
    '/opt/py/bin/python3.11 is CPython 3.11.0 (releaselevel candidate), a pre-release'
    """
    problem = _operator_python_problem(path, found, minimum)
    if problem:
        return None, problem
    version = str(major_minor(found["version"]))
    return PythonChoice(version, path, (), "setting", f"the operator's CPython {found['version']}"), None


def _operator_python_problem(path, found, minimum):
    """What keeps the operator's CPython from building the venv, as (what, fix), or None."""
    put_one = (f"install a final CPython >= {minimum} root-owned at {path} (deadsnakes' python3.11 and "
               "python3.11-venv, or a build under /opt such as /opt/cpython-3.11)")
    install = f"{put_one}, or correct venv_python"
    if found is None:
        return f"{path} was not looked at (facts from a probe without venv_python)", "run validate again"
    state = found.get("file")
    if state is None:
        return f"{path} does not exist on this node", install
    if found.get("owner"):
        blocked = found.get("blocked") or path
        what = (f"{path} ({state['kind']}, owner {state['user']}, mode {state['mode']}) can be changed by "
                f"{found['owner']} through {blocked} (it, a link on its way, a directory above them or a file it "
                "loads from its prefix): root never runs it, nothing was run")
        fix = (f"make {blocked} root's and writable by root only (chown -R root: {blocked} && chmod -R go-w "
               f"{blocked}; the same for every link, directory above and file of the interpreter's prefix), or "
               "install the interpreter where only root can change it")
        return what, fix
    if state["kind"] != "regular file" or found.get("ran") is None:
        return (f"{path} ({state['kind']}, owner {state['user']}, mode {state['mode']}) is not an executable file",
                install)
    version = parse(found.get("version"))
    if found["ran"] != 0 or version is None:
        return f"{path} did not answer `{path} -I -c` (exit {found['ran']}) with its version", install
    if major_minor(found["version"]) < minimum:
        return f"{path} is CPython {version}; SGLang needs CPython >= {minimum}", install
    if found.get("releaselevel") != "final":
        return (f"{path} is CPython {version} (releaselevel {found.get('releaselevel')}), a pre-release",
                f"use a final release of CPython >= {minimum} (pre-releases break the stack: torch._dynamo does "
                "not import on 3.11.0rc1); " + install)
    if found.get("venv") != "ok":
        return (f"{path} (CPython {version}) has no venv support: {found.get('venv') or 'not reported'} missing",
                f"install its venv support (deadsnakes: python{major_minor(found['version'])}-venv) or build it "
                "with ensurepip (configure's default); " + put_one)
    return None
