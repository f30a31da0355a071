"""The sandbox apt repository's package tables, from wheels.lock alone (no wheel, no build)."""

import re

import pytest

from sandbox.aptrepo import debs
from sandbox.aptrepo.build import distro_keyring
from sandbox.aptrepo.wheels import LOCKS, LockedWheel, _batches, locked_wheels, read_lock

SETS = read_lock()
PACKAGES = debs.all_packages(SETS)


def _versions(toolkit: str) -> dict[str, str]:
    rel = next(r for r in debs.releases(SETS) if r.toolkit == toolkit)
    return {p.name: p.version for p in debs.toolkit_packages(rel)}


def test_lock_has_the_three_release_sets():
    # cuda-toolkit 13.0.0 and 13.0.2 / 12.8.1 meta wheels, Requires-Dist (see wheels.lock).
    assert list(SETS) == ["13.0.0", "13.0.2", "12.8.1"]
    assert {n: w.version for n, w in SETS["12.8.1"].items()} == {
        "nvidia-cuda-nvcc-cu12": "12.8.93", "nvidia-cuda-runtime-cu12": "12.8.90",
        "nvidia-cuda-cccl-cu12": "12.8.90"}


@pytest.mark.parametrize("toolkit,expected", [
    ("13.0.0", {"cuda-nvcc-13-0": "13.0.48-1", "cuda-crt-13-0": "13.0.48-1", "libnvvm-13-0": "13.0.48-1",
                "cuda-cccl-13-0": "13.0.50-1", "cuda-cudart-13-0": "13.0.48-1",
                "cuda-cudart-dev-13-0": "13.0.48-1", "cuda-driver-dev-13-0": "13.0.48-1",
                "cuda-toolkit-13-0-config-common": "13.0.48-1", "libcurand-dev-13-0": "10.4.0.35-1",
                "libcublas-dev-13-0": "13.0.2.14-1"}),
    ("13.0.2", {"cuda-nvcc-13-0": "13.0.88-1", "cuda-crt-13-0": "13.0.88-1", "libnvvm-13-0": "13.0.88-1",
                "cuda-cccl-13-0": "13.0.85-1", "cuda-cudart-13-0": "13.0.96-1",
                "cuda-cudart-dev-13-0": "13.0.96-1", "cuda-driver-dev-13-0": "13.0.96-1",
                "cuda-toolkit-13-0-config-common": "13.0.96-1", "libcurand-dev-13-0": "10.4.0.35-1",
                "libcublas-dev-13-0": "13.0.2.14-1"}),
    ("12.8.1", {"cuda-nvcc-12-8": "12.8.93-1", "cuda-crt-12-8": "12.8.93-1", "cuda-nvvm-12-8": "12.8.93-1",
                "cuda-cccl-12-8": "12.8.90-1", "cuda-cudart-12-8": "12.8.90-1",
                "cuda-cudart-dev-12-8": "12.8.90-1", "cuda-driver-dev-12-8": "12.8.90-1",
                "cuda-toolkit-12-8-config-common": "12.8.90-1"}),
])
def test_package_versions_per_release_set(toolkit, expected):
    versions = _versions(toolkit)
    assert {n: versions.get(n) for n in expected} == expected


def test_each_name_and_version_is_one_package():
    names = [debs.deb_filename(p) for p in PACKAGES]
    assert len(names) == len(set(names))
    # Shared by both 13.0 sets, built once.
    assert names.count("libcurand-13-0_10.4.0.35-1_amd64.deb") == 1
    assert names.count("libcublas-13-0_13.0.2.14-1_amd64.deb") == 1


@pytest.mark.parametrize("toolkit", list(SETS))
def test_versioned_depends_hold_within_each_set(toolkit):
    """Installing a whole set with pkg=version must satisfy every (>= v) of that set."""
    rel = next(r for r in debs.releases(SETS) if r.toolkit == toolkit)
    pkgs = {p.name: p for p in debs.toolkit_packages(rel)}
    for pkg in pkgs.values():
        for dep in pkg.depends:
            m = re.fullmatch(r"(\S+)(?: \(>= (\S+)\))?", dep)
            assert m and m.group(1) in pkgs, f"{pkg.name}: {dep} is not in cuda-toolkit=={toolkit}"
            if m.group(2):
                have = pkgs[m.group(1)].version.rsplit("-", 1)[0]
                assert have == m.group(2), f"{pkg.name} {pkg.version}: {dep}, the set has {have}"


def test_cuda_12_8_ships_the_standin_nvcc_and_nvidias_ptxas():
    nvcc = next(p for p in PACKAGES if p.name == "cuda-nvcc-12-8")
    [(path, text, mode)] = nvcc.texts
    assert (path, mode) == ("usr/local/cuda-12.8/bin/nvcc", 0o755)
    assert text.splitlines()[1] == "# SANDBOX STAND-IN -- NOT NVIDIA's nvcc."
    assert "release 12.8, V12.8.93" in text
    assert (SETS["12.8.1"]["nvidia-cuda-nvcc-cu12"], "nvidia/cuda_nvcc/bin/", "usr/local/cuda-12.8/bin/") \
        in nvcc.files
    # Only the 12.x packages have a stand-in; 13.0's nvcc comes from the wheel.
    assert [p.name for p in PACKAGES if p.texts and p.name.startswith("cuda-nvcc")] == ["cuda-nvcc-12-8"]


