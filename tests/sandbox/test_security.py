"""Security end to end on sandbox nodes: the service account cannot change code root
runs, a .pth it plants anywhere it can write never runs as root (validate, deploy, node
suite), the venv's completion marker cannot be raced, uploads land whole and replace a
planted link instead of following it (as root, and through sudo), and the repository
key is pinned."""

import json
import os
import shlex
import subprocess

import pytest

from sandbox import aptrepo
from tests.sandbox_fixtures import DEPLOY_DATA, PYINFRA, REPO_ROOT, node_suite, pyinfra_cli, run_ssh

pytestmark = pytest.mark.sandbox

# One line of a .pth, printed with its newline by printf (json's "\\n" stayed a literal
# backslash-n, a syntax error, so the plant never ran anywhere).
PLANT = "import os; open('/tmp/pth-ran-as-' + str(os.getuid()), 'w')"
OTHER_FINGERPRINT = "0123456789ABCDEF0123456789ABCDEF01234567"


def pyinfra(host, *args, data=DEPLOY_DATA):
    return pyinfra_cli("inventory/gpu.py", "--limit", host, *args, data=data)


@pytest.fixture(scope="module")
def node(deployed_node):
    return deployed_node


def test_a_pth_the_service_user_plants_never_runs_as_root(node, tmp_path):
    planted = run_ssh(node, f"""
        cd /tmp
        site=/var/lib/sglang/.local/lib/python3.11/site-packages
        runuser -u sglang -- mkdir -p "$site"
        for dir in "$site" /var/cache/sglang /var/cache/sglang/xdg /tmp; do
            printf '%s\\n' {shlex.quote(PLANT)} | runuser -u sglang -- tee "$dir/zz-planted.pth" >/dev/null
        done
        venv_site=$(ls -d /opt/sglang/venv/lib/python3*/site-packages)
        printf '%s\\n' {shlex.quote(PLANT)} | runuser -u sglang -- tee "$venv_site/zz-planted.pth" >/dev/null 2>&1 \\
            && echo venv-writable || echo venv-refused
        rm -f /tmp/pth-ran-as-*""")
    assert "venv-refused" in planted.stdout
    assert pyinfra(node["name"], "validate.py").returncode == 0
    assert pyinfra(node["name"], "deploy.py").returncode == 0
    node_suite(tmp_path, "--node-limit", node["name"])
    ran = run_ssh(node, "ls /tmp/pth-ran-as-* 2>/dev/null; true").stdout.split()
    run_ssh(node, "rm -f /tmp/pth-ran-as-* /var/lib/sglang/.local/lib/python3*/site-packages/zz-planted.pth "
                  "/var/cache/sglang/zz-planted.pth /var/cache/sglang/xdg/zz-planted.pth /tmp/zz-planted.pth")
    assert "/tmp/pth-ran-as-0" not in ran, ran


def test_the_completion_marker_cannot_be_raced(node):
    out = run_ssh(node, """
        target=$(readlink -f /opt/sglang/venv)
        stat -c '%U %a' "$target" "$target/.complete" /opt/sglang/venvs
        runuser -u sglang -- ln -s /etc/shadow "$target/.complete.tmp" 2>&1 && echo planted || echo refused""").stdout
    lines = out.splitlines()
    assert lines[:3] == ["root 755", "root 644", "root 755"], out
    assert lines[-1] == "refused", out


def test_uploads_replace_a_planted_link_and_land_whole(node):
    run_ssh(node, "echo precious > /root/precious && ln -sfn /root/precious /etc/profile.d/zz-cuda-home.sh; "
                  "stat -c %i /etc/sglang/sglang.env > /tmp/env-inode")
    result = pyinfra(node["name"], "deploy.py", data=(*DEPLOY_DATA, "service_env=PLANTED_TEST=1"))
    assert result.returncode == 0, result.output[-3000:]
    out = run_ssh(node, "cat /root/precious; stat -c %F /etc/profile.d/zz-cuda-home.sh; "
                        "test \"$(stat -c %i /etc/sglang/sglang.env)\" != \"$(cat /tmp/env-inode)\" && echo renamed; "
                        "ls -a /etc/profile.d /etc/sglang | grep -c gpu-bringup-new; true").stdout.splitlines()
    assert out[:3] == ["precious", "regular file", "renamed"], out
    assert out[3] == "0", "a staging file was left behind"
    # Back to the shared deployed state.
    assert pyinfra(node["name"], "deploy.py").returncode == 0


@pytest.fixture(scope="module")
def plain(sandbox_node):
    aptrepo.ensure_served()
    return dict(sandbox_node("sec-plain", "127.0.0.57", gpu="rtx-pro-6000-x8", toolkit="none"), name="sec-plain")


def keyring_digest(entry):
    return run_ssh(entry, "sha256sum /etc/apt/keyrings/nvidia-cuda.gpg 2>/dev/null | cut -c1-64; true").stdout.strip()


