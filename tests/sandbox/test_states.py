"""Field states as cached layers (sandbox.field_states, sandbox.layers), and Debian 13 nodes.

Every layer is built once per machine and then reused: the first run on a
machine builds them (see docs/contributing.md, "The sandbox": minutes, mostly the hand-built
venv's torch and Debian's nvidia-cuda-toolkit); afterwards each node starts in
about a second. Nodes live at 127.0.0.8x (SANDBOX_TEST_NET moves them).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import aptrepo, field_states, image, layers, node
from sandbox.aptrepo.build import distro_dir
from tests.sandbox_fixtures import node_addr

pytestmark = pytest.mark.sandbox

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_PROBE = ("/opt/venv_sglang211/bin/python -c "
              "'import flashinfer, torch; print(flashinfer.__version__, torch.version.cuda)'")


def node_layers(name: str) -> list[str]:
    """The layer keys node *name* was started with, bottom first (its state.json)."""
    return json.loads((node.node_dir(name) / "state.json").read_text())["layers"]


def root_mount_options(entry: dict, ssh) -> str:
    """The options of the node's / overlay, as the node sees them (lowerdir=...)."""
    mounts = ssh(entry, "cat /proc/mounts").stdout.splitlines()
    return next(line for line in mounts if line.split()[1] == "/").split()[3]


# ---------------------------------------------------------------- pure: names, order, keys


def test_states_expand_in_one_canonical_order():
    assert field_states.expand(["incident"]) == ["handbuilt-venv", "nvidia-repo", "cuda-12.8"]
    assert field_states.expand(["cuda-12.8"]) == ["nvidia-repo", "cuda-12.8"]
    assert field_states.expand(["operator", "incident"]) == field_states.expand(["incident", "operator"])
    assert field_states.canonical(["operator", "incident"]) == ["incident", "operator"]
    with pytest.raises(ValueError, match="unknown state 'bogus'"):
        field_states.parse("operator,bogus")


def test_layer_keys_chain_and_change_with_their_inputs():
    steps = [layers.Step("a", "echo a", inputs={"lock": "1"}), layers.Step("b", "echo b")]
    keys = layers.chain_keys("bookworm-x", steps)
    assert [key.split("-")[0] for key in keys] == ["a", "b"]
    assert layers.chain_keys("bookworm-x", steps) == keys
    # Each key covers everything below it: base, parent, script, inputs.
    assert layers.chain_keys("trixie-y", steps)[1] != keys[1]
    assert layers.chain_keys("bookworm-x", [layers.Step("a", "echo A", inputs={"lock": "1"}), steps[1]])[1] != keys[1]
    assert layers.chain_keys("bookworm-x", [layers.Step("a", "echo a", inputs={"lock": "2"}), steps[1]])[1] != keys[1]
    assert layers.chain_keys("bookworm-x", steps[1:])[0] != keys[1]


def test_every_state_has_its_script_and_locks():
    for name in field_states.ORDER:
        assert (field_states.SCRIPTS / f"{name}.sh").is_file(), name
    for os_name in image.OSES:
        for state in field_states.STATES.values():
            if state.lock:
                assert field_states.lock_for(state, os_name).is_file(), (state.name, os_name)


# ---------------------------------------------------------------- layer builds


@pytest.fixture
def private_layers(sandbox_host, tmp_path, monkeypatch):
    """Layers built into a directory of this test's own (the base image stays the shared one)."""
    folder = tmp_path / "layers"
    monkeypatch.setattr(layers, "layers_dir", lambda: folder)
    return folder


def test_failed_layer_build_leaves_no_cache_entry(private_layers):
    failing = layers.Step("t-fail", "echo step one; touch /root/half-done; echo boom >&2; exit 3")
    with pytest.raises(layers.LayerBuildError) as failed:
        layers.ensure_chain("debian12", [failing], log=io.StringIO())
    message = str(failed.value)
    assert "state t-fail failed" in message and "exit 3" in message
    assert "step one" in message and "boom" in message, "the script's output tail is shown"
    assert [p.name for p in private_layers.iterdir()] == [".lock"], "no entry, no half-built tree"
    with open("/proc/self/mountinfo") as mounts:
        assert str(private_layers) not in mounts.read()

    # The same chain with a script that works: built from scratch, none of the failure in it.
    working = layers.Step("t-fail", "rm /etc/motd; echo kept > /root/layer-file")
    built = layers.ensure_chain("debian12", [working], log=io.StringIO())
    upper = built[0].upper
    assert (upper / "root/layer-file").read_text() == "kept\n"
    assert not (upper / "root/half-done").exists()
    motd = os.lstat(upper / "etc/motd")
    assert (motd.st_rdev, oct(motd.st_mode)[:4]) == (0, "0o20"), "a deleted file is a whiteout in the layer"
    info = built[0].info()
    assert info["state"] == "t-fail" and info["disk_bytes"] > 0 and info["build_seconds"] >= 0


