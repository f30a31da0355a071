"""Ubuntu for real: nodes debootstrapped from Ubuntu's archive (needrestart
and unattended-upgrades installed as on a cloud image), found in the incident's state
(NVIDIA's cuda-keyring source, CUDA 12.8 by apt, a hand-built venv).

Ubuntu 24.04 goes to a green node suite with deploy.py: the trap named first, then the
toolkit at its lock, the venv with python3.12 and the cp312 lock, the reduced pre-warm
and the unit; validate says ready, a second deploy changes nothing; its wall time is
recorded (``ubuntu_seconds``).

Ubuntu 22.04's only CPython >= 3.11 is python3.11 3.11.0rc1 from jammy-updates, on
which torch 2.14.1's torch._dynamo does not import (the first run of this suite showed
it: the cp311 venv built on python3.11, SGLang's pre-warm failed). Fleets on 22.04 bring
their own CPython: the node is found in the incident state plus the operator's CPython
3.11.2 under /opt/cpython-3.11 (the ``operator-python`` state: built from Debian's signed
source package, sandbox/operator_python.py). Without ``venv_python`` validate names the
trap and PYTHON_UNUSABLE and deploy refuses, changing nothing; with it the node goes to
green as the 24.04 one does, its cp311 venv built with that interpreter
(``ubuntu2204_seconds``).

And a cloud image's first boot: unattended-upgrades holding apt's locks (the
``first-boot-upgrades`` stand-in) on a light 24.04 node; the deploy waits for it."""

import concurrent.futures
import re
import time

import pytest

from sandbox import aptrepo, pypimirror
from sandbox import node as sandbox_nodes
from tests.sandbox_fixtures import changed_operations, node_suite, pyinfra_cli, run_ssh, summary_row, validate

pytestmark = pytest.mark.sandbox

# The Debian 13 suite's settings (tests/sandbox/test_debian13.py): the reduced pre-warm
# (make demo DEMO_OS=ubuntu2404 pre-warms the full set), a model for the unit's arguments.
DATA = ("prewarm_modules=activation:silu,sglang-activation", "service_model=Qwen/Qwen3-0.6B", "service_enable=false")
# The operator's CPython on the 22.04 node (sandbox/states/operator-python.ubuntu2204.sh).
OPERATOR_PYTHON = "/opt/cpython-3.11/bin/python3.11"
# os -> (node, address, python3's X.Y, the venv's CPython: path and X.Y, its lock's tag)
RELEASES = {
    "ubuntu2204": ("u-2204", "127.0.0.67", "3.10", OPERATOR_PYTHON, "3.11", "cp311"),
    "ubuntu2404": ("u-2404", "127.0.0.68", "3.12", "/usr/bin/python3", "3.12", "cp312"),
}


def start(sandbox_node, os_name, states=("incident",)):
    name, addr = RELEASES[os_name][:2]
    aptrepo.ensure_served()
    pypimirror.serve()
    started = time.monotonic()
    return dict(sandbox_node(name, addr, gpu="rtx-pro-6000-x8", toolkit="none", states=states,
                             os_name=os_name), name=name, os_name=os_name, started=started)


@pytest.fixture
def ubuntu(sandbox_node):
    # Reached as a cloud image is: its ubuntu user, through a CIS-hardened passwordless sudo
    # (the cloud-login state: umask 0077, use_pty, env_reset, secure_path); the tests' own
    # SSH stays root's.
    entry = start(sandbox_node, "ubuntu2404", states=("incident", "cloud-login"))
    yield entry
    # Its venvs take gigabytes: free them before the 22.04 node.
    sandbox_nodes.down([entry["name"]])


@pytest.fixture(scope="module")
def jammy(sandbox_node):
    # The incident's node with the operator's CPython: refused without venv_python,
    # deployed with it (one node for both, CI's time).
    entry = start(sandbox_node, "ubuntu2204", states=("incident", "operator-python"))
    yield entry
    sandbox_nodes.down([entry["name"]])


def found_as_shipped(entry):
    """os-release, python3, the sources' format (24.04: deb822 ubuntu.sources, 22.04:
    sources.list) and the cloud image's needrestart and unattended-upgrades."""
    os_name = entry["os_name"]
    release = f"{os_name[6:8]}.{os_name[8:]}"
    found = run_ssh(entry, ". /etc/os-release; echo $ID $VERSION_ID; python3 --version; "
                           "ls /etc/apt/sources.list.d/; dpkg-query -W -f '${Package} ' needrestart "
                           "unattended-upgrades").stdout.splitlines()
    assert found[0] == f"ubuntu {release}" and found[1].startswith(f"Python {RELEASES[os_name][2]}."), found
    assert ("ubuntu.sources" in found[2:-1]) == (os_name == "ubuntu2404"), found
    assert found[-1].split() == ["needrestart", "unattended-upgrades"], found


