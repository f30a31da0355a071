"""The sandbox apt repository's stand-in driver packages (sandbox/aptrepo/driver_debs.py):
the table's names, versions and relations (the driver step's package table), per
distribution family (Debian's and Ubuntu's names and revisions, the same stand-in
contents), real .debs built from it (dpkg-deb), the DKMS module stand-in's build as dkms
runs it, the packaged nvidia-smi, and the no-driver state's node files. The packages on a
node, with real dkms and a reboot: tests/sandbox/test_sandbox_driver.py."""

import shutil
import subprocess
from pathlib import Path

import pytest

from bringup import driver_packages
from sandbox import field_states, gpu_standin
from sandbox.aptrepo import debs, driver_debs
from sandbox.aptrepo.wheels import read_lock
from tests.unit.test_probe_driver import write

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_NAMES = {
    "nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-kernel-dkms", "nvidia-kernel-support", "libcuda1",
    "libnvidia-ml1", "nvidia-smi", "nvidia-persistenced", "nvidia-modprobe", "firmware-nvidia-gsp", "nvidia-open",
    "nvidia-driver", "cuda-drivers", "nvidia-driver-pinning-580", "nvidia-fabricmanager", "libnvidia-nscq",
    "nvidia-imex"}


def table(version="580.95.05", machine="x86_64", family="debian"):
    return {pkg.name: pkg for pkg in driver_debs.version_packages(version, machine, family)}


def test_both_versions_of_every_contract_package_and_the_host_kernel_s_headers():
    pkgs = driver_debs.packages("x86_64", "6.1.0-18-amd64")
    versions = {}
    for pkg in pkgs:
        versions.setdefault(pkg.name, set()).add(pkg.version)
    assert {name for name, found in versions.items() if found == {"580.95.05-1", "580.105.08-1"}} == CONTRACT_NAMES
    # The exact pinning packages (plan's correction of the contract), NVLSM at its own version.
    assert versions["nvidia-driver-pinning-580.95.05"] == {"580.95.05-1"}
    assert versions["nvidia-driver-pinning-580.105.08"] == {"580.105.08-1"}
    assert versions["nvlsm"] == {"2025.06.10-1"}
    assert versions["linux-headers-6.1.0-18-amd64"] == {"6.1.0-18-amd64-1"}
    assert len(versions) == len(CONTRACT_NAMES) + 4
    assert all("SANDBOX STAND-IN" in pkg.description for pkg in pkgs)
    # One .deb per name, version and architecture, none a toolkit package's name.
    assert len({debs.deb_filename(pkg) for pkg in pkgs}) == len(pkgs)
    assert not {pkg.name for pkg in pkgs} & {pkg.name for pkg in debs.all_packages(read_lock())}


@pytest.mark.parametrize("name, depends", [
    ("nvidia-open", ("nvidia-driver (= 580.95.05-1)", "nvidia-kernel-open-dkms (= 580.95.05-1)")),
    ("nvidia-driver", ("nvidia-driver-cuda (= 580.95.05-1)",)),
    ("nvidia-driver-cuda", tuple(f"{name} (= 580.95.05-1)" for name in (
        "nvidia-kernel-support", "libcuda1", "libnvidia-ml1", "nvidia-smi", "nvidia-persistenced", "nvidia-modprobe",
        "firmware-nvidia-gsp")) + ("nvidia-kernel-open-dkms (= 580.95.05-1) | nvidia-kernel-dkms (= 580.95.05-1)",)),
    ("nvidia-kernel-open-dkms", ("dkms", "nvidia-kernel-support (= 580.95.05-1)", "firmware-nvidia-gsp (= 580.95.05-1)")),
    ("nvidia-kernel-dkms", ("dkms", "nvidia-kernel-support (= 580.95.05-1)", "firmware-nvidia-gsp (= 580.95.05-1)")),
    ("nvidia-smi", ("libnvidia-ml1 (= 580.95.05-1)",)),
    ("nvidia-fabricmanager", ()),
])
def test_depends_as_the_contract_names_them(name, depends):
    assert table()[name].depends == depends