def test_prune_removes_stale_layers_and_what_is_built_on_them(private_layers):
    steps = [layers.Step("t-low", "echo low > /root/low"), layers.Step("t-high", "echo high > /root/high")]
    built = layers.ensure_chain("debian12", steps, log=io.StringIO())
    assert layers.prune(lambda info: True, log=io.StringIO()) == []
    # The lower layer's script changed: both go, the upper one with it.
    removed = layers.prune(lambda info: info["state"] != "t-low", log=io.StringIO())
    assert removed == sorted(layer.key for layer in built)
    assert [p.name for p in private_layers.iterdir()] == [".lock"]


# ---------------------------------------------------------------- each state on a node


@pytest.fixture(scope="module")
def repo_node(sandbox_node):
    """A node in state nvidia-repo."""
    return sandbox_node("st-repo", "127.0.0.81", toolkit="none", states=["nvidia-repo"])


@pytest.fixture(scope="module")
def incident_node(sandbox_node):
    """The seeds' node: nvidia-repo + cuda-12.8 + handbuilt-venv."""
    return sandbox_node("st-incident", "127.0.0.82", toolkit="none", states=["incident"])


@pytest.fixture(scope="module")
def composed_node(sandbox_node, incident_node):
    """incident and operator, named the other way round, started after incident_node.

    ``log`` is what the start printed (a layer build says so).
    """
    out = io.StringIO()
    entry = sandbox_node("st-composed", "127.0.0.83", toolkit="none", states=["operator", "incident"], log=out)
    return dict(entry, log=out.getvalue())


def test_nvidia_repo_state(repo_node, sandbox_ssh):
    served = aptrepo.running()
    assert served, "the node's layer comes with the repository served"
    listing = sandbox_ssh(repo_node, "cat /etc/apt/sources.list.d/cuda-debian12-x86_64.list").stdout
    assert listing == f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {served['repo_url']} /\n"
    keyring = sandbox_ssh(repo_node, "stat -c '%U %a' /usr/share/keyrings/cuda-archive-keyring.gpg").stdout
    assert keyring.split() == ["root", "644"]
    assert "install ok installed" in sandbox_ssh(repo_node, "dpkg -s cuda-keyring").stdout
    update = sandbox_ssh(repo_node, "apt-get update", check=False)
    assert update.returncode == 0 and served["repo_url"].rstrip("/") in update.stdout, update.stdout + update.stderr
    policy = sandbox_ssh(repo_node, "apt-cache policy cuda-nvcc-13-0").stdout
    assert served["repo_url"].rstrip("/") in policy and "Installed: (none)" in policy
    assert sandbox_ssh(repo_node, "test -e /usr/local/cuda", check=False).returncode != 0


def test_cuda_12_8_state(incident_node, sandbox_ssh):
    assert "install ok installed" in sandbox_ssh(incident_node, "dpkg -s cuda-nvcc-12-8").stdout
    assert sandbox_ssh(incident_node, "readlink -f /usr/local/cuda").stdout.strip() == "/usr/local/cuda-12.8"
    assert sandbox_ssh(incident_node, "readlink /usr/local/cuda").stdout.strip() == "/etc/alternatives/cuda"
    login = sandbox_ssh(incident_node, "command -v nvcc; nvcc --version", login=True).stdout
    assert login.startswith("/usr/local/cuda-12.8/bin/nvcc\n") and "release 12.8," in login
    ptxas = sandbox_ssh(incident_node, "/usr/local/cuda-12.8/bin/ptxas --version").stdout
    assert "release 12.8," in ptxas
    # The real ptxas 12.8: Blackwell's family target does not exist yet.
    refused = sandbox_ssh(incident_node, "/usr/local/cuda-12.8/bin/ptxas -arch=sm_120f /dev/null", check=False)
    assert refused.returncode != 0 and "sm_120f" in refused.stdout + refused.stderr
    profile = sandbox_ssh(incident_node, "cat /etc/profile.d/cuda-12.8.sh").stdout
    assert 'export PATH="/usr/local/cuda-12.8/bin${PATH:+:$PATH}"' in profile


