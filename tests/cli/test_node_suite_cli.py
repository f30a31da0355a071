"""The node suite's command line (pytest tests/node) without a node: its usage errors,
the inventories it refuses (with the reason), and a run against this machine
(--connection=local) with --node-config settings."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTEST = str(Path(sys.executable).parent / "pytest")


def node_suite(*args, hosts_file=None, cwd=ROOT, env=None, checks="tests/node"):
    env = {**os.environ, **({"GPU_BRINGUP_HOSTS": str(hosts_file)} if hosts_file else {}), **(env or {})}
    result = subprocess.run([PYTEST, checks, "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result


def test_without_hosts_it_is_a_usage_error():
    result = node_suite()
    assert result.returncode == 4, result.output
    assert "tests/node checks nodes: give --inventory INVENTORY [--node-limit NAME], --hosts=HOSTSPEC" in result.output


def test_node_limit_without_inventory_is_a_usage_error():
    result = node_suite("--node-limit", "gpu-*", "--connection=local")
    assert result.returncode == 4 and "--node-limit selects hosts of --inventory" in result.output


@pytest.mark.parametrize("host_data,reason", [
    ("ssh_password: secret", "cannot translate ssh_password"),
    ("ssh_config_file: ~/.ssh/config", "cannot translate ssh_config_file"),
    ("ssh_strict_host_key_checking: 'no'", "host keys are always checked"),
])
def test_inventories_it_refuses(tmp_path, host_data, reason):
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(f"hosts:\n  gpu-node-01:\n    ssh_hostname: 10.0.0.11\n    {host_data}\n")
    result = node_suite("--inventory", "inventory/gpu.py", hosts_file=hosts)
    assert result.returncode == 4, result.output
    assert reason in result.output and "gpu-node-01" in result.output


def test_another_connector_is_refused(tmp_path):
    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = ["@docker/ubuntu:24.04"]\n')
    result = node_suite("--inventory", str(inventory))
    assert result.returncode == 4, result.output
    assert "reaches hosts over SSH (or @local), not through pyinfra's @docker connector" in result.output


def test_accept_new_is_checked_as_yes():
    from tests.node.connection import InventoryHost, ssh_config_block

    block = ssh_config_block(InventoryHost("n1", data={"ssh_hostname": "10.0.0.5",
                                                       "ssh_strict_host_key_checking": "accept-new"}))
    assert "    StrictHostKeyChecking yes" in block.splitlines()


def test_local_connection_with_node_config(tmp_path):
    """This machine has no GPU: the suite runs, every check reports, the verdict is NO and
    the settings of --node-config are the ones expected (the venv path named in a failure)."""
    config = tmp_path / "settings.yaml"
    config.write_text('venv_path: "/srv/sglang-suite-test/venv"\nservice_user: "sglang"\n')
    report = tmp_path / "report.md"
    result = node_suite("--connection=local", "--node-config", str(config), f"--node-report={report}")
    assert result.returncode == 1, result.output
    text = report.read_text()
    assert "| nvidia_smi_answers" in text and "**FAIL**" in text and "**NO**" in text
    assert "no /srv/sglang-suite-test/venv/bin/python" in text
    # A host serving alone has no serving group's checks (not collected, not skipped).
    assert "across_the_group" not in text and "deselected" in result.output, result.output


def test_a_group_member_without_its_inventory_is_named_not_checked(tmp_path):
    """Its peers and ranks come from the inventory: a --connection/--hosts host whose settings
    name a group fails the group's checks with why, and nothing runs on it."""
    config = tmp_path / "settings.yaml"
    config.write_text('service_group: "llama"\nservice_args: "--tp 2"\n')
    report = tmp_path / "report.md"
    result = node_suite("--connection=local", "--node-config", str(config), f"--node-report={report}",
                        checks="tests/node/test_group.py")
    assert result.returncode == 1, result.output
    assert "service_group 'llama': a serving group's member is checked from its inventory (--inventory)" in \
        report.read_text(), report.read_text()


def test_a_group_that_cannot_be_made_is_named_before_any_connection(tmp_path):
    """A member alone in its group: the inventory's one line, the host never reached (its
    address answers nothing)."""
    hosts = tmp_path / "hosts.yml"
    hosts.write_text("hosts:\n  gpu-a:\n    ssh_hostname: 192.0.2.1\n    service_group: llama\n")
    report = tmp_path / "report.md"
    result = node_suite("--inventory", "inventory/gpu.py", f"--node-report={report}", hosts_file=hosts,
                        checks="tests/node/test_group.py")
    assert result.returncode == 1, result.output
    text = report.read_text()
    assert "- gpu-a all 2 checks: service_group 'llama' has no other member" in text, text
    assert text.count("**ERROR**") == 2, text