def test_a_key_of_another_fingerprint_is_refused_and_the_old_keyring_kept(plain):
    wrong = ("deploy_steps=repo", f"cuda_repo_fingerprint={OTHER_FINGERPRINT}")
    first = pyinfra(plain["name"], "deploy.py", data=wrong)
    assert first.returncode == 1
    assert f"is not {OTHER_FINGERPRINT}; check cuda_repo_key_url and cuda_repo_fingerprint" in first.output
    assert keyring_digest(plain) == "", "no keyring may be written for a key that is not the pinned one"
    assert pyinfra(plain["name"], "deploy.py", data=("deploy_steps=repo",)).returncode == 0
    pinned = keyring_digest(plain)
    assert len(pinned) == 64
    again = pyinfra(plain["name"], "deploy.py", data=wrong)
    assert again.returncode == 1 and keyring_digest(plain) == pinned
    assert run_ssh(plain, "apt-get update -qq >/dev/null 2>&1; echo $?").stdout.strip() == "0"


def test_uploads_through_sudo_never_use_a_shared_temp_name(plain, tmp_path):
    """An SSH user with sudo: pyinfra's own upload would land in /tmp/pyinfra-<sha1> (a name
    another user can plant); ours lands in the SSH user's own directory first."""
    run_ssh(plain, """
        id ops >/dev/null 2>&1 || useradd -m -s /bin/bash ops
        install -d -m 700 -o ops -g ops /home/ops/.ssh && cp /root/.ssh/authorized_keys /home/ops/.ssh/
        chown ops:ops /home/ops/.ssh/authorized_keys
        echo 'ops ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/ops && chmod 440 /etc/sudoers.d/ops
        id mallory >/dev/null 2>&1 || useradd -m mallory
        echo original > /root/victim
        for path in /etc/profile.d/zz-cuda-home.sh /etc/profile.d/.zz-cuda-home.sh.gpu-bringup-new; do
            name=/tmp/pyinfra-$(printf %s "$path" | sha1sum | cut -c1-40)
            runuser -u mallory -- ln -sfn /root/victim "$name"
        done""")
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(json.dumps({"hosts": {"sudo-node": {
        "ssh_hostname": plain["ssh_hostname"], "ssh_port": plain["ssh_port"], "ssh_user": "ops",
        "ssh_key": plain["ssh_key"], "ssh_known_hosts_file": plain["ssh_known_hosts_file"], "_sudo": True}}}))
    result = subprocess.run([PYINFRA, "-y", "--data", "deploy_steps=env", "--data", "cuda_manage_alternative=false",
                             "inventory/gpu.py", "deploy.py"], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=600, env={**os.environ, "GPU_BRINGUP_HOSTS": str(hosts)}, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    out = run_ssh(plain, "cat /root/victim; stat -c '%U %a %F' /etc/profile.d/zz-cuda-home.sh; "
                         "grep -c CUDA_HOME=/usr/local/cuda-13.0 /etc/profile.d/zz-cuda-home.sh").stdout.splitlines()
    assert out == ["original", "root 644 regular file", "1"], out


def test_a_sudo_that_asks_for_a_password_refuses_the_host_in_one_line(plain, tmp_path):
    """An SSH user whose sudo wants a password (no NOPASSWD), and no _sudo_password:
    validate and deploy refuse that host in one line naming pyinfra's setting, never
    waiting at a prompt, nothing changed."""
    run_ssh(plain, """
        id asker >/dev/null 2>&1 || useradd -m -s /bin/bash asker
        install -d -m 700 -o asker -g asker /home/asker/.ssh && cp /root/.ssh/authorized_keys /home/asker/.ssh/
        chown asker:asker /home/asker/.ssh/authorized_keys
        echo 'asker ALL=(ALL) ALL' > /etc/sudoers.d/asker && chmod 440 /etc/sudoers.d/asker""")
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(json.dumps({"hosts": {"asks-node": {
        "ssh_hostname": plain["ssh_hostname"], "ssh_port": plain["ssh_port"], "ssh_user": "asker",
        "ssh_key": plain["ssh_key"], "ssh_known_hosts_file": plain["ssh_known_hosts_file"], "_sudo": True}}}))
    before = run_ssh(plain, "ls /etc/apt/sources.list.d /etc/profile.d").stdout
    for script in ("validate.py", "deploy.py"):
        result = subprocess.run([PYINFRA, "-y", "inventory/gpu.py", script], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=300, env={**os.environ, "GPU_BRINGUP_HOSTS": str(hosts)},
                                stdin=subprocess.DEVNULL)
        output = result.stdout + result.stderr
        assert result.returncode == 1, output[-3000:]
        said = [line for line in output.splitlines() if "sudo asks asker for a password" in line]
        assert said and "set pyinfra's _sudo_password for this host" in said[0], output[-3000:]
        assert "sudo password:" not in output and "Traceback" not in output, output[-3000:]
    assert run_ssh(plain, "ls /etc/apt/sources.list.d /etc/profile.d").stdout == before
