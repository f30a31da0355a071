"""files/locks/: the whole matrix is there and no lock is stale against its .in (offline:
each lock's header carries its input's sha256, make lock writes it); the toolkit
release resolution, table-driven; make lock's toolkit step end to end on a local index,
twice (the second run changes nothing)."""

import gzip
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from bringup import deb_index, driver_locks, driver_packages, locks, toolkit_locks, venv_locks
from bringup.plan import MIN_PYTHON
from bringup.plan.model import toolkit_packages
from bringup.platforms import REPO_ARCH, supported_pythons
from control import locks as lockgen
from sandbox.aptrepo.build import ALL_DIRS
from sandbox.aptrepo.sign import GnuPG

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / locks.LOCKS_DIR
STEMS = sorted(path.name[:-3] for path in lockgen.python_inputs(ROOT))
MATRIX = venv_locks.venv_lock_matrix(STEMS, supported_pythons(MIN_PYTHON), list(REPO_ARCH))
TOOLKIT_LOCKS = sorted(LOCKS.glob("cuda-*-*-*.txt"))
# Every driver lock that must exist: each driver-<branch>.in for each platform the sandbox's
# apt repository serves (sandbox/aptrepo/build.py ALL_DIRS: its stand-in driver packages, under
# each family's names, are what `make lock-driver CUDA_REPO_URL=sandbox` resolves).
SERVED = sorted((distro, machine) for distro, arch in ALL_DIRS for machine, (repo_arch, _) in REPO_ARCH.items()
                if repo_arch == arch)
DRIVER_MATRIX = [(source, distro, machine) for source in lockgen.driver_inputs(ROOT) for distro, machine in SERVED]


def test_the_matrix_covers_every_supported_cpython_and_cpu():
    assert STEMS == ["sglang-0.5.23", "uv"]
    assert {(python, machine) for _, python, machine, _ in MATRIX} == {
        (python, machine) for python in ("3.11", "3.12", "3.13") for machine in ("x86_64", "aarch64")}


@pytest.mark.parametrize("stem,python,machine,name", MATRIX, ids=[m[3].rsplit("/", 1)[1] for m in MATRIX])
def test_venv_lock_exists_and_is_fresh(stem, python, machine, name):
    path = ROOT / name
    assert path.is_file(), f"{name} is missing: run make lock"
    text = path.read_text()
    expected = venv_locks.venv_lock_header(stem, (LOCKS / f"{stem}.in").read_bytes(), python, machine)
    assert text.splitlines()[:len(expected)] == expected, f"{name} is stale against {stem}.in: run make lock"
    assert "--hash=sha256:" in text


def test_no_lock_without_an_input():
    """A lock whose input or target left the matrix would be picked by nobody."""
    expected = {name.rsplit("/", 1)[1] for *_, name in MATRIX}
    found = {path.name for path in LOCKS.glob("*-cp3*.txt")}
    assert found == expected


@pytest.mark.parametrize("python,has_outlines_core", [("3.11", True), ("3.12", True), ("3.13", False)])
@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_outlines_core_only_where_it_has_wheels(python, machine, has_outlines_core):
    text = (ROOT / venv_locks.sglang_lock_name("0.5.23", python, machine)).read_text()
    assert ("\noutlines-core==0.1.26 \\" in text) is has_outlines_core
    assert "\noutlines==0.1.11 \\" in text
    assert (locks.read_header(text)["omits"] == ["outlines-core"]) is not has_outlines_core


def test_a_changed_input_makes_its_locks_stale():
    """The freshness check can fail: the header follows the input's bytes."""
    text = (LOCKS / "uv-cp311-x86_64.txt").read_text()
    header = venv_locks.venv_lock_header("uv", b"uv==0.14.0\n", "3.11", "x86_64")
    assert text.splitlines()[:len(header)] != header