@pytest.mark.parametrize("name,home,major,priority", [
    ("cuda-toolkit-13-0-config-common", "/usr/local/cuda-13.0", 13, 130),
    ("cuda-toolkit-12-8-config-common", "/usr/local/cuda-12.8", 12, 128),
])
def test_config_common_registers_alternatives(name, home, major, priority):
    for pkg in (p for p in PACKAGES if p.name == name):
        postinst = dict(pkg.scripts)["postinst"]
        assert f"update-alternatives --install /usr/local/cuda cuda {home} {priority}\n" in postinst
        assert f"--install /usr/local/cuda-{major} cuda-{major} {home} {priority}\n" in postinst


def test_cicc_moved_inside_the_nvvm_wheel():
    # nvidia-nvvm 13.0.48 keeps cicc in bin/, 13.0.88 in nvvm/bin/; both install to nvvm/bin.
    cicc = {p.version: src for p in PACKAGES if p.name == "libnvvm-13-0"
            for _, src, dest in p.files if dest.endswith("/nvvm/bin/cicc")}
    assert cicc == {"13.0.48-1": "nvidia/cu13/bin/cicc", "13.0.88-1": "nvidia/cu13/nvvm/bin/cicc"}


H1, H2 = "a" * 64, "b" * 64


@pytest.mark.parametrize("text,error", [
    (f"x==1 --hash=sha256:{H1}\n", "outside any"),
    (f"[cuda-toolkit==1.0.0]\nx==1 --hash=sha256:{H1}\nx==2 --hash=sha256:{H2}\n", "twice in one release set"),
    (f"[cuda-toolkit==1.0.0]\nx==1 --hash=sha256:{H1}\n[cuda-toolkit==1.0.1]\nx==1 --hash=sha256:{H2}\n",
     "two hashes"),
    ("[cuda-toolkit==1.0.0]\n[cuda-toolkit==1.0.0]\n", "appears twice"),
    ("[cuda-toolkit==1.0.0]\nx==1\n", "expected"),
])
def test_read_lock_refuses(tmp_path, text, error):
    lock = tmp_path / "wheels.lock"
    lock.write_text(text)
    with pytest.raises(ValueError, match=error):
        read_lock(lock)


def test_one_download_batch_per_version_of_a_name():
    a1, a2, b = LockedWheel("a", "1", H1), LockedWheel("a", "2", H2), LockedWheel("b", "1", H1)
    assert _batches([a1, b, a2]) == [[a1, b], [a2]]
    assert len(locked_wheels(SETS)) == len(set(locked_wheels(SETS)))


# The sbsa directories (Arm servers): the same release from NVIDIA's aarch64 wheels.
ARM_SETS = read_lock(LOCKS["aarch64"])
ARM_PACKAGES = debs.all_packages(ARM_SETS, "aarch64", distro_keyring("debian12", "sbsa"))


def test_the_aarch64_lock_holds_the_x86_64_release_at_the_same_versions():
    assert list(ARM_SETS) == ["13.0.2"]
    assert {n: w.version for n, w in ARM_SETS["13.0.2"].items()} == {n: w.version for n, w in SETS["13.0.2"].items()}
    # Other files: each CPU's wheel has its own hash.
    assert not {w.sha256 for w in ARM_SETS["13.0.2"].values()} & {w.sha256 for w in SETS["13.0.2"].values()}


def test_sbsa_packages_are_arm64_under_targets_sbsa_linux():
    by_name = {p.name: p for p in ARM_PACKAGES}
    assert {p.name: p.version for p in ARM_PACKAGES} == {**_versions("13.0.2"), "cuda-keyring": "1.1-1"}
    assert {p.arch for p in ARM_PACKAGES if p.name not in ("cuda-toolkit-13-0-config-common", "cuda-keyring")} \
        == {"arm64"}
    dests = [dest for p in ARM_PACKAGES for _, _, dest in p.files]
    assert dests and not [d for d in dests if "x86_64" in d]
    assert "usr/local/cuda-13.0/targets/sbsa-linux/include/" in dests
    assert ("usr/local/cuda-13.0/include", "targets/sbsa-linux/include") in by_name["cuda-cudart-dev-13-0"].links
    assert by_name["cuda-driver-dev-13-0"].generated == (
        ("usr/local/cuda-13.0/targets/sbsa-linux/lib/stubs/libcuda.so", "libcuda-stub-aarch64"),)
    assert [path for path, _ in by_name["cuda-keyring"].generated] == [
        debs.KEYRING_PATH, "etc/apt/sources.list.d/cuda-debian12-sbsa.list"]