def test_the_version_pinning_package_pins_the_driver_s_packages_at_its_version():
    pkg = table("580.105.08")["nvidia-driver-pinning-580.105.08"]
    (path, text, _mode), = pkg.texts
    assert path == "etc/apt/preferences.d/nvidia-driver-pinning-580.105.08.pref" and pkg.arch == "all"
    assert "\nPin: version 580.105.08-1\nPin-Priority: 1000\n" in text
    assert set(text.split("Package: ")[1].split("\n")[0].split()) == set(driver_debs.PINNED)
    assert set(driver_debs.PINNED) <= set(table()) and "nvlsm" not in driver_debs.PINNED


def test_the_two_module_flavours_exclude_each_other():
    pkgs = table()
    assert pkgs["nvidia-kernel-open-dkms"].conflicts == ("nvidia-kernel-dkms",)
    assert pkgs["nvidia-kernel-dkms"].conflicts == ("nvidia-kernel-open-dkms",)


def test_closure_names_every_package_of_a_flavour_at_the_version():
    assert driver_debs.closure(("nvidia-driver-cuda", "nvidia-kernel-dkms"), "580.105.08", "proprietary") == [
        f"{name}=580.105.08-1" for name in sorted((
            "firmware-nvidia-gsp", "libcuda1", "libnvidia-ml1", "nvidia-driver-cuda", "nvidia-kernel-dkms",
            "nvidia-kernel-support", "nvidia-modprobe", "nvidia-persistenced", "nvidia-smi"))]


UBUNTU_NAMES = {
    "nvidia-dkms-580-open", "nvidia-dkms-580", "nvidia-kernel-common-580", "nvidia-firmware-580", "nvidia-modprobe",
    "libnvidia-compute-580", "nvidia-utils-580", "nvidia-compute-utils-580", "nvidia-driver-580-open",
    "nvidia-driver-580", "nvidia-driver-pinning-580"}


def test_ubuntu_s_stand_ins_take_ubuntu_s_names_and_nvidia_s_ubuntu_revisions():
    """NVIDIA's Ubuntu repository: the driver's packages at 0ubuntu1 (580.95.05, 580.105.08),
    Fabric Manager, NSCQ and IMEX at -1, under the same names as Debian's (bringup/driver_packages.py)."""
    pkgs = driver_debs.packages("x86_64", "6.1.0-18-amd64", "ubuntu")
    versions = {}
    for pkg in pkgs:
        versions.setdefault(pkg.name, set()).add(pkg.version)
    assert {name for name, found in versions.items() if found == {"580.95.05-0ubuntu1", "580.105.08-0ubuntu1"}} \
        == UBUNTU_NAMES
    assert versions["nvidia-fabricmanager"] == versions["libnvidia-nscq"] == versions["nvidia-imex"] == {
        "580.95.05-1", "580.105.08-1"}
    assert versions["nvidia-driver-pinning-580.95.05"] == {"580.95.05-0ubuntu1"}
    assert versions["nvlsm"] == {"2025.06.10-1"}
    assert all("SANDBOX STAND-IN" in pkg.description for pkg in pkgs)
    assert not set(versions) & (CONTRACT_NAMES - {"nvidia-fabricmanager", "libnvidia-nscq", "nvidia-imex",
                                                  "nvidia-driver-pinning-580", "nvidia-modprobe"})
    assert len({debs.deb_filename(pkg) for pkg in pkgs}) == len(pkgs)
    # NVLSM and the kernel headers are the same .debs in both families' directories; Fabric
    # Manager's, NSCQ's and IMEX's file names too, their control files Ubuntu's (section restricted).
    debian = {debs.deb_filename(pkg): pkg for pkg in driver_debs.packages("x86_64", "6.1.0-18-amd64")}
    same = sorted(pkg.name for pkg in pkgs if debian.get(debs.deb_filename(pkg)) == pkg)
    assert same == ["linux-headers-6.1.0-18-amd64", "nvlsm"]
    assert sorted({pkg.name for pkg in pkgs if debs.deb_filename(pkg) in debian} - set(same)) == [
        "libnvidia-nscq", "nvidia-fabricmanager", "nvidia-imex"]


@pytest.mark.parametrize("family", ["debian", "ubuntu"])
@pytest.mark.parametrize("version", driver_debs.VERSIONS)
def test_every_package_the_driver_step_installs_is_a_stand_in_of_its_family(family, version):
    """bringup/driver_packages.py's names (what a lock resolves from the index) are the
    stand-ins' names, each flavour's roots, Fabric Manager's, IMEX's and the pinning package."""
    names = driver_packages.names(family, driver_debs.BRANCH, version)
    served = table(version, family=family)
    wanted = {*(root for roots in names.roots.values() for root in roots), *names.fabric, *names.imex, names.pinning}
    assert wanted <= set(served)
    assert set(names.module.values()) == set(driver_debs.FAMILIES[family].modules.values())
    assert {served[name].version for name in (*names.fabric, *names.imex)} == {f"{version}-1"}


