"""The planner on a scenario table: facts + settings in, findings and plan out."""

import json
import subprocess
import sys

import pytest

from bringup.config import Config, ConfigError
from bringup.locks import LockFiles
from bringup.plan import plan
from tests.unit.scenarios import HOME, RTX_PRO, FIXTURES, converged, gpus, incident, prewarmed, varied

STALE_12_8 = {"cuda_home": "/usr/local/cuda-12.8", "version": "12.8", "via": "PATH", "nvcc_ok": True,
              "env_file": False, "arch_list_env": None}

APT_HOLDER = {"lock": "/var/lib/dpkg/lock-frontend", "pid": 812, "command": "/usr/bin/python3 /usr/bin/unattended-upgrade"}

# Every scenario has a model (a node without one is not serving-ready: its own scenario)
# unless its settings say otherwise.
MODEL = {"service_model": "Qwen/Qwen3-0.6B"}

# name, facts, settings, blockers, fixes (subset that must be there), arch_list
SCENARIOS = [
    ("converged", converged(), {}, [], [], "12.0f"),
    ("incident", incident(), {}, [],
     ["TOOLKIT_MISSING", "TOOLKIT_TORCH_MISMATCH", "FLASHINFER_ARCH_TRAP", "PATH_SHADOWS_CUDA_HOME",
      "CUDA_SYMLINK_DRIFT", "VENV_STACK_DRIFT"], "12.0f"),
    ("h100 on driver 550 with cu130", varied(converged(), gpus=gpus("NVIDIA H100 80GB HBM3", "9.0", 8),
                                            driver={"version": "550.54.15", "cuda_version": "12.4"}),
     {}, ["DRIVER_TOO_OLD"], [], "9.0a"),
    ("b200", varied(converged(), gpus=gpus("NVIDIA B200", "10.0", 8), jit_cache=None), {}, [], [], "10.0a"),
    ("b300 (sm 10.3)", varied(converged(), gpus=gpus("NVIDIA B300", "10.3"), jit_cache=None), {}, [], [], "10.3a"),
    ("gb10", varied(converged(), gpus=gpus("NVIDIA GB10", "12.1"), jit_cache=None,
                    resolution=dict(converged()["resolution"], arch_list_env="12.1a")), {}, [], [], "12.1a"),
    ("mixed", varied(converged(), gpus=gpus("NVIDIA B200", "10.0") + gpus(RTX_PRO, "12.0"), jit_cache=None),
     {}, [], ["FLASHINFER_ARCH_TRAP"], "10.0a 12.0f"),
    ("no gpu", varied(converged(), gpus=[], driver=None, nvidia_smi={"present": False, "error": "nvidia-smi not found"}),
     {}, ["NO_GPU"], [], ""),
    ("gpu-less builder", varied(converged(), gpus=[], driver=None, nvidia_smi={"present": False, "error": "x"}),
     {"target_sms": ["12.0"]}, [], [], "12.0f"),
    ("driver not loaded", varied(converged(), gpus=[], driver=None,
                                 nvidia_smi={"present": True, "error": "couldn't communicate with the NVIDIA driver"}),
     {}, ["DRIVER_NOT_LOADED"], [], ""),
    ("rtx pro on a driver below its floor", varied(converged(), driver={"version": "570.86.10", "cuda_version": "12.8"}),
     {}, ["DRIVER_TOO_OLD"], [], "12.0f"),
    ("gb10 with a cu128 stack", varied(converged(), gpus=gpus("NVIDIA GB10", "12.1")),
     {"stack_torch_cuda": "12.8"}, ["SM_NEEDS_NEWER_CUDA"], [], ""),
    ("external venv, torch lacks sm_120", varied(converged(), torch={"version": "2.5.1+cu124", "cuda": "12.4",
                                                                     "arch_list": ["sm_80", "sm_90"]}),
     {"venv_managed": False}, ["SM_NEEDS_NEWER_CUDA"], [], ""),
    ("external cu128 venv without sm_120", varied(converged(), torch={"version": "2.7.0+cu128", "cuda": "12.8",
                                                                      "arch_list": ["sm_80", "sm_90", "sm_100"]}),
     {"venv_managed": False}, ["TORCH_LACKS_SM"], ["TOOLKIT_MISSING"], "12.0a"),
    ("rhel", varied(converged(), os={"id": "rhel", "version_id": "9.4", "arch": "x86_64"}), {}, ["UNSUPPORTED_OS"], [], "12.0f"),
    ("rhel with a mirror distro", varied(converged(), os={"id": "rhel", "version_id": "9.4", "arch": "x86_64"}),
     {"cuda_repo_distro": "rhel9"}, [], [], "12.0f"),
    ("ppc64le", varied(converged(), os={"id": "ubuntu", "version_id": "24.04", "arch": "ppc64le"}),
     {}, ["UNSUPPORTED_OS", "VENV_LOCK_MISSING"], [], "12.0f"),
    # Debian 12's archive has python3.11: an old or missing python3 is deploy's to fix.
    ("old python on debian 12", varied(converged(), python={"version": "3.9.2"}), {}, [], ["PYTHON_TOO_OLD"], "12.0f"),
    ("old python where no archive has a newer one",
     varied(converged(), os={"id": "rhel", "version_id": "9.4", "arch": "x86_64"}, python={"version": "3.9.18"}),
     {"cuda_repo_distro": "rhel9"}, ["PYTHON_TOO_OLD"], [], "12.0f"),
    ("ubuntu 24.04 python 3.12 picks its own lock", varied(converged(), python={"version": "3.12.3"},
                                                           os={"id": "ubuntu", "version_id": "24.04", "arch": "x86_64"}),
     {}, [], [], "12.0f"),
    ("ubuntu 24.04 python 3.12 with the cp311 lock", varied(converged(), python={"version": "3.12.3"},
                                                             os={"id": "ubuntu", "version_id": "24.04", "arch": "x86_64"}),
     {"venv_lock": "files/locks/sglang-0.5.23-cp311-x86_64.txt"}, ["VENV_LOCK_MISMATCH"], [], "12.0f"),
    ("gb10 on aarch64 with the x86_64 lock", varied(converged(), gpus=gpus("NVIDIA GB10", "12.1"),
                                                     os={"id": "ubuntu", "version_id": "24.04", "arch": "aarch64"},
                                                     python={"version": "3.11.9"}),
     {"venv_lock": "files/locks/sglang-0.5.23-cp311-x86_64.txt"}, ["VENV_LOCK_MISMATCH"], ["FLASHINFER_ARCH_TRAP"],
     "12.1a"),
    ("a matching aarch64 lock", varied(converged(), os={"id": "ubuntu", "version_id": "24.04", "arch": "aarch64"},
                                       python={"version": "3.12.3"}),
     {"venv_lock": "files/locks/sglang-0.5.23-cp312-aarch64.txt"}, [], [], "12.0f"),
    ("external venv on python 3.12", varied(converged(), python={"version": "3.12.3"}),
     {"venv_managed": False}, [], [], "12.0f"),
    ("no python on debian 12", varied(converged(), python=None), {}, [], ["PYTHON_TOO_OLD"], "12.0f"),
    ("broken venv", varied(converged(), torch={"error": "ImportError('libcudart.so.13')"}), {}, [], ["VENV_BROKEN"], "12.0f"),
    ("a gpu reporting [N/A]", varied(converged(), gpus=gpus(RTX_PRO, "12.0", 7) + [
        {"index": 7, "name": RTX_PRO, "compute_cap": "[N/A]", "memory_total_mib": 1}]), {}, ["SM_UNKNOWN"], [],
     "12.0f"),
    ("a gpu of an sm no table knows", varied(converged(), gpus=gpus("NVIDIA Future GPU", "13.5")), {},
     ["SM_UNKNOWN"], [], ""),
    ("cuda home found on PATH only", varied(converged(), resolution=dict(converged()["resolution"], via="PATH")),
     {}, [], ["CUDA_HOME_NOT_EXPLICIT"], "12.0f"),
    ("external venv whose torch does not import", varied(converged(), torch={"error": "ImportError('x')"}),
     {"venv_managed": False}, ["VENV_BROKEN"], [], "12.0f"),
    # cu128's CUDA floor (525.60.13) passes; the RTX PRO 6000's own floor (575.51.03) does not.
    ("rtx pro below its gpu floor only", varied(converged(), driver={"version": "570.86.10", "cuda_version": "12.8"}),
     {"stack_torch_cuda": "12.8"}, ["DRIVER_TOO_OLD"], [], "12.0a"),
    ("another toolkit beside the planned one",
     varied(converged(), toolkits=converged()["toolkits"] + [{"home": "/usr/local/cuda-12.8", "version": "12.8",
                                                             "nvcc_ok": True}]), {}, [], [], "12.0f"),
    # unattended-upgrades on a first boot: deploy waits for it, nothing is blocked.
    ("apt locked", varied(converged(), apt_locks=[APT_HOLDER]), {"deploy_apt_lock_timeout": "120"}, [], [], "12.0f"),
    # The unit is written, not enabled: deploy can run (a warning), the node will not serve.
    ("no service_model", converged(), {"service_model": ""}, [], [], "12.0f"),
]