def test_handbuilt_venv_state(incident_node, sandbox_ssh):
    probe = sandbox_ssh(incident_node, VENV_PROBE)
    assert probe.stdout.splitlines()[-1] == "0.7.0 13.0"
    owner = sandbox_ssh(incident_node, "stat -c '%U %a' /opt/venv_sglang211 /opt/venv_sglang211/bin/python3")
    assert owner.stdout.split("\n")[0] == "root 755"
    assert sandbox_ssh(incident_node, "test -e /opt/sglang", check=False).returncode != 0


def test_distro_cuda_state(sandbox_node, sandbox_ssh):
    # With the hand-built venv below it, as every other chain holding distro-cuda has it:
    # one 5.6 GB layer on the machine, not two.
    entry = sandbox_node("st-distro", "127.0.0.84", toolkit="none", states=["distro-cuda", "handbuilt-venv"])
    assert "release 11.8," in sandbox_ssh(entry, "/usr/bin/nvcc --version").stdout
    assert "install ok installed" in sandbox_ssh(entry, "dpkg -s nvidia-cuda-toolkit").stdout
    assert sandbox_ssh(entry, "command -v nvcc", login=True).stdout.strip() == "/usr/bin/nvcc"
    assert sandbox_ssh(entry, "test -e /usr/local/cuda", check=False).returncode != 0


def test_operator_state(composed_node, sandbox_ssh):
    env = sandbox_ssh(composed_node, "cat /etc/sglang/sglang.env").stdout
    assert env == "HF_TOKEN=hf_sandbox_not_a_secret\nNCCL_DEBUG=INFO\nNCCL_IB_DISABLE=1\n"
    assert sandbox_ssh(composed_node, "cat /etc/environment").stdout == (
        'PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games:/snap/bin"\n')
    kind = sandbox_ssh(composed_node, "stat -c '%F %U %a' /opt/sglang/venv /opt/sglang/venv/HANDBUILT").stdout
    assert kind.splitlines() == ["directory root 755", "regular file root 644"]
    venv = sandbox_ssh(composed_node, "/opt/sglang/venv/bin/python -c 'import packaging; print(packaging.__version__)'")
    assert venv.stdout.strip() == "26.4"
    assert sandbox_ssh(composed_node, "/opt/sglang/venv/bin/python -c 'import torch'", check=False).returncode != 0
    # An SSH session's PATH is the Ubuntu-style one (pam_env reads /etc/environment).
    assert sandbox_ssh(composed_node, "echo $PATH").stdout.strip().endswith(":/snap/bin")


# ---------------------------------------------------------------- composition and sharing


def test_composed_states_hold_both(composed_node, sandbox_ssh):
    assert composed_node["states"] == ["incident", "operator"]
    assert [key.split("-")[0] for key in node_layers("st-composed")] == ["handbuilt", "nvidia", "cuda", "operator"]
    assert sandbox_ssh(composed_node, VENV_PROBE).stdout.splitlines()[-1] == "0.7.0 13.0"
    assert "release 12.8," in sandbox_ssh(composed_node, "nvcc --version", login=True).stdout
    assert sandbox_ssh(composed_node, "test -f /opt/sglang/venv/HANDBUILT").returncode == 0
    status = subprocess.run([sys.executable, "-m", "sandbox", "status"], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=True).stdout
    line = next(row for row in status.splitlines() if row.startswith("st-composed "))
    assert "incident,operator" in line and "debian12" in line


def test_two_nodes_share_layers(incident_node, composed_node, sandbox_ssh):
    shared = node_layers("st-incident")
    assert node_layers("st-composed")[:3] == shared
    for key in shared:
        assert f"building layer {key}" not in composed_node["log"], "no second build of a cached layer"
    # Both nodes mount the very same layer directories.
    for entry in (incident_node, composed_node):
        options = root_mount_options(entry, sandbox_ssh)
        for key in shared:
            assert f"{layers.layers_dir() / key}/upper" in options
    assert set(node_layers("st-composed")) <= layers.in_use(), "prune keeps what nodes mount"
    # Started again, a node reuses every layer as it is.
    before = {key: (layers.layers_dir() / key).stat().st_ino for key in shared}
    out = io.StringIO()
    node.up("st-incident", node_addr("127.0.0.82"), "rtx-pro-6000-x8", states=["incident"], log=out)
    assert "building layer" not in out.getvalue()
    assert {key: (layers.layers_dir() / key).stat().st_ino for key in shared} == before