# A node of this machine in root's /var/lib (the settings refuse paths under /tmp, and
# a clone may be there), one per test: GPUs listed by a stand-in nvidia-smi replaying a
# recorded query (first on PATH), and a venv whose python (the system's) imports a
# stand-in torch that fails as torch does where no driver is loaded.
STANDIN_BASE = Path("/var/lib/gpu-bringup-cli-node-cuda")
RECORDED_QUERY = ROOT / "tests" / "fixtures" / "gpus" / "rtx-pro-6000-x8" / "query.csv"
NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
             "driver from http://www.nvidia.com/Download/index.aspx")


def _executable(path, text):
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def gpu_standin_node(request):
    """(PATH, settings file) of a scratch node whose GPUs cannot start CUDA."""
    base = STANDIN_BASE / request.node.name.replace("[", "-").rstrip("]")
    shutil.rmtree(base, ignore_errors=True)
    for directory in ("bin", "torch-standin/torch", "sglang/venv/bin", "etc-sglang"):
        (base / directory).mkdir(parents=True)
    for directory in (STANDIN_BASE, base, *(path for path in base.rglob("*") if path.is_dir())):
        directory.chmod(0o755)
    _executable(base / "bin" / "nvidia-smi", f"#!/bin/sh\ncase \"$*\" in *--query-gpu*) "
                                            f"cat {shlex.quote(str(RECORDED_QUERY))};; esac\n")
    (base / "torch-standin" / "torch" / "__init__.py").write_text(
        "class cuda:\n    @staticmethod\n    def init():\n"
        f"        raise RuntimeError({NO_DRIVER!r})\n\n"
        "    @staticmethod\n    def is_available():\n        return False\n")
    _executable(base / "sglang" / "venv" / "bin" / "python",
                f"#!/bin/sh\nPYTHONPATH={base / 'torch-standin'} exec /usr/bin/python3 \"$@\"\n")
    (base / "etc-sglang" / "sglang.env").write_text("")
    settings = base / "settings.yaml"
    settings.write_text(f'venv_path: "{base}/sglang/venv"\nservice_user: "nobody"\n'
                        f'service_env_file: "{base}/etc-sglang/sglang.env"\n')
    yield f"{base / 'bin'}:{os.environ['PATH']}", settings
    shutil.rmtree(base, ignore_errors=True)


def _row(report, check):
    return next(line for line in report.splitlines() if line.startswith(f"| {check} "))


def _cuda_row(report):
    return _row(report, "cuda_runs_on_every_gpu")


def test_cuda_that_does_not_start_fails_without_the_declaration(gpu_standin_node, tmp_path):
    """nvidia-smi lists eight GPUs, torch cannot start CUDA: the check fails with torch's
    reason, whatever the cause; nothing infers a stand-in."""
    path, settings = gpu_standin_node
    report = tmp_path / "report.md"
    result = node_suite("--connection=local", "--node-config", str(settings), f"--node-report={report}",
                        env={"PATH": path})
    text = report.read_text()
    assert result.returncode == 1, result.output
    assert "**FAIL**" in _cuda_row(text), text
    assert ("cuda_runs_on_every_gpu: CUDA in the venv (torch, as the service user with the service env): expected "
            "CUDA to start and run a kernel on each of the 8 GPU(s) nvidia-smi lists; actual CUDA does not start: "
            "RuntimeError: Found no NVIDIA driver on your system.") in text
    for check in ("nccl_all_reduce", "p2p_matches_topology"):
        assert "**FAIL**" in _row(text, check), text
        assert f"{check}: " in text and "actual CUDA does not start: RuntimeError: Found no NVIDIA driver" in text
    assert "STAND-IN" not in text and "Stand-ins" not in text


