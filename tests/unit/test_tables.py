"""The compatibility tables and FlashInfer's arch rules, table-driven."""

import pytest
from packaging.version import Version as V

from bringup import cuda, flashinfer as fi
from bringup.config import Config
from bringup.plan import MIN_PYTHON, plan
from bringup.platforms import (DISTRIBUTIONS, REPO_EVIDENCE, distribution, dpkg_arch, repo_arch, repo_distro,
                               repo_evidence, supported_platforms, venv_python)
from bringup.torch_builds import arch_list_for_build, covers_sm


@pytest.mark.parametrize("flashinfer,nvcc,sm,expected", [
    ("0.7.0", "13.0", "12.0", "12.0f"),
    ("0.7.0", "12.9", "12.1", "12.1a"),
    ("0.7.0", "12.8", "12.0", fi.ArchError),
    ("0.7.0", "13.0", "10.0", "10.0a"),
    ("0.7.2", "12.8", "12.0", "12.0a"),
    ("0.7.2", "12.6", "12.0", fi.ArchError),
    ("0.7.2", "12.8", "12.1", fi.ArchError),
    ("0.7.2", "13.0", "12.1", "12.1a"),
    ("0.7.4", "13.0", "9.0", "9.0a"),
    ("0.7.4", "13.0", "10.3", "10.3a"),
    ("0.7.4", "13.0", "11.0", "11.0a"),
    ("0.7.4", "13.0", "8.6", "8.6"),
])
def test_flashinfer_normalisation(flashinfer, nvcc, sm, expected):
    if expected is fi.ArchError:
        with pytest.raises(fi.ArchError):
            fi.normalize_arch(V(flashinfer), V(nvcc), V(sm))
    else:
        assert fi.normalize_arch(V(flashinfer), V(nvcc), V(sm)) == expected


def test_env_arch_list_without_suffix_is_normalised_and_may_fail_the_import():
    prediction = fi.predict(V("0.7.0"), V("12.8"), [V("12.0")], arch_list_env="12.0")
    assert prediction.outcome == "import_failure"


@pytest.mark.parametrize("nvcc,sm,supported", [
    ("12.8", "12.0", True), ("12.8", "12.1", False), ("12.9", "10.3", True), ("12.9", "11.0", False),
    ("13.0", "11.0", True), ("13.0", "10.1", False), ("11.8", "9.0", True), ("11.7", "9.0", False),
])
def test_cuda_supports_sm(nvcc, sm, supported):
    assert cuda.cuda_supports_sm(V(nvcc), V(sm)) is supported


@pytest.mark.parametrize("driver,cuda_version,runs", [
    ("580.95.05", "13.0", True), ("580.65.06", "13.1", True), ("575.51.03", "13.0", False),
    ("550.54.15", "12.8", True), ("520.61.05", "12.0", False), ("garbage", "13.0", False),
])
def test_driver_runs_cuda(driver, cuda_version, runs):
    assert cuda.driver_runs_cuda(driver, V(cuda_version)) is runs


@pytest.mark.parametrize("arch_list,sm,covered", [
    (["sm_90", "sm_100", "sm_120"], "12.1", True),
    (["sm_90", "sm_100", "sm_120"], "10.3", True),
    (["sm_90", "sm_100"], "12.0", False),
    (["sm_80", "compute_90"], "12.0", True),
    (["sm_86"], "8.0", False),
])
def test_torch_arch_coverage(arch_list, sm, covered):
    assert covers_sm(arch_list, V(sm)) is covered


def test_torch_cu130_arch_list_matches_the_wheel():
    assert arch_list_for_build(V("13.0")) == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


def test_workspace_dir_names_sort_like_flashinfer():
    assert fi.workspace_dir_name(["12.0f", "9.0a", "10.0a"]) == "90a_100a_120f"


@pytest.mark.parametrize("os_id,version_id,machine,expected", [
    ("ubuntu", "22.04", "x86_64", "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"),
    ("ubuntu", "24.04", "x86_64", "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"),
    ("debian", "12", "x86_64", "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"),
    ("debian", "13", "x86_64", "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/"),
    ("ubuntu", "22.04", "aarch64", "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/sbsa/"),
    ("ubuntu", "24.04", "aarch64", "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/"),
    ("debian", "12", "aarch64", "https://developer.download.nvidia.com/compute/cuda/repos/debian12/sbsa/"),
    ("debian", "13", "aarch64", "https://developer.download.nvidia.com/compute/cuda/repos/debian13/sbsa/"),
])
def test_repo_and_keyring_for_each_supported_platform(os_id, version_id, machine, expected):
    node = plan({"os": {"id": os_id, "version_id": version_id, "arch": machine}, "gpus": []}, Config())
    assert node.repo.url == expected
    assert node.repo.key_url == f"{expected}3bf863cc.pub"
    assert node.repo.fingerprint == "EB693B3035CD5710E231E123A4B469963BF863CC"
    assert "UNSUPPORTED_OS" not in node.codes()