@pytest.mark.parametrize("path", TOOLKIT_LOCKS, ids=[p.name for p in TOOLKIT_LOCKS])
def test_toolkit_lock_is_fresh_and_whole(path):
    cuda, distro, machine = path.name[len("cuda-"):-len(".txt")].split("-")
    source = ROOT / toolkit_locks.toolkit_input_name(cuda)
    header = locks.read_header(path.read_text())
    assert header["input-sha256"] == locks.sha256(source.read_bytes()), f"{path.name} is stale: run make lock"
    assert header["target"] == f"{distro} {REPO_ARCH[machine][1]}"
    wanted = toolkit_locks.parse_toolkit_input(source.read_text())
    pinned = toolkit_locks.parse_toolkit_lock(path.read_text())
    assert {name: deb_index.upstream_version(version) for name, version in pinned.items()} == wanted
    assert set(toolkit_packages(Version(cuda))) <= set(pinned), "the plan installs packages the lock lacks"


def test_the_sandbox_platform_has_a_toolkit_lock():
    assert (LOCKS / "cuda-13.0-debian12-x86_64.txt").is_file()


def test_the_sandbox_serves_every_family_s_driver():
    assert {distro for distro, _ in SERVED} == {"debian12", "debian13", "ubuntu2204", "ubuntu2404"}


@pytest.mark.parametrize("source,distro,machine", DRIVER_MATRIX,
                         ids=[f"{source.stem}-{distro}-{machine}" for source, distro, machine in DRIVER_MATRIX])
def test_driver_lock_exists_and_is_fresh_and_whole(source, distro, machine):
    """Each served platform's driver lock: fresh against its .in, for its distro and CPU, every
    root of the family's names (bringup/driver_packages.py) in each flavour, Fabric Manager's
    and the pinning package, each at the .in's version (NVLSM at its own)."""
    wanted = driver_locks.parse_driver_input(source.read_text(), source.name)
    path = ROOT / driver_locks.driver_lock_name(wanted.branch, distro, machine)
    assert path.is_file(), f"{path.name} is missing: run make lock-driver CUDA_REPO_URL=sandbox"
    text = path.read_text()
    header = locks.read_header(text)
    assert header["input-sha256"] == locks.sha256(source.read_bytes()), f"{path.name} is stale: run make lock"
    assert header["target"] == f"{distro} {REPO_ARCH[machine][1]}"
    lock = driver_locks.parse_driver_lock(text)
    assert (lock.branch, lock.version) == (wanted.branch, wanted.version)
    names = driver_packages.names(driver_packages.lock_family(distro), wanted.branch, wanted.version)
    for flavour, roots in names.roots.items():
        assert set(roots) <= set(lock.roles[flavour]), f"{path.name}: {flavour} lacks roots"
    assert set(lock.roles["fabric"]) == set(names.fabric)
    assert set(lock.roles["pinning"]) == {names.pinning}
    assert {deb_index.upstream_version(version) for role, pins in lock.roles.items() if role != "nvlink5"
            for version in pins.values()} == {wanted.version}


def test_no_driver_lock_without_an_input_and_a_served_platform():
    expected = {driver_locks.driver_lock_name(driver_locks.parse_driver_input(source.read_text()).branch, distro,
                                              machine).rsplit("/", 1)[1] for source, distro, machine in DRIVER_MATRIX}
    assert {path.name for path in LOCKS.glob("driver-*-*-*.txt")} == expected


def stanza(name, version, arch="amd64", depends=""):
    return {"Package": name, "Version": version, "Architecture": arch, **({"Depends": depends} if depends else {})}


