"""The DCGM step (gpu_diag_install; bringup/plan/dcgm.py, tasks/dcgm.py) and its locks
(bringup/dcgm_locks.py, control/locks.py ``dcgm``): scenario tables, facts and lock files in,
plan and findings out; the shipped locks fresh for every platform the sandbox serves; make
lock-dcgm on a signed local index."""

import json
import subprocess
from pathlib import Path

import pytest

from bringup import dcgm_locks, deb_index, locks, toolkit_locks
from bringup.config import Config, ConfigError
from bringup.locks import LockFiles
from bringup.plan import plan
from bringup.plan.context import PlanContext
from bringup.plan.dcgm import dcgm_plan
from bringup.plan.model import DcgmPlan, NodePlan, RepoPlan
from bringup.steps import APT_STEPS, DEPLOY_STEPS
from control import locks as lockgen
from sandbox.aptrepo import dcgm_debs
from tests.unit.test_locks import SERVED, signed_repo, signer  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
LOCK = "files/locks/dcgm-4-debian12-x86_64.txt"
GOOD = ("# target: debian12 amd64\ndatacenter-gpu-manager-4-core=1:4.4.1-1\n"
        "datacenter-gpu-manager-4-cuda13=1:4.4.1-1\n")
REPO = RepoPlan(url="http://r/debian12/x86_64/", key_url="", fingerprint="", distro="debian12", arch="x86_64",
                keyring="", source_file="", preference_file="", pin_origin="")
PINS = ("datacenter-gpu-manager-4-core=1:4.4.1-1", "datacenter-gpu-manager-4-cuda13=1:4.4.1-1")


RELEASE = (ROOT / "files/locks/dcgm-4.in").read_text()


def decide(settings, files, facts=None, repo=REPO, release=True):
    found = []
    files = {**({"files/locks/dcgm-4.in": RELEASE} if release else {}), **files}
    context = PlanContext.of({"os": {"arch": "x86_64"}, **(facts or {})}, Config(**settings), LockFiles.of(files),
                             found.append)
    return dcgm_plan(context, repo), found


@pytest.mark.parametrize("name,settings,files,facts,repo,expected,codes", [
    ("off by default: nothing", {}, {LOCK: GOOD}, None, REPO, DcgmPlan(install=False), []),
    ("on: the lock's pins and the unit", {"gpu_diag_install": True}, {LOCK: GOOD}, None, REPO,
     DcgmPlan(install=True, lock=LOCK, pins=PINS, unit="nvidia-dcgm"), []),
    ("on, the step not run", {"gpu_diag_install": True, "deploy_steps": ("repo", "toolkit")}, {LOCK: GOOD}, None,
     REPO, DcgmPlan(install=False), []),
    ("on, no repository (unsupported OS: its own blocker)", {"gpu_diag_install": True}, {LOCK: GOOD}, None, None,
     DcgmPlan(install=False), []),
    ("on, no lock for the platform", {"gpu_diag_install": True}, {}, None, REPO,
     DcgmPlan(install=False, lock=LOCK), [("DCGM_LOCK_MISSING", "blocker")]),
    ("on, an unreadable lock", {"gpu_diag_install": True}, {LOCK: "datacenter-gpu-manager-4-core\n"}, None, REPO,
     DcgmPlan(install=False, lock=LOCK), [("DCGM_LOCK_MISSING", "blocker")]),
    ("on, a lock without the cuda13 package", {"gpu_diag_install": True},
     {LOCK: "datacenter-gpu-manager-4-core=1:4.4.1-1\n"}, None, REPO,
     DcgmPlan(install=False, lock=LOCK), [("DCGM_LOCK_MISSING", "blocker")]),
    ("on, the diagnostic asked and dcgmi missing: deploy installs it", {"gpu_diag_install": True}, {LOCK: GOOD},
     {"gpu_diag": {"level": 1, "installed": False, "busy": [], "ran": False}}, REPO,
     DcgmPlan(install=True, lock=LOCK, pins=PINS, unit="nvidia-dcgm"), [("DCGM_INSTALL", "fix")]),
    ("on, dcgmi there: no finding", {"gpu_diag_install": True}, {LOCK: GOOD},
     {"gpu_diag": {"level": 1, "installed": True, "busy": [], "ran": True}}, REPO,
     DcgmPlan(install=True, lock=LOCK, pins=PINS, unit="nvidia-dcgm"), []),
])
def test_the_plan_decides(name, settings, files, facts, repo, expected, codes):
    planned, found = decide(settings, files, facts, repo)
    assert planned == expected, name
    assert [(finding.code, finding.severity) for finding in found] == codes, name