@pytest.mark.parametrize("name, depends", [
    ("nvidia-dkms-580-open", ("dkms", "nvidia-kernel-common-580 (= 580.95.05-0ubuntu1)")),
    ("nvidia-dkms-580", ("dkms", "nvidia-kernel-common-580 (= 580.95.05-0ubuntu1)")),
    ("nvidia-kernel-common-580",
     ("nvidia-firmware-580 (= 580.95.05-0ubuntu1)", "nvidia-modprobe (= 580.95.05-0ubuntu1)")),
    ("libnvidia-compute-580", ("nvidia-kernel-common-580 (= 580.95.05-0ubuntu1)",)),
    ("nvidia-utils-580", ("libnvidia-compute-580 (= 580.95.05-0ubuntu1)",)),
    ("nvidia-compute-utils-580", ("libnvidia-compute-580 (= 580.95.05-0ubuntu1)",)),
    ("nvidia-driver-580-open", tuple(f"{name} (= 580.95.05-0ubuntu1)" for name in (
        "libnvidia-compute-580", "nvidia-utils-580", "nvidia-compute-utils-580", "nvidia-dkms-580-open"))),
    ("nvidia-fabricmanager", ()),
])
def test_ubuntu_depends(name, depends):
    assert table(family="ubuntu")[name].depends == depends


def test_ubuntu_s_stand_ins_carry_debian_s_contents():
    """One builder, two families: the same files, in Ubuntu's packages (libcuda and NVML
    both in libnvidia-compute-580, nvidia-smi in nvidia-utils-580, persistenced's unit in
    nvidia-compute-utils-580)."""
    def files(family):
        return {path: (name, text) for name, pkg in table(family=family).items() if "pinning" not in name
                for path, text, _ in pkg.texts} | {
            path: (name, kind) for name, pkg in table(family=family).items() for path, kind in pkg.generated}
    debian, ubuntu = files("debian"), files("ubuntu")
    assert {path: what for path, (_, what) in debian.items()} == {path: what for path, (_, what) in ubuntu.items()}
    owners = {path: name for path, (name, _) in ubuntu.items()}
    assert owners["usr/bin/nvidia-smi"] == "nvidia-utils-580"
    assert owners["lib/systemd/system/nvidia-persistenced.service"] == "nvidia-compute-utils-580"
    assert owners["usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05"] == "libnvidia-compute-580"
    assert owners["usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05"] == "libnvidia-compute-580"
    assert owners["usr/src/nvidia-580.95.05/dkms.conf"] in ("nvidia-dkms-580-open", "nvidia-dkms-580")


def test_ubuntu_s_version_pinning_package_pins_every_revision_of_the_version():
    """Fabric Manager's revision (-1) is not the driver's (0ubuntu1): the pin is the upstream version's."""
    pkg = table("580.105.08", family="ubuntu")["nvidia-driver-pinning-580.105.08"]
    (path, text, _mode), = pkg.texts
    assert path == "etc/apt/preferences.d/nvidia-driver-pinning-580.105.08.pref" and pkg.arch == "all"
    assert "\nPin: version 580.105.08-*\nPin-Priority: 1000\n" in text
    assert set(text.split("Package: ")[1].split("\n")[0].split()) == set(driver_debs.FAMILIES["ubuntu"].pinned())
    assert {"nvidia-fabricmanager", "libnvidia-compute-580", "nvidia-dkms-580-open"} <= set(
        driver_debs.FAMILIES["ubuntu"].pinned())


def test_ubuntu_closure_names_every_package_of_a_flavour_at_the_version():
    assert driver_debs.closure(("nvidia-driver-580-open",), "580.105.08", "open", family="ubuntu") == [
        f"{name}=580.105.08-0ubuntu1" for name in sorted((
            "libnvidia-compute-580", "nvidia-compute-utils-580", "nvidia-dkms-580-open", "nvidia-driver-580-open",
            "nvidia-firmware-580", "nvidia-kernel-common-580", "nvidia-modprobe", "nvidia-utils-580"))]