# Every finding of every scenario, code and severity: nothing more, nothing less.
EXACT_FINDINGS = {
    "converged": [],
    "incident": ["VENV_STACK_DRIFT:fix", "TOOLKIT_MISSING:fix", "OTHER_TOOLKITS:info", "TOOLKIT_TORCH_MISMATCH:fix",
                 "FLASHINFER_ARCH_TRAP:fix", "PATH_SHADOWS_CUDA_HOME:fix", "CUDA_SYMLINK_DRIFT:fix",
                 "JIT_CACHE_COLD:fix"],
    # The service env still names 12.0f (an RTX PRO's), so FlashInfer would build that.
    "h100 on driver 550 with cu130": ["DRIVER_TOO_OLD:blocker", "FLASHINFER_ARCH_TRAP:fix", "JIT_CACHE_COLD:fix"],
    "b200": ["FLASHINFER_ARCH_TRAP:fix", "JIT_CACHE_COLD:fix"],
    "b300 (sm 10.3)": ["FLASHINFER_ARCH_TRAP:fix", "JIT_CACHE_COLD:fix"],
    "gb10": ["JIT_CACHE_COLD:fix"],
    "mixed": ["MIXED_GPUS:warning", "FLASHINFER_ARCH_TRAP:fix", "JIT_CACHE_COLD:fix"],
    "no gpu": ["NO_GPU:blocker"],
    "gpu-less builder": ["TARGET_SMS_FROM_CONFIG:info"],
    "driver not loaded": ["DRIVER_NOT_LOADED:blocker"],
    # Both floors fail: CUDA 13.0's (580.65.06) and the RTX PRO 6000's (575.51.03).
    "rtx pro on a driver below its floor": ["DRIVER_TOO_OLD:blocker", "DRIVER_TOO_OLD:blocker"],
    "gb10 with a cu128 stack": ["TOOLKIT_UNLOCKED:warning", "SM_NEEDS_NEWER_CUDA:blocker", "VENV_STACK_DRIFT:fix",
                                "TOOLKIT_MISSING:fix", "OTHER_TOOLKITS:info", "TOOLKIT_TORCH_MISMATCH:fix",
                                "FLASHINFER_ARCH_TRAP:fix", "PATH_SHADOWS_CUDA_HOME:fix", "CUDA_SYMLINK_DRIFT:fix"],
    "external venv, torch lacks sm_120": ["TOOLKIT_UNLOCKED:warning", "SM_NEEDS_NEWER_CUDA:blocker",
                                          "TOOLKIT_MISSING:fix", "OTHER_TOOLKITS:info", "TOOLKIT_TORCH_MISMATCH:fix",
                                          "FLASHINFER_ARCH_TRAP:fix", "PATH_SHADOWS_CUDA_HOME:fix",
                                          "CUDA_SYMLINK_DRIFT:fix"],
    "external cu128 venv without sm_120": ["TOOLKIT_UNLOCKED:warning", "TORCH_LACKS_SM:blocker", "TOOLKIT_MISSING:fix",
                                           "OTHER_TOOLKITS:info", "TOOLKIT_TORCH_MISMATCH:fix",
                                           "FLASHINFER_ARCH_TRAP:fix", "PATH_SHADOWS_CUDA_HOME:fix",
                                           "CUDA_SYMLINK_DRIFT:fix", "JIT_CACHE_COLD:fix"],
    "rhel": ["UNSUPPORTED_OS:blocker"],
    "rhel with a mirror distro": ["REPO_UNVERIFIED:warning", "TOOLKIT_UNLOCKED:warning"],
    "ppc64le": ["UNSUPPORTED_OS:blocker", "VENV_LOCK_MISSING:blocker"],
    "old python on debian 12": ["PYTHON_TOO_OLD:fix"],
    "old python where no archive has a newer one": ["REPO_UNVERIFIED:warning", "TOOLKIT_UNLOCKED:warning",
                                                    "PYTHON_TOO_OLD:blocker"],
    "ubuntu 24.04 python 3.12 picks its own lock": [],
    "ubuntu 24.04 python 3.12 with the cp311 lock": ["VENV_LOCK_MISMATCH:blocker"],
    "gb10 on aarch64 with the x86_64 lock": ["VENV_LOCK_MISMATCH:blocker", "FLASHINFER_ARCH_TRAP:fix",
                                             "JIT_CACHE_COLD:fix"],
    "a matching aarch64 lock": [],
    "external venv on python 3.12": [],
    "no python on debian 12": ["PYTHON_TOO_OLD:fix"],
    "broken venv": ["VENV_BROKEN:fix"],
    "a gpu reporting [N/A]": ["SM_UNKNOWN:blocker"],
    # No arch list for an unknown SM, so FlashInfer's 12.0f from the env file is a trap.
    "a gpu of an sm no table knows": ["SM_UNKNOWN:blocker", "FLASHINFER_ARCH_TRAP:fix"],
    "cuda home found on PATH only": ["CUDA_HOME_NOT_EXPLICIT:fix"],
    "external venv whose torch does not import": ["VENV_BROKEN:blocker"],
    "rtx pro below its gpu floor only": ["TOOLKIT_UNLOCKED:warning", "DRIVER_TOO_OLD:blocker", "VENV_STACK_DRIFT:fix",
                                         "TOOLKIT_MISSING:fix", "OTHER_TOOLKITS:info", "TOOLKIT_TORCH_MISMATCH:fix",
                                         "FLASHINFER_ARCH_TRAP:fix", "PATH_SHADOWS_CUDA_HOME:fix",
                                         "CUDA_SYMLINK_DRIFT:fix", "JIT_CACHE_COLD:fix"],
    "another toolkit beside the planned one": ["OTHER_TOOLKITS:info"],
    "apt locked": ["APT_LOCKED:warning"],
    "no service_model": ["SERVICE_NOT_SERVING_READY:warning"],
}