def incident_to_green(entry, data, tmp_path, record_property):
    """validate (the trap named, nothing blocks), deploy (the toolkit at its lock, the venv
    with the release's CPython and lock, the reduced pre-warm, the unit), validate again
    (ready), the node suite green, a second deploy changing nothing; the wall time since
    the node was started is recorded as ``<os>_seconds``."""
    name, os_name = entry["name"], entry["os_name"]
    _, _, _, venv_python, venv_version, tag = RELEASES[os_name]
    _, before = validate(name, data=data)
    plan = before["plan"]
    codes = {(f["code"], f["severity"]) for f in plan["findings"]}
    assert {("FLASHINFER_ARCH_TRAP", "fix"), ("PATH_SHADOWS_CUDA_HOME", "fix"), ("APT_SOURCE_CONFLICT", "info"),
            ("TOOLKIT_MISSING", "fix")} <= codes, codes
    assert not [f for f in plan["findings"] if f["severity"] == "blocker"], plan["findings"]
    assert plan["repo"]["distro"] == os_name and plan["arch_list"] == "12.0f"
    assert plan["toolkit"]["lock"] == f"files/locks/cuda-13.0-{os_name}-x86_64.txt"
    assert plan["venv"]["lock"] == f"files/locks/sglang-0.5.23-{tag}-x86_64.txt"
    assert plan["venv"]["uv_lock"] == f"files/locks/uv-{tag}-x86_64.txt"
    assert plan["venv"]["python"] == venv_python, plan["venv"]

    deployed = pyinfra_cli("inventory/gpu.py", "--limit", name, "deploy.py", data=data)
    assert deployed.returncode == 0, deployed.output[-4000:]
    assert re.search(r"build-venv: venv [0-9a-f]+ built with uv in \d+s", deployed.output), deployed.output[-4000:]
    timed = re.findall(r"prewarm: done  (\S+) in \d+\.\d s", deployed.output)
    assert "activation:silu" in timed and any(module.startswith("sglang-activation:") for module in timed), timed
    venv = run_ssh(entry, "/opt/sglang/venv/bin/python -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'; "
                          "sed -n 's/^home = //p' /opt/sglang/venv/pyvenv.cfg; "
                          "systemctl cat sglang.service >/dev/null && echo unit").stdout.split()
    # pyvenv.cfg's home: the directory of the interpreter the venv was built with.
    assert venv == [venv_version, venv_python.rsplit("/", 1)[0], "unit"], venv

    validate(name, data=data)
    assert summary_row(name)["verdict"] == "ready"
    run = node_suite(tmp_path, "--node-limit", name, data=data)
    assert run.rc == 0 and run.failing(name) == set(), run
    assert "toolkit_packages_at_lock" in run.checks(name), run.checks(name)
    again = pyinfra_cli("inventory/gpu.py", "--limit", name, "deploy.py", data=data, json_output=True)
    assert again.returncode == 0, again.output[-4000:]
    assert changed_operations(again) == []
    seconds = round(time.monotonic() - entry["started"])
    record_property(f"{os_name}_seconds", seconds)
    print(f"\n{os_name}: incident node to green (up, validate, deploy, validate, node suite, deploy): {seconds} s")


SUDO_SECRET = "hf_sudologsecret44"
# What a root deploy leaves (the operator's 0600 env file kept, its group the service's; tests/sandbox/test_deploy_toolkit.py, the node suite's
# permission checks): explicit modes, none from the caller's umask.
ROOT_DEPLOY_MODES = {
    "/etc/profile.d/zz-cuda-home.sh": "644 root:root", "/etc/sglang": "755 root:root",
    "/etc/sglang/sglang.env": "600 root:sglang", "/etc/systemd/system/sglang.service": "644 root:root",
    "/opt/sglang": "755 root:root", "/opt/sglang/venvs": "755 root:root",
}


