"""A fleet in one deploy.py run through the real CLI: healthy nodes beside broken ones
(down, apt locked, mirror gone mid-run), each broken one failing alone and unchanged, the
fleet summary naming every host's state, and a re-run after the faults are removed
converging. Repository, toolkit and environment only (deploy_steps): the venv is not the
point here.

Nodes (and the mirror) live on 127.0.0.7x, moved by $SANDBOX_TEST_NET like every suite's;
every node started here is taken down at the end.
"""

import functools
import json
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import pytest
import yaml

from sandbox import aptrepo, node as sandbox_nodes
from sandbox.registration import inventory_document
from tests.sandbox_fixtures import REPO_ROOT, node_addr, pyinfra_cli, run_ssh

pytestmark = pytest.mark.sandbox

STEPS = ("deploy_steps=repo,toolkit,env",)
MIRROR_ADDR = node_addr("127.0.0.79")
# The fleet's own reports directory (control/reports.py): other suites' runs beside it
# write reports/summary.json, never this one.
REPORTS = REPO_ROOT / "reports" / "fleet"
SUMMARY = REPORTS / "summary.json"
# What deploy's repo, toolkit and env steps write: none of it may appear on a host that failed.
WRITTEN = ("/etc/apt/keyrings/nvidia-cuda.gpg", "/etc/apt/sources.list.d/nvidia-cuda.sources",
           "/etc/apt/preferences.d/nvidia-cuda", "/etc/profile.d/zz-cuda-home.sh", "/usr/local/cuda-13.0/bin/nvcc")