@pytest.mark.parametrize("name,facts,settings,blockers,fixes,arch_list", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_scenarios(name, facts, settings, blockers, fixes, arch_list):
    node = plan(facts, Config.from_data({**MODEL, **settings}))
    assert sorted(set(node.codes("blocker"))) == sorted(blockers), node.findings
    assert set(fixes) <= set(node.codes("fix")), node.findings
    assert node.ok is (not blockers)
    assert node.arch_list == arch_list
    assert sorted(f"{f.code}:{f.severity}" for f in node.findings) == sorted(EXACT_FINDINGS[name]), node.findings


def test_every_scenario_has_its_exact_findings():
    assert sorted(EXACT_FINDINGS) == sorted(s[0] for s in SCENARIOS)


def test_the_gpu_floor_alone_is_named():
    facts = varied(converged(), driver={"version": "570.86.10", "cuda_version": "12.8"})
    floors = [f.message for f in plan(facts, Config.from_data({"stack_torch_cuda": "12.8"})).findings
              if f.code == "DRIVER_TOO_OLD"]
    assert floors == [f"driver 570.86.10 is below the {RTX_PRO} floor 575.51.3"]


def test_converged_node_has_nothing_to_fix():
    node = plan(converged(), Config(**MODEL))
    assert node.codes("fix") == [] and node.codes("blocker") == [] and node.codes("warning") == []


def test_incident_plan():
    """The seeds' node: toolkit 13.0 with the JIT's headers, 12.0f, and the trap named."""
    node = plan(incident(), Config())
    assert node.toolkit.version == "13.0" and node.toolkit.home == HOME
    assert {"cuda-nvcc-13-0", "cuda-cudart-dev-13-0", "libcurand-dev-13-0", "cuda-driver-dev-13-0"} <= set(node.toolkit.packages)
    assert node.env["CUDA_HOME"] == HOME and node.env["FLASHINFER_CUDA_ARCH_LIST"] == "12.0f"
    assert node.env["PATH"].startswith(f"{HOME}/bin:")
    trap = next(f for f in node.findings if f.code == "FLASHINFER_ARCH_TRAP")
    assert "SM 12.x requires CUDA >= 12.9" in trap.message and "sm75" in trap.message
    mismatch = next(f for f in node.findings if f.code == "TOOLKIT_TORCH_MISMATCH")
    assert "12.8" in mismatch.message and "13.0" in mismatch.message


@pytest.mark.parametrize("resolution,installed,expected", [
    # FlashInfer 0.7.2 with nvcc 12.8 builds sm_120a, not the family build.
    (STALE_12_8, "0.7.2", "builds 12.0a instead of 12.0f"),
    # A forced 12.0f with nvcc 12.8: ptxas does not know sm_120f.
    (dict(STALE_12_8, arch_list_env="12.0f"), "0.7.2", "cannot build target 12.0f; ptxas fails"),
    # Nothing resolves an nvcc: no JIT module can build.
    ({"cuda_home": "/usr/local/cuda", "version": "13.0", "via": "default+torch-fallback", "nvcc_ok": False},
     "0.7.2", "no nvcc runs there"),
    # No toolkit at all: the message says so instead of printing "CUDA None".
    ({"cuda_home": None, "version": None, "via": "none", "nvcc_ok": False},
     "0.7.2", "FlashInfer 0.7.2 finds no CUDA toolkit: no nvcc runs there"),
    # A home whose nvcc does not run: no version, the place still named.
    ({"cuda_home": "/opt/cuda-12.8", "version": None, "via": "CUDA_HOME", "nvcc_ok": False},
     "0.7.2", "FlashInfer 0.7.2 with /opt/cuda-12.8 (via CUDA_HOME): no nvcc runs there"),
])
def test_trap_outcomes(resolution, installed, expected):
    facts = varied(incident(), resolution=resolution, flashinfer={"version": installed})
    trap = [f for f in plan(facts, Config()).findings if f.code == "FLASHINFER_ARCH_TRAP"]
    assert trap and expected in trap[0].message, trap


def test_gb10_with_0_7_2_and_nvcc_12_8_empties_the_arch_set():
    facts = varied(incident(), gpus=gpus("NVIDIA GB10", "12.1"), resolution=STALE_12_8,
                   flashinfer={"version": "0.7.2"})
    trap = next(f for f in plan(facts, Config()).findings if f.code == "FLASHINFER_ARCH_TRAP")
    assert "SM 12.1+ requires CUDA >= 12.9" in trap.message


@pytest.mark.parametrize("prewarm,gap", [
    (None, "no pre-warm manifest"),
    (prewarmed("12.0a"), "built for '12.0a', planned '12.0f'"),
    (prewarmed("12.0f", flashinfer="0.7.0"), "built by FlashInfer 0.7.0, serving with 0.7.2"),
    (prewarmed("12.0f", stale=["sampling"]), "ninja would rebuild sampling"),
])
def test_cold_jit_cache_is_reported(prewarm, gap):
    node = plan(varied(converged(), jit_cache={"base": "/c", "modules": [], "prewarm": prewarm}), Config())
    cold = [f for f in node.findings if f.code == "JIT_CACHE_COLD"]
    assert node.codes("fix") == ["JIT_CACHE_COLD"] and gap in cold[0].message


def test_changed_prewarm_request_is_cold():
    node = plan(converged(), Config.from_data({"prewarm_modules": ["norm"]}))
    assert node.codes("fix") == ["JIT_CACHE_COLD"]


def test_symlink_drift_is_a_warning_when_the_alternative_is_not_managed():
    node = plan(varied(converged(), cuda_symlink="/usr/local/cuda-12.8"), Config(cuda_manage_alternative=False))
    assert "CUDA_SYMLINK_DRIFT" in node.codes("warning")


def test_driver_below_toolkit_cuda_is_a_warning():
    facts = varied(converged(), driver={"version": "580.95.05", "cuda_version": "13.0"})
    node = plan(facts, Config.from_data({"stack_torch_cuda": "13.1"}))
    assert "DRIVER_CUDA_BELOW_TOOLKIT" in node.codes("warning") and node.ok


def test_repo_for_a_mirror():
    node = plan(converged(), Config.from_data({"cuda_repo_url": "http://127.0.0.1:8080/compute/cuda/repos/"}))
    assert node.repo.url == "http://127.0.0.1:8080/compute/cuda/repos/debian12/x86_64/"
    assert node.repo.key_url.endswith("/debian12/x86_64/3bf863cc.pub")


def run_plan_cli(*args):
    return subprocess.run([sys.executable, "-m", "bringup.plan", "--json", *args], capture_output=True, text=True,
                          cwd=FIXTURES.parents[1])


def test_plan_cli_on_the_incident():
    result = run_plan_cli(str(FIXTURES / "facts" / "incident.json"))
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    printed = json.loads(result.stdout)
    codes = {f["code"] for f in printed["findings"]}
    assert {"TOOLKIT_TORCH_MISMATCH", "FLASHINFER_ARCH_TRAP"} <= codes
    assert printed["ok"] is True and printed["arch_list"] == "12.0f"
    assert printed["toolkit"]["version"] == "13.0" and "cuda-nvcc-13-0" in printed["toolkit"]["packages"]


def test_plan_cli_names_the_apt_lock_holder(tmp_path):
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(varied(converged(), apt_locks=[APT_HOLDER])))
    config = tmp_path / "settings.yaml"
    config.write_text("deploy_apt_lock_timeout: 120\n")
    result = run_plan_cli(str(facts), "--config", str(config))
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    locked, = [f for f in printed["findings"] if f["code"] == "APT_LOCKED"]
    assert locked["severity"] == "warning" and printed["ok"] is True
    assert locked["message"] == ("apt is in use: pid 812 (/usr/bin/python3 /usr/bin/unattended-upgrade) holds "
                                 "/var/lib/dpkg/lock-frontend")
    assert "deploy waits up to 120 s (deploy_apt_lock_timeout)" in locked["fix"]
    assert printed["apt_locks"] == [APT_HOLDER] and printed["apt_lock_timeout"] == 120


