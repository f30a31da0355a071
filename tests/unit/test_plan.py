"""The planner on a scenario table: facts + settings in, findings and plan out."""

import json
import subprocess
import sys

import pytest

from bringup.config import Config
from bringup.plan import plan
from tests.unit.scenarios import HOME, RTX_PRO, FIXTURES, converged, gpus, incident, prewarmed, varied

STALE_12_8 = {"cuda_home": "/usr/local/cuda-12.8", "version": "12.8", "via": "PATH", "nvcc_ok": True,
              "env_file": False, "arch_list_env": None}

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
     {}, ["UNSUPPORTED_OS", "VENV_LOCK_MISMATCH"], [], "12.0f"),
    ("old python", varied(converged(), python={"version": "3.9.2"}), {}, ["PYTHON_TOO_OLD"], [], "12.0f"),
    ("ubuntu 24.04 python 3.12 with the cp311 lock", varied(converged(), python={"version": "3.12.3"},
                                                             os={"id": "ubuntu", "version_id": "24.04", "arch": "x86_64"}),
     {}, ["VENV_LOCK_MISMATCH"], [], "12.0f"),
    ("gb10 on aarch64 with the x86_64 lock", varied(converged(), gpus=gpus("NVIDIA GB10", "12.1"),
                                                     os={"id": "ubuntu", "version_id": "24.04", "arch": "aarch64"},
                                                     python={"version": "3.11.9"}),
     {}, ["VENV_LOCK_MISMATCH"], ["FLASHINFER_ARCH_TRAP"], "12.1a"),
    ("a matching aarch64 lock", varied(converged(), os={"id": "ubuntu", "version_id": "24.04", "arch": "aarch64"},
                                       python={"version": "3.12.3"}),
     {"venv_lock": "files/locks/sglang-0.5.23-cp312-aarch64.txt"}, [], [], "12.0f"),
    ("external venv on python 3.12", varied(converged(), python={"version": "3.12.3"}),
     {"venv_managed": False}, [], [], "12.0f"),
    ("no python", varied(converged(), python=None), {}, ["PYTHON_TOO_OLD"], [], "12.0f"),
    ("broken venv", varied(converged(), torch={"error": "ImportError('libcudart.so.13')"}), {}, [], ["VENV_BROKEN"], "12.0f"),
]


@pytest.mark.parametrize("name,facts,settings,blockers,fixes,arch_list", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_scenarios(name, facts, settings, blockers, fixes, arch_list):
    node = plan(facts, Config.from_data(settings))
    assert sorted(set(node.codes("blocker"))) == sorted(blockers), node.findings
    assert set(fixes) <= set(node.codes("fix")), node.findings
    assert node.ok is (not blockers)
    assert node.arch_list == arch_list


def test_converged_node_has_nothing_to_fix():
    node = plan(converged(), Config())
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
    return subprocess.run([sys.executable, "-m", "bringup.plan", *args], capture_output=True, text=True,
                          cwd=FIXTURES.parents[1])


def test_plan_cli_on_the_incident():
    result = run_plan_cli(str(FIXTURES / "facts" / "incident.json"))
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    codes = {f["code"] for f in printed["findings"]}
    assert {"TOOLKIT_TORCH_MISMATCH", "FLASHINFER_ARCH_TRAP"} <= codes
    assert printed["ok"] is True and printed["arch_list"] == "12.0f"
    assert printed["toolkit"]["version"] == "13.0" and "cuda-nvcc-13-0" in printed["toolkit"]["packages"]


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