def test_cuda_that_does_not_start_is_a_stand_in_where_declared(gpu_standin_node, tmp_path):
    """The same node with gpu_standin: the check says STAND-IN (not PASS, not a skip) and
    the report lists what stood in; the fabric check runs as on any node."""
    path, settings = gpu_standin_node
    settings.write_text(settings.read_text() + "gpu_standin: true\n")
    report = tmp_path / "report.md"
    result = node_suite("--connection=local", "--node-config", str(settings), f"--node-report={report}",
                        f"--junitxml={tmp_path / 'junit.xml'}", env={"PATH": path})
    text = report.read_text()
    assert result.returncode == 1, result.output  # the rest of this machine is no node
    assert "| STAND-IN " in _cuda_row(text) + " ", text
    assert "| nvswitch_fabric_completed " in text and "PASS" in next(
        line for line in text.splitlines() if line.startswith("| nvswitch_fabric_completed "))
    assert "Stand-ins (declared gpu_standin: passed without proof):" in text
    assert ("cuda_runs_on_every_gpu: CUDA in the venv (torch, as the service user with the service env): stand-in "
            "(gpu_standin: a recorded nvidia-smi, no device): 8 GPU(s) listed; CUDA does not start: RuntimeError: "
            "Found no NVIDIA driver on your system.") in text
    assert 'name="standin"' in (tmp_path / "junit.xml").read_text()
    # The communication checks: one run, stopped where CUDA does not start, both stand-ins.
    for check in ("nccl_all_reduce", "p2p_matches_topology"):
        assert "| STAND-IN " in _row(text, check) + " ", text
    assert ("p2p_matches_topology: CUDA peer access against the probe's topology (torch, as the service user with the "
            "service env): stand-in (gpu_standin: a recorded nvidia-smi, no device): 8 GPU(s) listed; CUDA does not "
            "start: RuntimeError: Found no NVIDIA driver on your system.") in text


ENTRY_BASE = Path("/var/lib/gpu-bringup-cli-node-entry")


def _row(report, check):
    return next(line for line in report.splitlines() if line.startswith(f"| {check} "))


@pytest.fixture
def copied_venv_node(request):
    """(settings file, venv) of a scratch node of this machine whose external venv was
    copied from another path: a real venv (its python answers) whose bin/sglang names the
    python of the path it came from, which is not here."""
    base = ENTRY_BASE / request.node.name.replace("[", "-").rstrip("]")
    shutil.rmtree(base, ignore_errors=True)
    (base / "etc-sglang").mkdir(parents=True)
    venv = base / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    for directory in (ENTRY_BASE, base, *(path for path in base.rglob("*") if path.is_dir())):
        directory.chmod(0o755)
    _executable(venv / "bin" / "sglang", "#!/opt/sglang/venvs/4f2a9c/bin/python\nimport sys\n")
    (base / "etc-sglang" / "sglang.env").write_text("")
    settings = base / "settings.yaml"
    settings.write_text(f'venv_path: "{venv}"\nvenv_managed: false\nservice_user: "nobody"\n'
                        f'service_env_file: "{base}/etc-sglang/sglang.env"\n')
    yield settings, venv
    shutil.rmtree(base, ignore_errors=True)


def test_a_copied_venv_and_no_model_fail_by_name(copied_venv_node, tmp_path):
    """The suite says what validate says: the entry point's interpreter (not bin/python)
    and, without service_model, not serving-ready; both fail by name, nothing skipped."""
    settings, venv = copied_venv_node
    report = tmp_path / "report.md"
    args = ("--connection=local", "--node-config", str(settings), f"--node-report={report}",
            "-k", "entry_point or model_set")
    result = node_suite(*args)
    text = report.read_text()
    assert result.returncode == 1, result.output
    assert "**FAIL**" in _row(text, "service_entry_point_starts") and "**FAIL**" in _row(text, "service_model_set")
    assert (f"service_entry_point_starts: {venv}/bin/sglang's #! interpreter (the unit's ExecStart, as systemd runs "
            "it): expected /opt/sglang/venvs/4f2a9c/bin/python to start; actual exit ") in text, text
    assert "status=203/EXEC: bad interpreter" in text
    assert "service_model_set: serving-ready (service_model): expected a service_model" in text
    assert "actual not serving-ready: service_model is empty" in text
    # The venv's own python on the #! line, and a model: the entry point passes; the unit
    # deploy has not written yet is named.
    _executable(venv / "bin" / "sglang", f"#!{venv}/bin/python\nimport sys\n")
    settings.write_text(settings.read_text() + "service_model: Qwen/Qwen3-0.6B\n")
    result = node_suite(*args)
    text = report.read_text()
    assert "PASS" in _row(text, "service_entry_point_starts"), text
    assert "expected Qwen/Qwen3-0.6B; actual none: run deploy.py" in text