def test_plan_cli_with_config(tmp_path):
    config = tmp_path / "builder.yaml"
    config.write_text('target_sms: ["10.0", "12.0"]\n')
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(varied(converged(), gpus=[], driver=None)))
    printed = json.loads(run_plan_cli(str(facts), "--config", str(config)).stdout)
    assert printed["ok"] and printed["arch_list"] == "10.0a 12.0f"


def test_plan_cli_rejects_bad_config(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text('stack_torch_cuda: "banana"\n')
    result = run_plan_cli(str(FIXTURES / "facts" / "incident.json"), "--config", str(config), "--host", "gpu7")
    assert result.returncode == 2
    assert "gpu7" in result.stderr and "banana" in result.stderr and "X.Y" in result.stderr


def _chain(*entries):
    return [{"path": path, "user": user, "mode": mode, "kind": "directory"} for path, user, mode in entries]


@pytest.mark.parametrize("chain,settings,blockers", [
    # The incident's hand-built venv under /root: the service user cannot get in.
    (_chain(("/root/venv_sglang211", "root", "755"), ("/root", "root", "700"), ("/", "root", "755")),
     {"venv_managed": False, "venv_path": "/root/venv_sglang211"}, ["VENV_UNREADABLE"]),
    (_chain(("/opt/venv_sglang211", "root", "750"), ("/opt", "root", "755"), ("/", "root", "755")),
     {"venv_managed": False, "venv_path": "/opt/venv_sglang211"}, ["VENV_UNREADABLE"]),
    (_chain(("/opt/venv_sglang211", "root", "755"), ("/opt", "root", "755"), ("/", "root", "755")),
     {"venv_managed": False, "venv_path": "/opt/venv_sglang211"}, []),
    # A managed venv under a directory another user can change: root would build there.
    (_chain(("/home/ubuntu/venv", "ubuntu", "755"), ("/home/ubuntu", "ubuntu", "750"), ("/home", "root", "755")),
     {"venv_path": "/home/ubuntu/venv"}, ["UNSAFE_PATH"]),
    (_chain(("/srv/ml/venv", "root", "755"), ("/srv/ml", "root", "775"), ("/srv", "root", "755")),
     {"venv_path": "/srv/ml/venv"}, ["UNSAFE_PATH"]),
    (_chain(("/opt/sglang", "root", "755"), ("/opt", "root", "755"), ("/", "root", "755")), {}, []),
])
def test_paths_root_uses_and_the_service_reads(chain, settings, blockers):
    facts = varied(converged(), paths={"venv": chain, "env_file": [], "cache_dir": []})
    if settings.get("venv_managed") is False:
        facts["torch"] = dict(facts["torch"])
    assert plan(facts, Config.from_data(settings)).codes("blocker") == blockers


def test_operators_changed_managed_key_is_reported():
    facts = varied(converged(), service_env={"CUDA_HOME": "/usr/local/cuda-12.8", "FLASHINFER_CUDA_ARCH_LIST": "12.0f"})
    finding = next(f for f in plan(facts, Config()).findings if f.code == "SERVICE_ENV_OVERRIDDEN")
    assert finding.severity == "fix" and "CUDA_HOME=/usr/local/cuda-12.8 (deploy sets /usr/local/cuda-13.0)" in \
        finding.message and "FLASHINFER_CUDA_ARCH_LIST" not in finding.message


LOCK = "files/locks/cuda-13.0-debian12-x86_64.txt"


def real_locks(drop):
    """The repository's locks in memory, without ``drop``."""
    root = FIXTURES.parents[1]
    return {str(path.relative_to(root)): path.read_text() for path in (root / "files" / "locks").glob("*.txt")
            if str(path.relative_to(root)) != drop}


def locked_versions():
    from bringup.toolkit_locks import parse_toolkit_lock

    return parse_toolkit_lock((FIXTURES.parents[1] / LOCK).read_text())


@pytest.mark.parametrize("change,drift", [
    ({}, None),
    ({"cuda-nvcc-13-0": "13.0.48-1"}, "cuda-nvcc-13-0 13.0.48-1 (lock 13.0.88-1)"),
    ({"libcublas-dev-13-0": None}, "libcublas-dev-13-0 not installed (lock 13.0.2.14-1)"),
])
def test_toolkit_lock_drift(change, drift):
    installed = {**locked_versions(), **change}
    installed = {name: version for name, version in installed.items() if version}
    node = plan(varied(converged(), cuda_packages=installed), Config())
    found = [f for f in node.findings if f.code == "TOOLKIT_LOCK_DRIFT"]
    if drift is None:
        assert not found
    else:
        assert found and found[0].severity == "fix" and drift in found[0].message and LOCK in found[0].message


def test_no_drift_without_the_toolkit_or_without_the_probe_key():
    assert "TOOLKIT_LOCK_DRIFT" not in plan(varied(converged(), cuda_packages={}), Config()).codes()
    assert "TOOLKIT_LOCK_DRIFT" not in plan(converged(), Config()).codes()


def test_toolkit_pins_come_from_the_lock():
    node = plan(converged(), Config())
    assert node.toolkit.lock == LOCK
    assert set(node.toolkit.pins) == {f"{name}={version}" for name, version in locked_versions().items()}


def test_missing_toolkit_lock_is_a_warning_and_installs_by_name():
    node = plan(converged(), Config(**MODEL), locks=LockFiles.of(real_locks(drop=LOCK)))
    assert node.codes("warning") == ["TOOLKIT_UNLOCKED"] and node.ok
    assert node.toolkit.pins == node.toolkit.packages and "cuda-nvcc-13-0" in node.toolkit.pins


def test_missing_venv_lock_is_a_blocker_naming_the_file():
    missing = "files/locks/sglang-0.5.23-cp311-x86_64.txt"
    node = plan(converged(), Config(), locks=LockFiles.of(real_locks(drop=missing)))
    blocker = next(f for f in node.findings if f.code == "VENV_LOCK_MISSING")
    assert missing in blocker.message and "make lock" in blocker.fix and not node.ok


def test_explicit_lock_wins():
    node = plan(varied(converged(), os={"id": "ubuntu", "version_id": "24.04", "arch": "aarch64"},
                       python={"version": "3.12.3"}),
                Config.from_data({"venv_lock": "files/locks/sglang-0.5.23-cp312-aarch64.txt"}))
    assert node.venv.lock == "files/locks/sglang-0.5.23-cp312-aarch64.txt" and node.ok


def test_ubuntu_2204_after_deploy_builds_with_the_installed_python311():
    facts = varied(json.loads((FIXTURES / "facts" / "ubuntu2204-x86_64-h100.json").read_text()),
                   python_interpreters=[{"path": "/usr/bin/python3.10", "version": "3.10.12"},
                                        {"path": "/usr/bin/python3.11", "version": "3.11.0rc1"}])
    node = plan(facts, Config())
    assert "PYTHON_TOO_OLD" not in node.codes()
    assert (node.venv.python, node.venv.lock) == ("/usr/bin/python3.11", "files/locks/sglang-0.5.23-cp311-x86_64.txt")
    assert {"python3.11", "python3.11-venv"} <= set(node.venv.system_packages)


@pytest.mark.parametrize("service_args,severity", [("", "info"), ("--tp 2", "info"),
                                                    ("--grammar-backend outlines", "blocker"),
                                                    ("--grammar-backend=outlines --tp 8", "blocker"),
                                                    ("--grammar-backend xgrammar", "info")])
def test_cp313_outlines(service_args, severity):
    facts = json.loads((FIXTURES / "facts" / "debian13-x86_64-rtx-pro-6000.json").read_text())
    node = plan(facts, Config.from_data({"service_args": service_args}))
    assert [f.severity for f in node.findings if f.code == "LOCK_OMITS_PACKAGE"] == [severity]


def test_no_lock_omission_on_cpython_311():
    assert "LOCK_OMITS_PACKAGE" not in plan(converged(), Config()).codes()


def test_explicit_lock_must_exist():
    with pytest.raises(ConfigError, match=r"n1: setting venv_lock='files/locks/nope-cp311-x86_64.txt' is invalid: "
                                          r"no such file"):
        Config.from_data({"venv_lock": "files/locks/nope-cp311-x86_64.txt"}, host="n1")


def test_plan_cli_names_a_missing_explicit_lock(tmp_path):
    config = tmp_path / "lock.yaml"
    config.write_text("venv_lock: files/locks/nope-cp311-x86_64.txt\n")
    result = run_plan_cli(str(FIXTURES / "facts" / "incident.json"), "--config", str(config), "--host", "gpu3")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: gpu3: setting venv_lock='files/locks/nope-cp311-x86_64.txt' is invalid: "
                                    "no such file")
    assert "make lock" in result.stderr