def test_ubuntu2404_incident_to_green(ubuntu, tmp_path, record_property):
    """Through the ubuntu user's hardened sudo, as a cloud image is reached: green, and
    what the deploy wrote has a root deploy's modes (sudo's umask 0077 closes nothing)."""
    found_as_shipped(ubuntu)
    # The operator's token in a root-only env file (kept as it is): sudo logs every command
    # line it runs (/var/log/sudo.log), and none may hold it.
    run_ssh(ubuntu, "install -d -m 0755 /etc/sglang && printf 'HF_TOKEN=%s\\n' " + SUDO_SECRET +
            " > /etc/sglang/sglang.env && chmod 0600 /etc/sglang/sglang.env")
    incident_to_green(ubuntu, DATA, tmp_path, record_property)
    modes = run_ssh(ubuntu, "stat -c '%n %a %U:%G' " + " ".join(ROOT_DEPLOY_MODES)).stdout.splitlines()
    assert dict(line.split(" ", 1) for line in modes) == ROOT_DEPLOY_MODES
    closed = run_ssh(ubuntu, "find /opt/sglang/venvs /var/cache/sglang /usr/local/cuda-13.0 -mindepth 1 "
                             "! -perm -o+r -print | head -n 5").stdout
    assert closed == "", f"closed to other users (the caller's umask leaked): {closed}"
    sudo_log = run_ssh(ubuntu, "cat /var/log/sudo.log").stdout
    assert "ubuntu : " in sudo_log, "the deploy did not go through sudo"
    assert SUDO_SECRET not in sudo_log, "a secret of the env file is on a command line sudo ran"


def test_ubuntu2204_is_refused_before_anything_changes(jammy):
    """The archive's python3.11 is 3.11.0rc1: without venv_python validate blocks with
    PYTHON_UNUSABLE (its fix naming venv_python) beside the trap (CUDA 12.8 first on
    PATH); deploy changes nothing."""
    found_as_shipped(jammy)
    policy = run_ssh(jammy, "apt-cache policy python3.11 | sed -n 's/^  Candidate: //p'").stdout.strip()
    assert policy.startswith("3.11.0~rc1-"), policy
    _, report = validate(jammy["name"], expect_rc=1, data=DATA)
    findings = {f["code"]: f for f in report["plan"]["findings"]}
    assert findings["PYTHON_UNUSABLE"]["severity"] == "blocker", findings
    assert "set venv_python" in findings["PYTHON_UNUSABLE"]["fix"], findings["PYTHON_UNUSABLE"]
    assert findings["FLASHINFER_ARCH_TRAP"]["severity"] == "fix", findings
    assert report["plan"]["toolkit"]["lock"] == "files/locks/cuda-13.0-ubuntu2204-x86_64.txt"
    listing = "ls /etc/apt/sources.list.d /opt /var/cache; ls /etc/sglang 2>&1; true"
    before = run_ssh(jammy, listing).stdout
    refused = pyinfra_cli("inventory/gpu.py", "--limit", jammy["name"], "deploy.py", data=DATA)
    assert refused.returncode == 1 and "PYTHON_UNUSABLE" in refused.output, refused.output[-3000:]
    assert run_ssh(jammy, listing).stdout == before


def test_ubuntu2204_refuses_the_operators_cpython_while_another_user_may_change_its_prefix(jammy):
    """One rule for what root may run (files/root-may-run.sh) on a real node: a .pth file
    in the operator's CPython's site-packages owned by a throwaway user (nobody) makes
    validate block with VENV_PYTHON_UNUSABLE naming that file and its fix, the probe
    never starts the interpreter (the .pth's marker stays absent), and deploy changes
    nothing. The .pth is removed after, for the green run that follows."""
    pth = "/opt/cpython-3.11/lib/python3.11/site-packages/zz-rootruns.pth"
    marker = "/var/tmp/rootruns-pth-ran"
    run_ssh(jammy, f"rm -f {marker}; printf '%s\\n' \"import os; open('{marker}', 'a').write(str(os.getuid()))\" "
                   f"> {pth} && chown nobody {pth}")
    try:
        data = DATA + (f"venv_python={OPERATOR_PYTHON}",)
        _, report = validate(jammy["name"], expect_rc=1, data=data)
        fact = report["facts"]["venv_python"]
        assert (fact["owner"], fact["blocked"], fact["ran"]) == ("nobody", pth, None), fact
        findings = {f["code"]: f for f in report["plan"]["findings"]}
        assert findings["VENV_PYTHON_UNUSABLE"]["severity"] == "blocker", findings
        assert f"through {pth}" in findings["VENV_PYTHON_UNUSABLE"]["message"], findings["VENV_PYTHON_UNUSABLE"]
        assert f"chown -R root: {pth}" in findings["VENV_PYTHON_UNUSABLE"]["fix"], findings["VENV_PYTHON_UNUSABLE"]
        listing = "ls /etc/apt/sources.list.d /opt /var/cache; ls /etc/sglang 2>&1; true"
        before = run_ssh(jammy, listing).stdout
        refused = pyinfra_cli("inventory/gpu.py", "--limit", jammy["name"], "deploy.py", data=data)
        assert refused.returncode == 1 and "VENV_PYTHON_UNUSABLE" in refused.output, refused.output[-3000:]
        assert run_ssh(jammy, listing).stdout == before
        assert run_ssh(jammy, f"test -e {marker} && cat {marker}; true").stdout == "", "root ran the .pth"
    finally:
        run_ssh(jammy, f"rm -f {pth} {marker}")


