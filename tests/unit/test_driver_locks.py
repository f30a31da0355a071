"""Driver locks (bringup/driver_locks.py, control/locks.py ``driver``): each flavour's closure at
the branch's version, from a Packages index in the shape of NVIDIA's Debian 12 repository
(tests/fixtures/driver-repo/Packages-debian12-amd64: the contract's names, drivers
580.95.05-1 and 580.105.08-1, two NVLSM versions, a 590 module)."""

import subprocess
from pathlib import Path

import pytest

from bringup import deb_index, driver_locks, driver_packages, locks
from control import locks as lockgen
from tests.unit.test_locks import signed_repo, signer  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
INDEX = (ROOT / "tests" / "fixtures" / "driver-repo" / "Packages-debian12-amd64").read_text()
DEBIAN = driver_packages.names("debian", "580", "580.95.05")
SHARED = {"firmware-nvidia-gsp", "libcuda1", "libnvidia-ml1", "nvidia-driver-cuda", "nvidia-kernel-support",
          "nvidia-modprobe", "nvidia-persistenced", "nvidia-smi"}


def resolve(text="branch 580\nversion 580.95.05\n", names=DEBIAN, index=INDEX):
    return driver_locks.resolve_driver(driver_locks.parse_driver_input(text), names, deb_index.parse_index(index),
                                       "amd64", lockgen.dpkg_compare)


@pytest.mark.parametrize("role,expected", [
    ("open", SHARED | {"nvidia-kernel-open-dkms"}),
    ("proprietary", SHARED | {"nvidia-kernel-dkms"}),
    ("fabric", {"nvidia-fabricmanager", "libnvidia-nscq"}),
    ("pinning", {"nvidia-driver-pinning-580.95.05"}),
])
def test_each_role_is_its_roots_closure_at_the_locked_version(role, expected):
    locked = resolve()[role]
    assert set(locked) == expected
    # The newer 580.105.08 and the 590 module are in the index; the lock holds 580.95.05 only.
    assert set(locked.values()) == {"580.95.05-1"}


@pytest.mark.parametrize("text,nvlsm", [
    ("branch 580\nversion 580.95.05\n", "2025.06.10-1"),
    ("branch 580\nversion 580.95.05\nnvlsm 2025.03.9\n", "2025.03.9-1"),
], ids=["newest", "named in the .in"])
def test_nvlsm_has_a_version_of_its_own(text, nvlsm):
    assert resolve(text)["nvlink5"] == {"nvlsm": nvlsm}


def test_the_newer_driver_locks_when_the_in_names_it():
    locked = resolve("branch 580\nversion 580.105.08\n",
                     driver_packages.names("debian", "580", "580.105.08"))
    assert set(locked["open"].values()) == {"580.105.08-1"}
    assert locked["pinning"] == {"nvidia-driver-pinning-580.105.08": "580.105.08-1"}


def test_roles_the_index_does_not_serve_are_left_out():
    no_fabric = "\n\n".join(stanza for stanza in INDEX.split("\n\n")
                           if "fabricmanager" not in stanza and "nscq" not in stanza and "nvlsm" not in stanza)
    assert set(resolve(index=no_fabric)) == {"open", "proprietary", "pinning"}


@pytest.mark.parametrize("text,error", [
    ("branch 580\nversion 580.99.99\n", "nvidia-driver-cuda 580.99.99 is not in the index"),
    ("branch 580\n", "name the branch and the version"),
    ("branch 580\nversion 590.44.01\n", "version 590.44.01 is not of branch 580"),
    ("branch 580\nversion 580.95.05\nflavour open\n", "expected 'branch <N>'"),
])
def test_bad_inputs_are_named(text, error):
    with pytest.raises(locks.LockError, match=error):
        resolve(text, driver_packages.names("debian", "580", "580.99.99"))


def test_a_constraint_the_index_cannot_meet_is_named():
    broken = INDEX.replace("Package: nvidia-smi\nVersion: 580.95.05-1", "Package: nvidia-smi\nVersion: 580.95.04-1")
    with pytest.raises(locks.LockError, match=r"nvidia-driver-cuda 580.95.05-1 depends on nvidia-smi \(= 580.95.05-1\)"):
        resolve(index=broken)


def test_depends_alternatives_take_one_the_set_already_meets():
    """libcuda1: ``nvidia-alternative (= v) | nvidia-kernel-support (= v)``: the second is in
    the set (and the first is no package of the index), so nothing else joins."""
    assert "nvidia-alternative" not in resolve()["open"]


def test_make_lock_driver_on_a_signed_local_index(tmp_path, signer):  # noqa: F811
    """``python -m control.locks driver`` (make lock-driver), offline: written once,
    unchanged the second time, read back by the plan's parser."""
    repos = tmp_path / "repos" / "debian12" / "x86_64"
    fingerprint = signed_repo(repos, signer, INDEX)
    (tmp_path / "files" / "locks").mkdir(parents=True)
    branch_file = ROOT / driver_locks.driver_input_name("580")
    (tmp_path / "files" / "locks" / "driver-580.in").write_text(branch_file.read_text())
    url, platforms = (tmp_path / "repos").as_uri(), [("debian12", "x86_64")]
    assert lockgen.driver(url, platforms, root=tmp_path, fingerprint=fingerprint) == 1
    lock = tmp_path / driver_locks.driver_lock_name("580", "debian12", "x86_64")
    first = lock.read_text()
    assert lockgen.driver(url, platforms, root=tmp_path, fingerprint=fingerprint) == 0 and lock.read_text() == first
    parsed = driver_locks.parse_driver_lock(first)
    assert (parsed.branch, parsed.version) == ("580", "580.95.05")
    assert parsed.pins("open")["nvidia-kernel-open-dkms"] == "580.95.05-1"
    assert "# index: repos/debian12/x86_64/Packages.gz" in first


def test_the_venv_locks_do_not_take_the_driver_input():
    assert all(not driver_locks.is_driver_input(path.name) for path in lockgen.python_inputs())
    assert [path.name for path in lockgen.driver_inputs()] == ["driver-580.in"]


@pytest.mark.parametrize("text,error", [
    ("open a=1\n", "no '# branch:'"),
    ("# branch: 580\n# version: 580.95.05\ngui a=1\n", "not a '<role> package=version' line"),
    ("# branch: 580\n# version: 580.95.05\nopen a\n", "not a '<role> package=version' line"),
])
def test_a_bad_driver_lock_is_named(text, error):
    with pytest.raises(locks.LockError, match=error):
        driver_locks.parse_driver_lock(text)


@pytest.mark.parametrize("url,command", [
    ("sandbox", "-m sandbox.aptrepo lock --kind driver --platforms 'debian12-x86_64'"),
    ("file:///srv/mirror/cuda/repos", "-m control.locks driver --repo-url 'file:///srv/mirror/cuda/repos' "
                                      "--platforms 'debian12-x86_64'"),
])
def test_make_lock_driver_asks_the_sandbox_only_for_sandbox(url, command):
    """``make -n lock-driver``: the sandbox's CLI for CUDA_REPO_URL=sandbox, control.locks
    with the URL otherwise (the commands, none run); ``make lock`` includes it."""
    run = subprocess.run(["make", "-n", "--no-print-directory", "lock-driver", f"CUDA_REPO_URL={url}",
                          "CUDA_PLATFORMS=debian12-x86_64"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].endswith(command), run.stdout
    assert "lock-driver" in (ROOT / "Makefile").read_text().split("\nlock:", 1)[1].splitlines()[0]