def test_report_names_the_chosen_locks_and_cpython():
    from bringup.report import render

    facts = json.loads((FIXTURES / "facts" / "ubuntu2204-x86_64-h100.json").read_text())
    text = render("gpu9", facts, plan(facts, Config()))
    assert ("  venv      : files/locks/sglang-0.5.23-cp311-x86_64.txt with /usr/bin/python3.11 (CPython 3.11), "
            "uv from files/locks/uv-cp311-x86_64.txt") in text
    assert "  toolkit   : files/locks/cuda-13.0-ubuntu2204-x86_64.txt" in text
    assert "ubuntu2204/x86_64/ (ubuntu2204/x86_64: listed by NVIDIA)" in text
    gb10 = json.loads((FIXTURES / "facts" / "ubuntu2404-aarch64-gb10.json").read_text())
    assert "  toolkit   : files/locks/cuda-13.0-ubuntu2404-aarch64.txt" in render("gb10", gb10, plan(gb10, Config()))
    # Debian 13 on aarch64: no toolkit lock ships (debian13/sbsa is unverified).
    trixie = dict(gb10, os={"id": "debian", "version_id": "13", "arch": "aarch64"})
    assert "  toolkit   : not locked" in render("gb10", trixie, plan(trixie, Config()))
    converged_text = render("n", converged(), plan(converged(), Config()))
    assert "toolkit   : files/locks/cuda-13.0-debian12-x86_64.txt" in converged_text