def test_ubuntu2204_with_the_operators_cpython_to_green(jammy, tmp_path, record_property):
    """The operator's CPython 3.11.2 (root's, under /opt) named by venv_python: the probe
    ran it, the cp311 venv is built with it, the node goes to green."""
    found = run_ssh(jammy, f"stat -c '%U %a' {OPERATOR_PYTHON} /opt/cpython-3.11 /opt/cpython-3.11/bin; "
                           f"{OPERATOR_PYTHON} -I -c 'import sys; print(sys.version_info.releaselevel)'; "
                           f"{OPERATOR_PYTHON} --version").stdout.splitlines()
    assert found == ["root 755", "root 755", "root 755", "final", "Python 3.11.2"], found
    data = DATA + (f"venv_python={OPERATOR_PYTHON}",)
    _, report = validate(jammy["name"], data=data)
    fact = report["facts"]["venv_python"]
    assert (fact["owner"], fact["ran"], fact["version"], fact["releaselevel"], fact["venv"]) == \
        (None, 0, "3.11.2", "final", "ok"), fact
    assert not {"PYTHON_UNUSABLE", "PYTHON_TOO_OLD", "VENV_PYTHON_UNUSABLE"} & \
        {f["code"] for f in report["plan"]["findings"]}, report["plan"]["findings"]
    incident_to_green(jammy, data, tmp_path, record_property)


@pytest.fixture(scope="module")
def first_boot(sandbox_node):
    aptrepo.ensure_served()
    entry = dict(sandbox_node("u-boot", "127.0.0.69", toolkit="none", states=("first-boot-upgrades", "nvidia-repo"),
                              os_name="ubuntu2404"), name="u-boot")
    yield entry
    sandbox_nodes.down(["u-boot"])


def test_first_boot_upgrades_hold_apt_and_the_deploy_waits(first_boot):
    """Right after boot the stand-in holds dpkg's frontend lock: validate names the holder,
    a deploy allowed 5 s fails changing nothing, one allowed more waits; the upgrades
    finish (the stand-in stops) while it waits, and it converges."""
    _, report = validate("u-boot", data=("deploy_steps=repo",))
    holders = report["facts"]["apt_locks"]
    assert any(h["lock"] == "/var/lib/dpkg/lock-frontend" and "unattended-upgrade" in h["command"]
               for h in holders), holders
    short = pyinfra_cli("inventory/gpu.py", "--limit", "u-boot", "deploy.py",
                        data=("deploy_steps=repo", "deploy_apt_lock_timeout=5"))
    assert short.returncode == 1, short.output[-3000:]
    assert "apt is still locked after 5 s; nothing was changed on this host" in short.output, short.output[-3000:]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        waiting = pool.submit(pyinfra_cli, "inventory/gpu.py", "--limit", "u-boot", "deploy.py",
                              data=("deploy_steps=repo", "deploy_apt_lock_timeout=300"))
        # The deploy's wait loop (tasks/operations/packages.py apt_unlocked) is on the node:
        # then the upgrades finish.
        seen = run_ssh(first_boot, "for i in $(seq 600); do pgrep -f '[a]pt-locks: held by' >/dev/null && "
                                   "echo waiting && exit 0; sleep 0.2; done; echo never").stdout.strip()
        run_ssh(first_boot, "systemctl stop sandbox-first-boot-upgrades")
        waited = waiting.result(timeout=600)
    assert seen == "waiting", waited.output[-3000:]
    assert waited.returncode == 0, waited.output[-3000:]
    assert re.search(r"apt-locks: held by .*unattended-upgrade.*; waiting", waited.output), waited.output[-3000:]
    assert re.search(r"apt-locks: free after \d+ s", waited.output), waited.output[-3000:]