INDEX = [
    stanza("cuda-nvcc-13-0", "13.0.48-1", depends="cuda-crt-13-0 (>= 13.0.48)"),
    stanza("cuda-nvcc-13-0", "13.0.88-1", depends="cuda-crt-13-0 (>= 13.0.88), libc6"),
    stanza("cuda-nvcc-13-0", "13.0.88-2", depends="cuda-crt-13-0 (>= 13.0.88), libc6"),
    stanza("cuda-nvcc-13-0", "13.0.96-1", arch="arm64"),
    stanza("cuda-crt-13-0", "13.0.48-1"),
    stanza("cuda-crt-13-0", "13.0.88-1"),
    stanza("cuda-toolkit-13-0-config-common", "13.0.96-1", arch="all"),
    stanza("cuda-cudart-13-0", "13.0.96-1", depends="cuda-toolkit-13-0-config-common"),
]


@pytest.mark.parametrize("wanted,arch,expected", [
    # the highest Debian revision of the wanted upstream version
    ({"cuda-nvcc-13-0": "13.0.88", "cuda-crt-13-0": "13.0.88"}, "amd64",
     {"cuda-crt-13-0": "13.0.88-1", "cuda-nvcc-13-0": "13.0.88-2"}),
    # an older release, explicitly
    ({"cuda-nvcc-13-0": "13.0.48", "cuda-crt-13-0": "13.0.48"}, "amd64",
     {"cuda-crt-13-0": "13.0.48-1", "cuda-nvcc-13-0": "13.0.48-1"}),
    # Architecture: all counts; distribution dependencies (libc6) are apt's business
    ({"cuda-cudart-13-0": "13.0.96", "cuda-toolkit-13-0-config-common": "13.0.96"}, "amd64",
     {"cuda-cudart-13-0": "13.0.96-1", "cuda-toolkit-13-0-config-common": "13.0.96-1"}),
    # another CPU's index entry
    ({"cuda-nvcc-13-0": "13.0.96"}, "arm64", {"cuda-nvcc-13-0": "13.0.96-1"}),
    # the version is not served for this CPU
    ({"cuda-nvcc-13-0": "13.0.96"}, "amd64", "cuda-nvcc-13-0 13.0.96 is not in"),
    # a dependency the repository serves must be in the release ...
    ({"cuda-nvcc-13-0": "13.0.88"}, "amd64", "add it"),
    # ... at a version that meets it
    ({"cuda-nvcc-13-0": "13.0.88", "cuda-crt-13-0": "13.0.48"}, "amd64", "cuda-crt-13-0 (>= 13.0.88)"),
    ({"cuda-cudart-13-0": "13.0.96"}, "amd64", "cuda-toolkit-13-0-config-common"),
])
def test_resolve_toolkit(wanted, arch, expected):
    if isinstance(expected, str):
        with pytest.raises(locks.LockError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            toolkit_locks.resolve_toolkit(wanted, INDEX, arch, lockgen.dpkg_compare)
    else:
        assert toolkit_locks.resolve_toolkit(wanted, INDEX, arch, lockgen.dpkg_compare) == expected


@pytest.mark.parametrize("left,right,order", [
    ("13.0.88-1", "13.0.88-2", -1), ("13.0.96-1", "13.0.88-1", 1), ("1:1.0-1", "2.0-1", 1),
    ("13.0.0~rc1-1", "13.0.0-1", -1), ("10.4.0.35-1", "10.4.0.35-1", 0),
])
def test_debian_ordering_is_dpkgs(left, right, order):
    assert lockgen.dpkg_compare(left, right) == order


def index_text(stanzas):
    return "\n".join("".join(f"{key}: {value}\n" for key, value in s.items()) for s in stanzas)


@pytest.fixture(scope="module")
def signer(tmp_path_factory):
    """A signing key of this test's own (gpg, ed25519, no passphrase): the sandbox
    repository's signer (sandbox/aptrepo/sign.py), in a scratch home."""
    gpg = GnuPG(tmp_path_factory.mktemp("gnupg"))
    return gpg, gpg.ensure_key()


def signed_repo(repos, signer, packages, sign=("InRelease", "Release.gpg")):
    """A flat repository directory as NVIDIA lays it out: Packages.gz, a Release listing
    its sha256, that Release signed, and the key published as <last 8 hex digits>.pub."""
    gpg, fingerprint = signer
    repos.mkdir(parents=True, exist_ok=True)
    data = gzip.compress(packages.encode())
    (repos / "Packages.gz").write_bytes(data)
    (repos / "Release").write_text("Origin: NVIDIA\nLabel: NVIDIA CUDA\nSHA256:\n"
                                   f" {hashlib.sha256(data).hexdigest()} {len(data)} Packages.gz\n")
    gpg.sign_release(repos, fingerprint)
    for name in ("InRelease", "Release.gpg"):
        if name not in sign:
            (repos / name).unlink()
    (repos / f"{fingerprint[-8:].lower()}.pub").write_bytes(gpg.export(fingerprint, armor=True))
    return fingerprint


def test_make_lock_cuda_on_a_local_index(tmp_path, signer):
    """The toolkit step of make lock, offline: written once, unchanged the second time,
    rewritten when the release moves."""
    repos = tmp_path / "repos" / "debian12" / "x86_64"
    fingerprint = signed_repo(repos, signer, index_text(INDEX))
    (tmp_path / "files" / "locks").mkdir(parents=True)
    release = tmp_path / "files" / "locks" / "cuda-13.0.in"
    release.write_text("# test\ncuda-nvcc-13-0 13.0.88\ncuda-crt-13-0 13.0.88\n")
    url = (tmp_path / "repos").as_uri()
    platforms = [("debian12", "x86_64")]
    lock = tmp_path / "files" / "locks" / "cuda-13.0-debian12-x86_64.txt"
    assert lockgen.cuda(url, platforms, root=tmp_path, fingerprint=fingerprint) == 1
    first = lock.read_text()
    assert first.splitlines()[-2:] == ["cuda-crt-13-0=13.0.88-1", "cuda-nvcc-13-0=13.0.88-2"]
    assert "# index: repos/debian12/x86_64/Packages.gz" in first
    assert lockgen.cuda(url, platforms, root=tmp_path, fingerprint=fingerprint) == 0 and lock.read_text() == first
    release.write_text("cuda-nvcc-13-0 13.0.48\ncuda-crt-13-0 13.0.48\n")
    assert lockgen.cuda(url, platforms, root=tmp_path, fingerprint=fingerprint) == 1
    assert lock.read_text().splitlines()[-1] == "cuda-nvcc-13-0=13.0.48-1"


def test_a_release_with_a_detached_signature_is_read(tmp_path, signer):
    repos = tmp_path / "debian12" / "x86_64"
    fingerprint = signed_repo(repos, signer, index_text(INDEX), sign=("Release.gpg",))
    text, where = lockgen.fetch_index(repos.as_uri() + "/", fingerprint)
    assert where.endswith("/Packages.gz") and "Package: cuda-nvcc-13-0" in text


def tamper(repos, fingerprint):
    data = gzip.decompress((repos / "Packages.gz").read_bytes()).replace(b"13.0.88-2", b"13.0.88-9")
    (repos / "Packages.gz").write_bytes(gzip.compress(data))


def unsign(repos, fingerprint):
    for name in ("InRelease", "Release.gpg"):
        (repos / name).unlink()


def other_key(repos, fingerprint):
    # The directory publishes a key that is not the pinned one.
    (repos / f"{fingerprint[-8:].lower()}.pub").write_bytes(
        Path("/usr/share/keyrings/debian-archive-keyring.gpg").read_bytes())


def forged_release(repos, fingerprint):
    # An InRelease whose signed text was changed after signing (the index's hash swapped).
    text = (repos / "InRelease").read_text()
    (repos / "InRelease").write_text(text.replace("Packages.gz", "Packages.gz\n 00 1 Packages"))


@pytest.mark.parametrize("spoil,error", [
    (tamper, "Packages.gz does not match the sha256 its signed InRelease lists"),
    (unsign, "cannot read .*/InRelease or .*/Release.gpg"),
    (other_key, "the key at .*\\.pub is not "),
    (forged_release, "InRelease is not signed by the pinned key"),
], ids=["tampered Packages", "unsigned Release", "another key published", "changed InRelease"])
def test_make_lock_refuses_an_index_it_cannot_trust(tmp_path, signer, spoil, error):
    repos = tmp_path / "repos" / "debian12" / "x86_64"
    fingerprint = signed_repo(repos, signer, index_text(INDEX))
    spoil(repos, fingerprint)
    (tmp_path / "files" / "locks").mkdir(parents=True)
    (tmp_path / "files" / "locks" / "cuda-13.0.in").write_text("cuda-nvcc-13-0 13.0.88\ncuda-crt-13-0 13.0.88\n")
    with pytest.raises(locks.LockError, match=f"cuda-13.0-debian12-x86_64.txt from cuda-13.0.in: .*{error}"):
        lockgen.cuda((tmp_path / "repos").as_uri(), [("debian12", "x86_64")], root=tmp_path, fingerprint=fingerprint)
    assert not (tmp_path / "files" / "locks" / "cuda-13.0-debian12-x86_64.txt").exists()


def test_make_lock_refuses_a_signature_by_another_key(tmp_path, signer):
    """Signed, but not by the pinned key (the fingerprint make lock was given)."""
    repos = tmp_path / "debian12" / "x86_64"
    signed_repo(repos, signer, index_text(INDEX))
    pinned = "1F89983E0081FDE018F3CC9673A4F27B8DD47936"  # a key of Debian's archive keyring
    (repos / f"{pinned[-8:].lower()}.pub").write_bytes(Path("/usr/share/keyrings/debian-archive-keyring.gpg")
                                                       .read_bytes())
    with pytest.raises(locks.LockError, match=f"InRelease is not signed by the pinned key {pinned}"):
        lockgen.fetch_index(repos.as_uri() + "/", pinned)


def test_make_lock_cli_refuses_a_tampered_index_in_one_line(tmp_path, signer):
    """``python -m control.locks cuda`` (make lock-cuda): exit 2, one line, no lock changed."""
    repos = tmp_path / "repos" / "debian12" / "x86_64"
    fingerprint = signed_repo(repos, signer, index_text(INDEX))
    tamper(repos, fingerprint)
    before = {path: path.read_bytes() for path in TOOLKIT_LOCKS}
    run = subprocess.run([sys.executable, "-m", "control.locks", "cuda", "--repo-url", (tmp_path / "repos").as_uri(),
                          "--platforms", "debian12-x86_64", "--fingerprint", fingerprint],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("make lock: error: files/locks/cuda-13.0-debian12-x86_64.txt")
    assert "does not match the sha256" in run.stderr
    assert {path: path.read_bytes() for path in TOOLKIT_LOCKS} == before


def test_make_lock_names_an_unreachable_index(tmp_path):
    (tmp_path / "files" / "locks").mkdir(parents=True)
    (tmp_path / "files" / "locks" / "cuda-13.0.in").write_text("cuda-nvcc-13-0 13.0.88\n")
    with pytest.raises(locks.LockError, match="cuda-13.0-ubuntu2404-aarch64.txt.*ubuntu2404/sbsa/InRelease"):
        lockgen.cuda((tmp_path / "nowhere").as_uri(), [("ubuntu2404", "aarch64")], root=tmp_path)


@pytest.mark.parametrize("text,error", [
    ("cuda-nvcc-13-0\n", "expected '<package> <upstream version>'"),
    ("cuda-nvcc-13-0 13.0.88 extra\n", "expected"),
    ("cuda-nvcc-13-0 13.0.88\ncuda-nvcc-13-0 13.0.48\n", "listed twice"),
])
def test_bad_release_lines_are_named(text, error):
    with pytest.raises(locks.LockError, match=error):
        toolkit_locks.parse_toolkit_input(text, "cuda-13.0.in")


# Each pin of a toolkit or DCGM lock reaches apt-get's command line: one parser refuses a
# line of any other shape for both (the DCGM plan held its own copy of this check).
@pytest.mark.parametrize("line", ["-oAPT::Get::AllowUnauthenticated=true=1", "cuda-nvcc-13-0=13.0.88-1 --allow-downgrades",
                                  "cuda-nvcc-13-0=$(reboot)", "Cuda-Nvcc=13.0.88-1", "cuda-nvcc-13-0=v13"])
def test_a_lock_line_that_is_not_a_debian_pin_is_refused(line):
    with pytest.raises(locks.LockError, match="is not a Debian package=version"):
        toolkit_locks.parse_toolkit_lock(f"# lock\ncuda-cudart-13-0=13.0.96-1\n{line}\n")
    assert toolkit_locks.parse_toolkit_lock("datacenter-gpu-manager-4-core=1:4.4.1-1\n") == {
        "datacenter-gpu-manager-4-core": "1:4.4.1-1"}


def test_platforms_argument():
    assert lockgen.parse_platforms("debian12-x86_64, ubuntu2404-aarch64") == [("debian12", "x86_64"),
                                                                               ("ubuntu2404", "aarch64")]
    assert len(lockgen.parse_platforms("all")) == 8
    assert lockgen.parse_platforms("all", served={("debian12", "x86_64")}) == [("debian12", "x86_64")]
    with pytest.raises(locks.LockError, match="unknown platform 'rhel9-x86_64'"):
        lockgen.parse_platforms("rhel9-x86_64")


def test_make_lock_from_the_sandbox_reads_it_as_any_mirror(tmp_path, signer, monkeypatch, capsys):
    """``make lock CUDA_REPO_URL=sandbox`` (python -m sandbox.aptrepo lock): control.locks
    gets the sandbox repository as a plain file:// --repo-url and --fingerprint; ``all``
    is the platforms it serves (the one here), and control.locks' refusal of a tampered
    index is its exit status: 2, one line, no lock changed."""
    from sandbox.aptrepo import lock as aptrepo_lock

    repos = tmp_path / "repos"
    fingerprint = signed_repo(repos / "debian12" / "x86_64", signer, index_text(INDEX))
    tamper(repos / "debian12" / "x86_64", fingerprint)
    (repos / "debian12" / "ppc64el").mkdir()  # no repository arch of a supported CPU
    (repos / "debian12" / "ppc64el" / "InRelease").write_text("")
    monkeypatch.setattr(aptrepo_lock, "REPOS_DIR", repos)
    monkeypatch.setattr(aptrepo_lock, "build", lambda log: {"fingerprint": fingerprint})
    assert aptrepo_lock.served_platforms(repos) == {("debian12", "x86_64")}
    before = {path: path.read_bytes() for path in TOOLKIT_LOCKS}
    assert aptrepo_lock.lock("all") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("make lock: error: files/locks/cuda-13.0-debian12-x86_64.txt")
    assert "does not match the sha256" in error
    assert {path: path.read_bytes() for path in TOOLKIT_LOCKS} == before


@pytest.mark.parametrize("url,command", [
    ("sandbox", "-m sandbox.aptrepo lock --platforms 'debian12-x86_64'"),
    ("file:///srv/mirror/cuda/repos", "-m control.locks cuda --repo-url 'file:///srv/mirror/cuda/repos' "
                                      "--platforms 'debian12-x86_64'"),
])
def test_make_lock_cuda_asks_the_sandbox_only_for_sandbox(url, command):
    """The Makefile hands CUDA_REPO_URL=sandbox to the sandbox's CLI; control.locks only
    ever gets a URL (``make -n``: the commands, none run)."""
    run = subprocess.run(["make", "-n", "--no-print-directory", "lock-cuda", f"CUDA_REPO_URL={url}",
                          "CUDA_PLATFORMS=debian12-x86_64"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].endswith(command), run.stdout