def journal(name):
    """The output lines of a recorded failure (tests/fixtures/failures), as the unit's journal."""
    text = (FIXTURES / "failures" / f"{name}.log").read_text()
    return [line for line in text.splitlines() if not line.startswith("#")]


def unit(active="failed", sub="failed", restarts=0, lines=()):
    return {"name": "sglang.service", "active_state": active, "sub_state": sub, "result": "exit-code",
            "restarts": restarts, "journal": list(lines)}


# name, service_unit fact, the SERVICE_FAILED message's parts (None: no such finding), its fix's parts
SERVICE_UNITS = [
    ("no systemd", None, None, ()),
    ("running", unit("active", "running", 0), None, ()),
    ("inactive", unit("inactive", "dead", 0), None, ()),
    ("failed with the trap", unit(lines=journal("flashinfer-0.7.0-trap")),
     ["sglang.service failed (exit-code)", "FLASHINFER_ARCH_TRAP", "SM 12.x requires CUDA >= 12.9"],
     [f"CUDA_HOME={HOME}", 'FLASHINFER_CUDA_ARCH_LIST="12.0f"', "/etc/sglang/sglang.env"]),
    ("waiting to restart, no GPU usable", unit("activating", "auto-restart", 3, journal("service-start-no-gpu")),
     ["waits to be restarted (3 automatic restart(s) so far)", "CUDA_UNAVAILABLE", "No accelerator"],
     ["torch.cuda.is_available()"]),
    ("running again after restarts, headers missing", unit("active", "running", 2,
                                                           journal("flashinfer-norm-no-cublas-headers")),
     ["keeps failing: 2 automatic restart(s)", "TOOLKIT_MISSING", "cublasLt.h"], ["libcublas-dev-13-0"]),
    ("failed, cause unknown", unit(lines=["Traceback (most recent call last):", "KeyError: 'model'"]),
     ["no known cause in the last 2 line(s)"], ["journalctl -u sglang.service"]),
    ("failed, journal empty", unit(), ["no known cause in the last 0 line(s)"], ["journalctl"]),
]