def test_a_missing_lock_names_the_command_that_makes_it():
    _, found = decide({"gpu_diag_install": True}, {})
    assert "no DCGM lock files/locks/dcgm-4-debian12-x86_64.txt" in found[0].message
    assert "make lock-dcgm CUDA_REPO_URL=" in found[0].fix and "CUDA_PLATFORMS=debian12-x86_64" in found[0].fix
    assert "gpu_diag_install: false" in found[0].fix


@pytest.mark.parametrize("value", ["yes please", 2, ["true"]])
def test_a_bad_value_is_one_clear_line(value):
    with pytest.raises(ConfigError) as error:
        Config.from_data({"gpu_diag_install": value}, host="n1")
    text = str(error.value)
    assert len(text.splitlines()) == 1 and text.startswith("n1: setting gpu_diag_install=")


def test_the_step_is_an_apt_step_after_the_toolkit():
    assert DEPLOY_STEPS.index("dcgm") == DEPLOY_STEPS.index("toolkit") + 1 and "dcgm" in APT_STEPS


def test_the_whole_plan_carries_it_and_its_locked_pins():
    facts = json.loads((ROOT / "tests" / "fixtures" / "facts" / "incident.json").read_text())
    node = plan(facts, Config(gpu_diag_install=True))
    assert node.dcgm == DcgmPlan(install=True, lock=LOCK, pins=tuple(
        f"{name}={version}" for name, version in
        toolkit_locks.parse_toolkit_lock((ROOT / LOCK).read_text()).items()), unit="nvidia-dcgm")
    assert node.locked_pins()[LOCK] == list(node.dcgm.pins)
    assert node.as_dict()["dcgm"]["install"] is True
    off = plan(facts, Config())
    assert off.dcgm == DcgmPlan(install=False) and LOCK not in off.locked_pins()


def test_locked_pins_only_when_the_step_runs():
    dcgm = DcgmPlan(install=True, lock="d.txt", pins=("a=1-1",), unit="nvidia-dcgm")
    assert NodePlan(steps=("dcgm",), dcgm=dcgm).locked_pins() == {"d.txt": ["a=1-1"]}
    assert NodePlan(steps=("toolkit",), dcgm=dcgm).locked_pins() == {}


@pytest.mark.parametrize("name,expected", [
    ("dcgm-4.in", True), ("files/locks/dcgm-12.in", True), ("dcgm-4.0.in", False), ("cuda-13.0.in", False),
    ("dcgm.in", False),
])
def test_is_dcgm_input(name, expected):
    assert dcgm_locks.is_dcgm_input(name) is expected


def test_the_other_locks_do_not_take_the_dcgm_input():
    assert [path.name for path in lockgen.dcgm_inputs()] == ["dcgm-4.in"]
    assert all(not dcgm_locks.is_dcgm_input(path.name) for path in lockgen.python_inputs())


@pytest.mark.parametrize("distro,machine", SERVED, ids=[f"{d}-{m}" for d, m in SERVED])
def test_each_served_platform_has_a_fresh_dcgm_lock(distro, machine):
    """Each platform the sandbox serves: its DCGM lock, fresh against dcgm-4.in, every package
    of the .in at its upstream version (make lock-dcgm CUDA_REPO_URL=sandbox)."""
    source = ROOT / dcgm_locks.dcgm_input_name()
    path = ROOT / dcgm_locks.dcgm_lock_name(distro, machine)
    assert path.is_file(), f"{path.name} is missing: run make lock-dcgm CUDA_REPO_URL=sandbox"
    text = path.read_text()
    header = locks.read_header(text)
    assert header["input-sha256"] == locks.sha256(source.read_bytes()), f"{path.name} is stale: run make lock-dcgm"
    wanted = toolkit_locks.parse_toolkit_input(source.read_text())
    pins = toolkit_locks.parse_toolkit_lock(text)
    assert {name: deb_index.upstream_version(version) for name, version in pins.items()} == wanted