def test_stand_in_toolkit_and_cuda_state_exclude_each_other(sandbox_host):
    with pytest.raises(node.SandboxError, match="exclude each other"):
        node.up("st-clash", node_addr("127.0.0.89"), "none", toolkit="incident", states=["incident"])


# ---------------------------------------------------------------- Debian 13


def test_debian13_node(sandbox_node, sandbox_ssh):
    entry = sandbox_node("st-trixie", "127.0.0.85", gpu="rtx-5090", toolkit="none", os_name="debian13")
    assert entry["os"] == "debian13"
    assert sandbox_ssh(entry, "python3 --version").stdout.startswith("Python 3.13.")
    assert sandbox_ssh(entry, ". /etc/os-release; echo $ID $VERSION_ID").stdout.split() == ["debian", "13"]
    assert "RTX 5090" in sandbox_ssh(entry, "nvidia-smi -L").stdout
    assert sandbox_ssh(entry, "python3 -m venv /tmp/v && /tmp/v/bin/python -V").stdout.startswith("Python 3.13.")


def test_debian13_nvidia_repo_and_operator_states(sandbox_node, sandbox_ssh):
    entry = sandbox_node("st-trixie-repo", "127.0.0.86", gpu="rtx-5090", toolkit="none", os_name="debian13",
                         states=["operator", "nvidia-repo"])
    url = aptrepo.distro_repo("debian13", aptrepo.running())["repo_url"]
    assert url.endswith("/compute/cuda/repos/debian13/x86_64/")
    assert sandbox_ssh(entry, "ls /etc/apt/sources.list.d").stdout.split() == ["cuda-debian13-x86_64.list",
                                                                               "debian.sources"]
    listing = sandbox_ssh(entry, "cat /etc/apt/sources.list.d/cuda-debian13-x86_64.list").stdout
    assert listing == f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {url} /\n"
    update = sandbox_ssh(entry, "apt-get update", check=False)
    assert update.returncode == 0 and url.rstrip("/") in update.stdout, update.stdout + update.stderr
    assert url.rstrip("/") in sandbox_ssh(entry, "apt-cache policy cuda-nvcc-12-8").stdout
    # The operator's venv on CPython 3.13, from the mirror's cp313 wheels.
    venv = sandbox_ssh(entry, "/opt/sglang/venv/bin/python -c 'import sys, packaging; "
                              "print(sys.version_info[:2], packaging.__version__)'")
    assert venv.stdout.strip() == "(3, 13) 26.4"
    # Layers are per OS: a Debian 12 node's nvidia-repo layer is another one.
    assert [key.rsplit("-", 1)[0] for key in node_layers("st-trixie-repo")] == ["nvidia-repo", "operator"]
    debian12 = layers.chain_keys(image.image_dir("debian12").name, field_states.steps("debian12", ["nvidia-repo"]))
    assert node_layers("st-trixie-repo")[0] != debian12[0]


def test_debian13_directory_shares_the_packages(sandbox_host):
    # Built on first use: this test may run before any Debian 13 node started.
    aptrepo.ensure_served(dirs=[("debian13", "x86_64")])
    d12, d13 = distro_dir("debian12"), distro_dir("debian13")
    debs12 = sorted(p.name for p in d12.glob("*.deb"))
    assert debs12 == sorted(p.name for p in d13.glob("*.deb")) and "cuda-nvcc-12-8_12.8.93-1_amd64.deb" in debs12
    for name in debs12:
        same = (d12 / name).stat().st_ino == (d13 / name).stat().st_ino
        assert same == (name != "cuda-keyring_1.1-1_all.deb"), name
    # Its own signed indexes: apt checks InRelease per directory.
    assert (d13 / "InRelease").read_text() != (d12 / "InRelease").read_text()
    assert "Origin: NVIDIA" in (d13 / "Release").read_text()