@pytest.mark.parametrize("name,fact,message,fix", SERVICE_UNITS, ids=[s[0] for s in SERVICE_UNITS])
def test_failing_unit_is_explained(name, fact, message, fix):
    node = plan(varied(converged(), service_unit=fact), Config())
    found = [finding for finding in node.findings if finding.code == "SERVICE_FAILED"]
    if message is None:
        assert not found, found
        return
    assert len(found) == 1 and found[0].severity == "warning"
    assert all(part in found[0].message for part in message), found[0].message
    assert all(part in found[0].fix for part in fix), found[0].fix
    assert node.ok


def test_two_lines_of_one_cause_give_one_fix():
    node = plan(varied(converged(), service_unit=unit(lines=journal("flashinfer-0.7.2-gb10-trap"))), Config())
    finding = next(finding for finding in node.findings if finding.code == "SERVICE_FAILED")
    assert finding.message.count("FLASHINFER_ARCH_TRAP") == 2 and "; also " not in finding.fix


def test_service_unit_of_another_shape_is_refused():
    from bringup.facts_schema import FactsError

    with pytest.raises(FactsError, match="service_unit.restarts"):
        plan(varied(converged(), service_unit=dict(unit(), restarts="2")), Config())


@pytest.mark.parametrize("fact,shown", [
    (None, None),
    (unit("activating", "auto-restart", 3, journal("ptxas-12.8-sm120f")),
     "  service   : sglang.service activating (auto-restart), 3 automatic restart(s)"),
    (unit("active", "running", 0), "  service   : sglang.service active (running)"),
])
def test_report_shows_the_unit_and_its_explanation(fact, shown):
    from bringup.report import render

    facts = varied(converged(), service_unit=fact)
    text = render("node1", facts, plan(facts, Config()))
    if shown is None:
        assert "service   :" not in text
        return
    assert shown + "\n" in text
    assert ("[WARN   ] SERVICE_FAILED: sglang.service" in text) is (fact["restarts"] > 0)


def test_each_decision_reads_one_context():
    """The plan package's decisions take the PlanContext and at most the one step plan
    they build on (bringup/plan/context.py), never the long positional lists of old."""
    import inspect

    from bringup.plan import account, gpus, paths, prewarm, repository, service, toolkit, venv

    taking_context = []
    for module in (account, gpus, paths, prewarm, repository, service, toolkit, venv):
        for name, function in inspect.getmembers(module, inspect.isfunction):
            parameters = list(inspect.signature(function).parameters)
            if function.__module__ == module.__name__ and parameters[:1] == ["context"]:
                taking_context.append(name)
                assert len(parameters) <= 2, f"{module.__name__}.{name}{inspect.signature(function)}"
    assert {"check_resolution", "repo", "target_sms", "venv_plan", "check_service_unit"} <= set(taking_context)