def test_no_dcgm_lock_without_a_served_platform():
    expected = {dcgm_locks.dcgm_lock_name(d, m).rsplit("/", 1)[1] for d, m in SERVED}
    assert {path.name for path in (ROOT / locks.LOCKS_DIR).glob("dcgm-*-*-*.txt")} == expected


INDEX = """Package: datacenter-gpu-manager-4-core
Version: 1:4.4.1-1
Architecture: amd64
Filename: ./datacenter-gpu-manager-4-core_4.4.1-1_amd64.deb

Package: datacenter-gpu-manager-4-core
Version: 1:4.4.2-1
Architecture: amd64
Filename: ./datacenter-gpu-manager-4-core_4.4.2-1_amd64.deb

Package: datacenter-gpu-manager-4-cuda13
Version: 1:4.4.1-1
Architecture: amd64
Depends: datacenter-gpu-manager-4-core (= 1:4.4.1-1)
Filename: ./datacenter-gpu-manager-4-cuda13_4.4.1-1_amd64.deb
"""


def test_make_lock_dcgm_on_a_signed_local_index(tmp_path, signer):  # noqa: F811
    """``python -m control.locks dcgm`` (make lock-dcgm), offline, on an index in NVIDIA's
    versions (the epoch 1): written once, unchanged the second time, read back by the plan."""
    repos = tmp_path / "repos" / "debian12" / "x86_64"
    fingerprint = signed_repo(repos, signer, INDEX)
    (tmp_path / "files" / "locks").mkdir(parents=True)
    (tmp_path / "files" / "locks" / "dcgm-4.in").write_text((ROOT / "files/locks/dcgm-4.in").read_text())
    url, platforms = (tmp_path / "repos").as_uri(), [("debian12", "x86_64")]
    assert lockgen.dcgm(url, platforms, root=tmp_path, fingerprint=fingerprint) == 1
    lock = tmp_path / LOCK
    first = lock.read_text()
    assert lockgen.dcgm(url, platforms, root=tmp_path, fingerprint=fingerprint) == 0 and lock.read_text() == first
    assert toolkit_locks.parse_toolkit_lock(first) == {"datacenter-gpu-manager-4-core": "1:4.4.1-1",
                                                       "datacenter-gpu-manager-4-cuda13": "1:4.4.1-1"}
    planned, found = decide({"gpu_diag_install": True}, {LOCK: first})
    assert planned.pins == ("datacenter-gpu-manager-4-core=1:4.4.1-1", "datacenter-gpu-manager-4-cuda13=1:4.4.1-1")


def test_a_version_the_index_lacks_is_named(tmp_path, signer):  # noqa: F811
    repos = tmp_path / "repos" / "debian12" / "x86_64"
    fingerprint = signed_repo(repos, signer, INDEX)
    (tmp_path / "files" / "locks").mkdir(parents=True)
    (tmp_path / "files" / "locks" / "dcgm-4.in").write_text("datacenter-gpu-manager-4-cuda13 4.9.9\n")
    with pytest.raises(locks.LockError, match="dcgm-4-debian12-x86_64.txt from dcgm-4.in: datacenter-gpu-manager-4"
                                              "-cuda13 4.9.9 is not in"):
        lockgen.dcgm((tmp_path / "repos").as_uri(), [("debian12", "x86_64")], root=tmp_path, fingerprint=fingerprint)