def build(pkg, tmp_path) -> Path:
    """The real .deb of *pkg* (dpkg-deb), unpacked: (deb, tree)."""
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    deb = driver_debs.build_deb(pkg, debs.Context(), {}, out, work)
    tree = tmp_path / "tree"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    return deb, tree


@pytest.mark.parametrize("family, revision", [("debian", "1"), ("ubuntu", "0ubuntu1")])
@pytest.mark.parametrize("flavour, licence", [("open", "Dual MIT/GPL"), ("proprietary", "NVIDIA")])
def test_the_dkms_module_builds_an_elf_whose_modinfo_says_version_and_licence(tmp_path, flavour, licence, family,
                                                                              revision):
    pkg = table("580.105.08", family=family)[driver_debs.FAMILIES[family].modules[flavour]]
    deb, tree = build(pkg, tmp_path)
    control = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
    assert f"Package: {pkg.name}\nVersion: 580.105.08-{revision}\n" in control
    assert "Conflicts: " in control and "SANDBOX STAND-IN" in control
    source = tree / "usr/src/nvidia-580.105.08"
    assert 'PACKAGE_VERSION="580.105.08"' in (source / "dkms.conf").read_text()
    # dkms runs MAKE in a copy of the source tree.
    build_dir = tmp_path / "build"
    shutil.copytree(source, build_dir)
    subprocess.run(["sh", "./dkms-build.sh", "6.1.0-18-amd64"], cwd=build_dir, check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "SANDBOX_DKMS_SECONDS": "0", "CC": "gcc"})
    modinfo = subprocess.run(["readelf", "-p", ".modinfo", str(build_dir / "nvidia.ko")], capture_output=True,
                             text=True, check=True).stdout
    assert "version=580.105.08" in modinfo and f"license={licence}" in modinfo
    # What node-init.sh reads from it at boot.
    read = subprocess.run(["sh", "-c", "tr '\\000' '\\n' < nvidia.ko | sed -n 's/^license=//p'"], cwd=build_dir,
                          capture_output=True, text=True, check=True).stdout
    assert read == f"{licence}\n"


def packaged_smi(tmp_path, banner: str | None):
    """The nvidia-smi package's script run against a scratch root (banner None: no module)."""
    root = tmp_path / "root"
    write(root / "usr/share/sandbox-gpu/driver-version", "580.82.07\n")
    write(root / "replay", "#!/bin/sh\necho 'Driver Version: 580.82.07'\n", 0o755)
    if banner is not None:
        write(root / "proc/version", banner)
    script = driver_debs._text("nvidia-smi", VERSION="580.95.05")
    for path, scratch in (("/proc/driver/nvidia/version", root / "proc/version"),
                          ("/usr/share/sandbox-gpu/driver-version", root / "usr/share/sandbox-gpu/driver-version"),
                          ("/usr/lib/sandbox-gpu/sandbox-gpu-replay", root / "replay")):
        assert path in script
        script = script.replace(path, str(scratch))
    write(tmp_path / "nvidia-smi", script, 0o755)
    return subprocess.run([str(tmp_path / "nvidia-smi")], capture_output=True, text=True)


@pytest.mark.parametrize("banner, status, first_line", [
    (None, 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
              "latest NVIDIA driver is installed and running."),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.105.08  Release Build\n", 18,
     "Failed to initialize NVML: Driver/library version mismatch"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n", 0,
     "Driver Version: 580.95.05"),
], ids=["no module", "module at another version", "module at its version"])
def test_packaged_nvidia_smi_answers_only_with_its_module_loaded(tmp_path, banner, status, first_line):
    proc = packaged_smi(tmp_path, banner)
    assert (proc.returncode, proc.stdout.splitlines()[0]) == (status, first_line)


def test_no_driver_state_has_no_layer_and_leaves_the_driver_out(tmp_path, monkeypatch):
    assert field_states.expand(["no-driver"]) == []
    assert field_states.canonical(["no-driver", "nvidia-repo"]) == ["nvidia-repo", "no-driver"]
    monkeypatch.setattr(gpu_standin.os, "chown", lambda *args: None)  # root:root needs root; not this test's point
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    upper.mkdir()
    lower.mkdir()
    gpu_standin.install_driver(upper, [lower], "rtx-pro-6000-x8", driver=False)
    files = sorted(str(path.relative_to(upper)) for path in upper.rglob("*") if path.is_file())
    assert files and all(name.startswith(gpu_standin.NODE_GPU_DATA + "/") for name in files)
    assert not (upper / gpu_standin.NODE_GPU_DATA / "module-preinstalled").exists()