class Mirror:
    """A site mirror of the sandbox's apt repository on an address of its own; with
    ``die_after`` it stops answering (connections refused) right after serving the first
    path ending so: the repository goes away in the middle of a run."""

    def __init__(self, die_after=None):
        self.die_after = die_after
        root = str(aptrepo.SERVE_ROOT)
        mirror = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                super().do_GET()
                if mirror.die_after and self.path.endswith(mirror.die_after):
                    threading.Thread(target=mirror.stop, daemon=True).start()

        self.httpd = ThreadingHTTPServer((MIRROR_ADDR, 0), functools.partial(Handler, directory=root))
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def again(self):
        """The same mirror back on the same port, answering everything."""
        self.die_after = None
        handler = functools.partial(SimpleHTTPRequestHandler, directory=str(aptrepo.SERVE_ROOT))
        self.httpd = ThreadingHTTPServer((MIRROR_ADDR, self.port), handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def settings(self, repo):
        base = f"http://{MIRROR_ADDR}:{self.port}"
        key = repo["key_url"].split("/compute/", 1)[1]
        return {"cuda_repo_url": f"{base}/compute/cuda/repos", "cuda_repo_key_url": f"{base}/compute/{key}"}


def write_hosts(path, overrides):
    """inventory/hosts.yml for the running sandbox nodes (what the sandbox registers for
    inventory/gpu.py: the apt repository's settings under all:) with per-host overrides."""
    registered = inventory_document(sandbox_nodes.read_registry(), aptrepo.running())
    document = {"all": registered["all"],
                "hosts": {name: {**data, **overrides.get(name, {})} for name, data in registered["hosts"].items()
                          if name.startswith("fl-")}}
    path.write_text(yaml.safe_dump(document))
    return path


def fleet_env(hosts_file):
    """The environment of a run over the host list ``hosts_file``, reporting to REPORTS;
    os.environ is put back as it was found."""
    return mock.patch.dict(os.environ, GPU_BRINGUP_HOSTS=str(hosts_file), GPU_BRINGUP_REPORTS=str(REPORTS))


def deploy(hosts_file, *args):
    with fleet_env(hosts_file):
        return pyinfra_cli("inventory/gpu.py", *args, "deploy.py", data=STEPS)


def rows():
    return {row["host"]: row for row in json.loads(SUMMARY.read_text())["hosts"]}


def absent(entry):
    return run_ssh(entry, " ".join(f"test ! -e {path} &&" for path in WRITTEN) + " true", check=False).returncode == 0


def freeze(name, frozen):
    """Freeze (or thaw) every process of a node: it stops answering, as a hung host does."""
    (sandbox_nodes.node_cgroup(name) / "cgroup.freeze").write_text("1\n" if frozen else "0\n")


@pytest.fixture(scope="module")
def fleet(sandbox_node):
    aptrepo.ensure_served()
    return {name: sandbox_node(name, f"127.0.0.{74 + index}", gpu="rtx-pro-6000-x8", toolkit="incident")
            for index, name in enumerate(("fl-ok", "fl-down", "fl-locked", "fl-mirror"))}


def test_broken_hosts_fail_alone_unchanged_and_a_rerun_converges(fleet, tmp_path):
    mirror = Mirror(die_after=".pub")
    hosts_file = write_hosts(tmp_path / "hosts.yml", {"fl-locked": {"deploy_apt_lock_timeout": 5},
                                                      "fl-mirror": mirror.settings(aptrepo.running())})
    # unattended-upgrades' way: the dpkg frontend lock held for minutes.
    run_ssh(fleet["fl-locked"], "nohup flock /var/lib/dpkg/lock-frontend sleep 600 >/dev/null 2>&1 &")
    freeze("fl-down", True)
    try:
        first = deploy(hosts_file)
    finally:
        freeze("fl-down", False)
    assert first.returncode == 1, first.output[-4000:]
    found = rows()
    assert {host: row["verdict"] for host, row in found.items()} == {
        "fl-ok": "deployed", "fl-down": "unreachable", "fl-locked": "failed", "fl-mirror": "failed"}
    assert found["fl-ok"]["changed"].startswith("repo ") and "toolkit" in found["fl-ok"]["changed"]
    assert "apt is still locked after 5 s; nothing was changed on this host" in found["fl-locked"]["reason"]
    assert "flock /var/lib/dpkg/lock-frontend" in found["fl-locked"]["reason"]
    assert "Refresh apt lists" in found["fl-mirror"]["reason"]
    assert f"the CUDA repository http://{MIRROR_ADDR}:{mirror.port}/" in found["fl-mirror"]["reason"]
    assert found["fl-down"]["reason"], "the summary names why the host is unreachable"
    assert "== fleet summary: deploy.py, 4 host(s)" in first.stderr
    assert f"fl-down: unreachable: {found['fl-down']['reason']}" in first.stderr
    assert absent(fleet["fl-locked"]) and absent(fleet["fl-down"])
    assert run_ssh(fleet["fl-ok"], "/usr/local/cuda-13.0/bin/nvcc --version").stdout.count("release 13.0,") == 1

    # The faults go away: the lock's holder ends, the mirror answers, the host is back.
    run_ssh(fleet["fl-locked"], "pkill -f '[f]lock /var/lib/dpkg/lock-frontend' || true")
    mirror.again()
    try:
        second = deploy(hosts_file)
        assert second.returncode == 0, second.output[-6000:]
        assert set(row["verdict"] for row in rows().values()) == {"deployed"}
        third = deploy(hosts_file)
    finally:
        mirror.stop()
    assert third.returncode == 0, third.output[-4000:]
    assert {host: row["changed"] for host, row in rows().items()} == dict.fromkeys(fleet, "nothing")


def test_refused_connection_is_named_and_fail_percent_stops_the_run(fleet, tmp_path):
    """A host whose SSH refuses (nothing listens) beside a healthy one: validate names the
    refusal; with --fail-percent 0 pyinfra stops the run at once and the summary says so."""
    hosts_file = write_hosts(tmp_path / "hosts.yml", {})
    document = yaml.safe_load(hosts_file.read_text())
    document["hosts"] = {"fl-ok": document["hosts"]["fl-ok"],
                         "fl-gone": {**document["hosts"]["fl-ok"], "ssh_hostname": node_addr("127.0.0.78")}}
    hosts_file.write_text(yaml.safe_dump(document))
    with fleet_env(hosts_file):
        carried_on = pyinfra_cli("inventory/gpu.py", "validate.py", data=STEPS)
        carried_on.rows = rows()
        stopped = pyinfra_cli("inventory/gpu.py", "--fail-percent", "0", "validate.py", data=STEPS)
    assert carried_on.returncode == 1
    # paramiko's words for a refused connection
    assert f"fl-gone: unreachable: Could not connect ([Errno None] Unable to connect to port 22 on " \
           f"{node_addr('127.0.0.78')})" in carried_on.stderr
    assert carried_on.rows["fl-gone"]["verdict"] == "unreachable"
    assert carried_on.rows["fl-ok"]["verdict"] == "needs deploy", "fl-ok went on: planned and reported"
    assert stopped.returncode == 1
    assert "Over 0% of hosts failed" in stopped.output
    assert {host: row["verdict"] for host, row in rows().items()} == {"fl-ok": "not examined",
                                                                       "fl-gone": "unreachable"}
    assert json.loads(SUMMARY.read_text())["stopped"].startswith("pyinfra stopped the run while connecting")