@pytest.mark.parametrize("url,command", [
    ("sandbox", "-m sandbox.aptrepo lock --kind dcgm --platforms 'debian12-x86_64'"),
    ("file:///srv/mirror/cuda/repos", "-m control.locks dcgm --repo-url 'file:///srv/mirror/cuda/repos' "
                                      "--platforms 'debian12-x86_64'"),
])
def test_make_lock_dcgm_asks_the_sandbox_only_for_sandbox(url, command):
    run = subprocess.run(["make", "-n", "--no-print-directory", "lock-dcgm", f"CUDA_REPO_URL={url}",
                          "CUDA_PLATFORMS=debian12-x86_64"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].endswith(command), run.stdout
    assert "lock-dcgm" in (ROOT / "Makefile").read_text().split("\nlock:", 1)[1].splitlines()[0]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_sandbox_stand_ins_say_so_and_carry_what_the_lock_names(machine):
    """Declared stand-ins: each description says SANDBOX STAND-IN; the core ships dcgmi, the
    host engine and its unit; the cuda13 package depends on the core at its version; the
    locked version is served."""
    pkgs = dcgm_debs.packages(machine)
    assert all("SANDBOX STAND-IN" in pkg.description for pkg in pkgs)
    served = {(pkg.name, pkg.version) for pkg in pkgs}
    for pin in PINS:
        assert tuple(pin.split("=")) in served
    core = next(pkg for pkg in pkgs if pkg.name == dcgm_debs.CORE and pkg.version == "1:4.4.1-1")
    paths = {path for path, _, _ in core.texts}
    assert {"usr/bin/dcgmi", "usr/bin/nv-hostengine", "lib/systemd/system/nvidia-dcgm.service"} <= paths
    cuda13 = next(pkg for pkg in pkgs if pkg.name == dcgm_debs.CUDA13 and pkg.version == "1:4.4.1-1")
    assert cuda13.depends == ("datacenter-gpu-manager-4-core (= 1:4.4.1-1)",)


# review3: validate names what deploy's DCGM step installs from the probe's packages, not
# only when the diagnostic (gpu_diag, off by default) happened to look for dcgmi.
@pytest.mark.parametrize("installed,codes", [
    ({}, [("DCGM_INSTALL", "fix")]),
    ({"datacenter-gpu-manager-4-core": "1:4.4.2-1", "datacenter-gpu-manager-4-cuda13": "1:4.4.2-1"},
     [("DCGM_INSTALL", "fix")]),
    ({"datacenter-gpu-manager-4-core": "1:4.4.1-1", "datacenter-gpu-manager-4-cuda13": "1:4.4.1-1"}, []),
], ids=["not installed", "another version", "at the lock"])
def test_validate_names_the_install_without_the_diagnostic(installed, codes):
    planned, found = decide({"gpu_diag_install": True}, {LOCK: GOOD}, {"cuda_packages": installed})
    assert planned.install
    assert [(finding.code, finding.severity) for finding in found] == codes


def test_the_probe_lists_dcgm_packages():
    script = (ROOT / "files" / "probe.d" / "packages.sh").read_text()
    assert "'datacenter-gpu-manager-*'" in script


# review3: the lock is checked against its release (dcgm-4.in) and by shape before any of it
# reaches apt: the finding's own text promised "lacks a package of files/locks/dcgm-4.in".


@pytest.mark.parametrize("lock,says", [
    (GOOD + "nvidia-driver-open=570.1-1\n", "holds nvidia-driver-open, which files/locks/dcgm-4.in does not list"),
    ("datacenter-gpu-manager-4-cuda13=1:4.4.1-1\n", "lacks datacenter-gpu-manager-4-core of files/locks/dcgm-4.in"),
    (GOOD.replace("cuda13=1:4.4.1-1", "cuda13=1:4.4.2-1"), "is not files/locks/dcgm-4.in's release"),
    (GOOD + "-oAPT::Get::AllowUnauthenticated=true=1\n", "is not a Debian package=version"),
    (GOOD.replace("core=1:4.4.1-1", "core=1:4.4.1-1 --allow-downgrades"), "is not a Debian package=version"),
], ids=["a package the release does not list", "a package of the release missing", "another release",
        "an apt option as a name", "a space in a version"])
def test_a_lock_that_is_not_the_release_blocks(lock, says):
    planned, found = decide({"gpu_diag_install": True}, {LOCK: lock, "files/locks/dcgm-4.in": RELEASE})
    assert planned == DcgmPlan(install=False, lock=LOCK)
    assert [(finding.code, finding.severity) for finding in found] == [("DCGM_LOCK_MISSING", "blocker")]
    assert says in found[0].message


def test_the_shipped_release_and_lock_plan_an_install():
    planned, found = decide({"gpu_diag_install": True},
                            {LOCK: (ROOT / LOCK).read_text(), "files/locks/dcgm-4.in": RELEASE})
    assert planned.install and planned.pins == PINS and found == []


def test_an_epoch_version_is_the_release():
    lock = GOOD.replace("=4.4.1-1", "=1:4.4.1-1")
    planned, found = decide({"gpu_diag_install": True}, {LOCK: lock, "files/locks/dcgm-4.in": RELEASE})
    assert planned.install and found == []


class _Op:
    def __init__(self, changed):
        self.changed = changed

    def did_change(self):
        return self.changed


@pytest.mark.parametrize("install_changed,start_changed,restarts", [
    (True, False, True), (True, True, False), (False, False, False)],
    ids=["packages moved, engine was running: restarted", "first install: started once", "nothing changed"])
def test_a_running_host_engine_is_restarted_when_its_packages_change(monkeypatch, install_changed, start_changed,
                                                                    restarts):
    """review3: NVIDIA's postinst restarts nothing: a lock moved to another DCGM release left
    the old nv-hostengine running (systemd.service running=True saw it running)."""
    import tasks.dcgm as step

    declared = []

    class Apt:
        @staticmethod
        def packages(**kwargs):
            declared.append(("install", kwargs))
            return _Op(install_changed)

    class Systemd:
        @staticmethod
        def daemon_reload(**kwargs):
            declared.append(("reload", kwargs))
            return _Op(False)

        @staticmethod
        def service(**kwargs):
            declared.append(("service", kwargs))
            return _Op(start_changed)

    class Host:
        @staticmethod
        def get_fact(*args, **kwargs):
            return {"mode": 755}

    monkeypatch.setattr(step, "apt", Apt)
    monkeypatch.setattr(step, "systemd", Systemd)
    monkeypatch.setattr(step, "host", Host)
    monkeypatch.setattr(step, "finish_interrupted_dpkg", lambda **kwargs: _Op(False))
    node = NodePlan(steps=("dcgm",))
    node.dcgm = DcgmPlan(install=True, lock=LOCK, pins=PINS, unit="nvidia-dcgm")
    step.nvidia_dcgm.__wrapped__(node)
    restart = [kwargs for kind, kwargs in declared if kind == "service" and kwargs.get("restarted")]
    assert len(restart) == 1, declared
    assert restart[0]["_if"]() is restarts


# review5: whether the host engine is restarted or started was decided from this run's apt
# alone: a run stopped between apt and the restart left the old nv-hostengine running for
# good (the re-run's apt changed nothing), a running engine whose unit was disabled was only
# enabled after a package change, and validate never named starting a stopped nvidia-dcgm.
AT_LOCK = {"datacenter-gpu-manager-4-core": "1:4.4.1-1", "datacenter-gpu-manager-4-cuda13": "1:4.4.1-1"}


def engine(active="active", enabled="enabled", predates=False):
    return {"unit": {"load_state": "loaded", "active_state": active, "unit_file_state": enabled},
            "engine_predates_packages": predates}


@pytest.mark.parametrize("dcgm,restart,says", [
    (engine(), False, None),
    (engine(predates=True), True, "started before DCGM's packages were last installed"),
    (engine(active="inactive", enabled="disabled"), False, "nvidia-dcgm is inactive, disabled: deploy enables and "
                                                           "starts it"),
    (engine(active="failed"), False, "nvidia-dcgm is failed: deploy enables and starts it"),
    (engine(enabled="disabled"), False, "nvidia-dcgm is disabled"),
    (None, False, None),
    ({"unit": None, "engine_predates_packages": False}, False, None),
], ids=["running, newer than its packages", "running the replaced packages", "stopped and disabled", "failed",
        "running, disabled", "an older probe", "no systemd"])
def test_validate_names_what_deploy_does_to_the_host_engine(dcgm, restart, says):
    facts = {"cuda_packages": AT_LOCK, **({"dcgm": dcgm} if dcgm is not None else {})}
    planned, found = decide({"gpu_diag_install": True}, {LOCK: GOOD}, facts)
    assert planned.install and planned.restart is restart
    if says is None:
        assert found == []
    else:
        assert [(finding.code, finding.severity) for finding in found] == [("DCGM_INSTALL", "fix")]
        assert says in found[0].message, found[0].message


@pytest.mark.parametrize("install_changed,enable_changed,start_changed,planned_restart,restarts", [
    (True, True, False, False, True),
    (False, False, False, True, True),
    (False, False, True, True, False),
    (False, True, False, False, False),
], ids=["packages moved, engine running but disabled: enabled and restarted",
        "re-run after a stop between apt and the restart: the probe's stale engine restarted",
        "stale engine found stopped: started once", "only enabled: no restart"])
def test_the_restart_follows_the_engine_not_only_this_run(monkeypatch, install_changed, enable_changed, start_changed,
                                                          planned_restart, restarts):
    import tasks.dcgm as step

    declared = []

    class Apt:
        @staticmethod
        def packages(**kwargs):
            return _Op(install_changed)

    class Systemd:
        @staticmethod
        def daemon_reload(**kwargs):
            return _Op(False)

        @staticmethod
        def service(**kwargs):
            declared.append(kwargs)
            if kwargs.get("running"):
                return _Op(start_changed)
            return _Op(enable_changed if kwargs.get("enabled") else False)

    class Host:
        @staticmethod
        def get_fact(*args, **kwargs):
            return {"mode": 755}

    monkeypatch.setattr(step, "apt", Apt)
    monkeypatch.setattr(step, "systemd", Systemd)
    monkeypatch.setattr(step, "host", Host)
    monkeypatch.setattr(step, "finish_interrupted_dpkg", lambda **kwargs: _Op(False))
    node = NodePlan(steps=("dcgm",))
    node.dcgm = DcgmPlan(install=True, lock=LOCK, pins=PINS, unit="nvidia-dcgm", restart=planned_restart)
    step.nvidia_dcgm.__wrapped__(node)
    restart = [kwargs for kwargs in declared if kwargs.get("restarted")]
    assert len(restart) == 1 and restart[0]["_if"]() is restarts, declared


# review5: without files/locks/dcgm-4.in the lock was checked by shape alone, so a lock line
# naming any other package (a driver) was installed as given.
def test_a_lock_without_its_release_blocks():
    planned, found = decide({"gpu_diag_install": True}, {LOCK: GOOD + "nvidia-driver-open=570.1-1\n"}, release=False)
    assert planned == DcgmPlan(install=False, lock=LOCK)
    assert [(finding.code, finding.severity) for finding in found] == [("DCGM_LOCK_MISSING", "blocker")]
    assert "there is no files/locks/dcgm-4.in" in found[0].message


# review5: DCGM comes from the toolkit's repository but was not held as the toolkit is, so an
# `apt-get upgrade` moved it past its lock and every later deploy moved it back.
@pytest.mark.parametrize("dcgm_held", [[], [["datacenter-gpu-manager-4-core", "1:4.4.1-1"]]], ids=["off", "on"])
def test_the_repository_preference_holds_dcgm_at_its_lock(dcgm_held):
    """The preference file holds DCGM's locked versions at 990 beside the toolkit's; without
    gpu_diag_install it is byte for byte the file it was before."""
    import jinja2

    template = jinja2.Template((ROOT / "files/templates/nvidia-cuda.pref.j2").read_text())
    args = {"origin": "developer.download.nvidia.com", "held": [["cuda-nvcc-13-0", "13.0.48-1"]]}
    text = template.render(**args, dcgm_held=dcgm_held)
    assert ("Package: cuda-nvcc-13-0\nPin: version 13.0.48-1\nPin-Priority: 990" in text)
    pinned = "Package: datacenter-gpu-manager-4-core\nPin: version 1:4.4.1-1\nPin-Priority: 990"
    assert (pinned in text) == bool(dcgm_held)
    if not dcgm_held:
        assert text == template.render(**args, dcgm_held=())
        assert "DCGM" not in text