@pytest.mark.parametrize("os_id,version_id,machine", [
    ("ubuntu", "20.04", "x86_64"), ("debian", "11", "x86_64"), ("rocky", "9.4", "x86_64"),
    ("ubuntu", "24.04", "ppc64le"), ("debian", "12", "armv7l"),
])
def test_unsupported_platform_is_a_blocker_before_any_change(os_id, version_id, machine):
    node = plan({"os": {"id": os_id, "version_id": version_id, "arch": machine}, "gpus": []}, Config())
    assert "UNSUPPORTED_OS" in node.codes("blocker") and node.repo is None


@pytest.mark.parametrize("name,floor", [
    ("NVIDIA B200", "570.133.20"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "575.51.03"),
    # No documented per-GPU floor (bringup/cuda.py says why); B200's must not leak onto GB200.
    ("NVIDIA GB200", None),
    ("NVIDIA GB10", None),
    ("NVIDIA H100 80GB HBM3", None),
])
def test_driver_floor_per_gpu(name, floor):
    assert cuda.driver_floor_for_gpu(name) == (V(floor) if floor else None)


@pytest.mark.parametrize("os_id,version_id,python3,found,expected", [
    # python3 new enough: the venv is built with it
    ("debian", "12", "3.11.2", {}, ("3.11", "/usr/bin/python3", (), "system")),
    ("ubuntu", "24.04", "3.12.3", {}, ("3.12", "/usr/bin/python3", (), "system")),
    ("debian", "13", "3.13.5", {}, ("3.13", "/usr/bin/python3", (), "system")),
    # 3.11.0rc1 is a 3.11 (pip and uv compare 3.11.0 against Requires-Python)
    ("ubuntu", "22.04", "3.11.0rc1", {}, ("3.11", "/usr/bin/python3", (), "system")),
    # Ubuntu 22.04: the archive's python3.11, to install, or already there
    ("ubuntu", "22.04", "3.10.12", {}, ("3.11", "/usr/bin/python3.11", ("python3.11", "python3.11-venv"), "install")),
    ("ubuntu", "22.04", "3.10.12", {"/usr/bin/python3.11": "3.11.0rc1"},
     ("3.11", "/usr/bin/python3.11", ("python3.11", "python3.11-venv"), "present")),
    # no python3 at all on a minimal Debian 12: its python3.11
    ("debian", "12", None, {}, ("3.11", "/usr/bin/python3.11", ("python3.11", "python3.11-venv"), "install")),
    # nothing new enough in the archive (or an OS outside the table)
    ("rhel", "9.4", "3.9.18", {"/usr/bin/python3.11": "3.11.7"}, ("3.9", "", (), "none")),
])
def test_venv_python(os_id, version_id, python3, found, expected):
    choice = venv_python(distribution(os_id, version_id), python3, found, MIN_PYTHON)
    assert (choice.version, choice.path, choice.packages, choice.source) == expected


def test_every_distribution_cites_a_cpython_that_exists_in_its_table():
    """Each distribution's python3 is one of its interpreters; each interpreter is installable."""
    for dist in DISTRIBUTIONS.values():
        assert dist.python3 in [interpreter.version for interpreter in dist.interpreters]
        for interpreter in dist.interpreters:
            assert interpreter.packages == (f"python{interpreter.version}", f"python{interpreter.version}-venv")


@pytest.mark.parametrize("distro,arch,evidence", [
    ("debian12", "x86_64", "nvidia"), ("ubuntu2404", "sbsa", "nvidia"), ("ubuntu2204", "x86_64", "nvidia"),
    ("ubuntu2204", "sbsa", "third-party"), ("debian12", "sbsa", "third-party"), ("debian13", "x86_64", "third-party"),
    ("debian13", "sbsa", "unverified"), ("rhel9", "x86_64", "unverified"),
])
def test_repo_evidence(distro, arch, evidence):
    assert repo_evidence(distro, arch) == evidence


def test_every_supported_platform_has_its_evidence_stated():
    for os_id, version_id, machine in supported_platforms():
        assert (repo_distro(os_id, version_id), repo_arch(machine)) in REPO_EVIDENCE


@pytest.mark.parametrize("machine,arch,dpkg", [("x86_64", "x86_64", "amd64"), ("aarch64", "sbsa", "arm64"),
                                               ("ppc64le", None, None)])
def test_cpu_tables(machine, arch, dpkg):
    assert (repo_arch(machine), dpkg_arch(machine)) == (arch, dpkg)


def test_unverified_repository_is_a_warning():
    node = plan({"os": {"id": "debian", "version_id": "13", "arch": "aarch64"}, "gpus": []}, Config())
    assert "REPO_UNVERIFIED" in node.codes("warning") and node.repo.evidence == "unverified"
    node = plan({"os": {"id": "ubuntu", "version_id": "24.04", "arch": "aarch64"}, "gpus": []}, Config())
    assert "REPO_UNVERIFIED" not in node.codes()