@pytest.mark.parametrize("family", ["debian", "ubuntu"])
@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_imex_is_served_for_both_cpus_with_its_unit_and_no_nodes_config(family, machine):
    """nvidia-imex (NVIDIA's IMEX user's guide: x86_64 and aarch64): the daemon, its unit and
    config.cfg (a conffile); no nodes_config.cfg, which is the administrator's."""
    pkg = table("580.95.05", machine, family)["nvidia-imex"]
    assert pkg.version == "580.95.05-1" and pkg.arch == {"x86_64": "amd64", "aarch64": "arm64"}[machine]
    assert {path: mode for path, _, mode in pkg.texts} == {
        "usr/bin/nvidia-imex": 0o755, "etc/nvidia-imex/config.cfg": 0o644,
        "lib/systemd/system/nvidia-imex.service": 0o644}
    assert pkg.conffiles == ("/etc/nvidia-imex/config.cfg",) and pkg.depends == ()
    assert "SANDBOX STAND-IN" in pkg.description
    assert all("SANDBOX STAND-IN" in text for _, text, _ in pkg.texts)
    unit = next(text for path, text, _ in pkg.texts if path.endswith(".service"))
    assert "ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg\n" in unit
    assert "nvidia-imex" in driver_debs.FAMILIES[family].pinned()


def packaged_imex(tmp_path, banner: str | None, nodes: str | None):
    """The nvidia-imex package's daemon run against a scratch root (banner None: no module;
    nodes None: no nodes config), its endless wait replaced by an exit."""
    root = tmp_path / "root"
    if banner is not None:
        write(root / "proc/version", banner)
    if nodes is not None:
        write(root / "nodes_config.cfg", nodes)
    write(root / "config.cfg", driver_debs._text("imex-config.cfg").replace(
        "/etc/nvidia-imex/nodes_config.cfg", str(root / "nodes_config.cfg")))
    script = driver_debs._text("nvidia-imex", VERSION="580.95.05")
    assert "/proc/driver/nvidia/version" in script and script.rstrip().endswith("exec sleep infinity")
    script = script.replace("/proc/driver/nvidia/version", str(root / "proc/version")).replace(
        "exec sleep infinity", "exit 0")
    write(tmp_path / "nvidia-imex", script, 0o755)
    return subprocess.run([str(tmp_path / "nvidia-imex"), "-c", str(root / "config.cfg")], capture_output=True,
                          text=True)


OPEN_580_95 = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build\n"


@pytest.mark.parametrize("banner, nodes, status, said", [
    (None, None, 1, "SANDBOX STAND-IN: IMEX 580.95.05 refuses the loaded driver (none): not the driver stack it "
                    "was released with"),
    (OPEN_580_95.replace("580.95.05", "580.105.08"), "10.0.0.1\n", 1,
     "SANDBOX STAND-IN: IMEX 580.95.05 refuses the loaded driver 580.105.08: not the driver stack it was "
     "released with"),
    # As NVIDIA's service: not started before the nodes config lists the domain.
    (OPEN_580_95, None, 1, "SANDBOX STAND-IN: IMEX 580.95.05: {nodes} lists no node (none to bind to); not started"),
    (OPEN_580_95, "# the domain\n\n", 1, "SANDBOX STAND-IN: IMEX 580.95.05: {nodes} lists no node (none to bind to); "
                                          "not started"),
    (OPEN_580_95, "10.0.0.1\n10.0.0.2 # tray 2\n", 0,
     "SANDBOX STAND-IN: IMEX 580.95.05 running for driver 580.95.05; {nodes} lists 2 node(s)"),
], ids=["no module", "module at another version", "no nodes config", "nodes config without address", "two trays"])
def test_packaged_imex_runs_only_at_its_driver_s_version_and_with_a_nodes_config(tmp_path, banner, nodes, status,
                                                                                  said):
    proc = packaged_imex(tmp_path, banner, nodes)
    out = (proc.stdout + proc.stderr).strip()
    assert (proc.returncode, out) == (status, said.format(nodes=tmp_path / "root" / "nodes_config.cfg"))
