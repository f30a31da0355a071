"""Bridged sandbox nodes (``up --network bridge``, sandbox/network.py): two light nodes, each
in a network namespace of its own on the bridge, distinct on the network as a serving
group's members are. Inside one, the route to the other names ``eth0`` (not ``local``, as
every 127.x address is to a loopback node); it reaches the other's sshd by address; a
firewall rule inside one node (nftables in its namespace) drops a port of that node alone
and is taken out again; a reboot keeps address and namespace; ``down`` removes namespace
and veth pair; the mirrors their registration names answer them on the bridge. No deploy.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
import yaml

from sandbox import network, node, registration
from tests.sandbox_fixtures import (
    OPERATOR_LOCK,
    REPO_ROOT,
    close_port,
    open_port,
    registered_serving_nodes,
    require_sandbox_host,
    run_ssh,
)

pytestmark = pytest.mark.sandbox

A, B = "net-a", "net-b"
ADDRS = {A: "198.18.0.11", B: "198.18.0.12"}
# A serving group's rendezvous port (torch.distributed's default).
PORT = 29500
# A listener that answers every connection with one line, bounded by `timeout`.
LISTENER = ("import socket\n"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            f"s.bind(('0.0.0.0', {PORT})); s.listen()\n"
            "while True:\n"
            "    c, _ = s.accept(); c.sendall(b'rendezvous\\n'); c.close()\n")
# A connect that waits this long before it counts as dropped (a refusal is at once).
CONNECT_S = 3


@pytest.fixture(scope="module")
def pair(sandbox_node):
    """Two bridged light serving nodes (no GPU, iproute2 for ``ip``) in one registered host list."""
    require_sandbox_host(tools=("ip", "nsenter", "nft", "ssh", "ssh-keygen"))
    with registered_serving_nodes(sandbox_node, ADDRS, network="bridge", gpu="none",
                                  states=("iproute2",)) as (entries, registered):
        yield entries, registered


def connect(entry: dict, addr: str) -> subprocess.CompletedProcess:
    """From ``entry``, bash's /dev/tcp to addr:PORT and the first line back: rc 0 connected,
    124 nothing answered within CONNECT_S (dropped), 1 refused."""
    return run_ssh(entry, f"timeout {CONNECT_S} bash -c 'exec 3<>/dev/tcp/{addr}/{PORT} && head -n 1 <&3'",
                   check=False, timeout=60)


def start_listener(entry: dict) -> int:
    """The listener on ``entry`` at PORT, in the background (ssh returns), once it accepts; its pid."""
    pid = run_ssh(entry, f"nohup timeout 300 python3 -c {shlex.quote(LISTENER)} </dev/null >/dev/null 2>&1 & "
                         "echo $!").stdout.strip()
    run_ssh(entry, f"for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{PORT}) 2>/dev/null && exit 0; "
                   "sleep 0.1; done; exit 1")
    return int(pid)


def netns_list() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout


def test_the_route_to_another_bridged_node_names_eth0(pair):
    entries, _ = pair
    a, b = entries[A], entries[B]
    assert a["network"] == b["network"] == "bridge" and a["ssh_port"] == 22
    assert a["netns"] == node.node_netns(A) and a["netns"] in netns_list()
    route = json.loads(run_ssh(a, f"ip -j route get {ADDRS[B]}").stdout)[0]
    assert route["dev"] == "eth0" and route.get("type", "unicast") != "local", route
    assert route["prefsrc"] == ADDRS[A], route
    # The node's own address is local to it alone; this machine reaches both over the bridge.
    assert json.loads(run_ssh(a, f"ip -j route get {ADDRS[A]}").stdout)[0].get("type") == "local"
    host = json.loads(subprocess.run(["ip", "-j", "route", "get", ADDRS[B]], capture_output=True, text=True,
                                     check=True).stdout)[0]
    assert host["dev"] == network.BRIDGE_NAME, host
    # The node's /etc/hosts names it by its address.
    assert f"{ADDRS[A]}\t{A}" in run_ssh(a, "cat /etc/hosts").stdout


def test_a_node_reaches_the_others_sshd_by_address(pair):
    entries, _ = pair
    out = run_ssh(entries[A], f"timeout 5 bash -c 'exec 3<>/dev/tcp/{ADDRS[B]}/22 && head -c 8 <&3'").stdout
    assert out.startswith("SSH-2.0-"), out


def test_a_closed_port_drops_on_that_node_only_and_opens_again(pair):
    entries, _ = pair
    a, b = entries[A], entries[B]
    pids = {A: start_listener(a), B: start_listener(b)}
    try:
        assert connect(a, ADDRS[B]).stdout.strip() == "rendezvous"
        close_port(b, PORT)
        try:
            dropped = connect(a, ADDRS[B])
            assert dropped.returncode == 124 and not dropped.stdout, (dropped.returncode, dropped.stdout, dropped.stderr)
            # The rule is B's alone: A's port answers B, and B's own connections over lo pass.
            assert connect(b, ADDRS[A]).stdout.strip() == "rendezvous"
            assert connect(b, "127.0.0.1").stdout.strip() == "rendezvous"
        finally:
            open_port(b, PORT)
        assert connect(a, ADDRS[B]).stdout.strip() == "rendezvous"
        open_port(b, PORT)  # nothing there: nothing to do
    finally:
        for name, pid in pids.items():
            run_ssh(entries[name], f"kill {pid}", check=False)


def test_a_bridged_node_fetches_from_the_mirrors_its_registration_names(pair):
    entries, registered = pair
    a = entries[A]
    # The host list the sandbox registers: loopback URLs under all:, the bridge's for the node.
    published = yaml.safe_load(registration.registered_file().read_text())
    mine = published["hosts"][A]
    wheels, key = mine["venv_find_links"][0], mine["cuda_repo_key_url"]
    assert urllib.parse.urlsplit(wheels).hostname == urllib.parse.urlsplit(key).hostname == network.GATEWAY
    assert urllib.parse.urlsplit(published["all"]["venv_find_links"][0]).hostname == "127.0.0.1"
    assert registered["hosts"][A]["venv_find_links"] == [wheels]

    def fetch(url):
        return run_ssh(a, f"python3 -c 'import sys, urllib.request; "
                          f"sys.stdout.write(urllib.request.urlopen(\"{url}\", timeout=10).read().decode())'",
                       check=False, timeout=60)
    assert ".whl" in fetch(wheels).stdout
    assert "BEGIN PGP PUBLIC KEY BLOCK" in fetch(key).stdout
    # The loopback URL is the node's own loopback: nothing of this machine's answers there.
    assert fetch(published["all"]["venv_find_links"][0]).returncode != 0
    # pip takes a wheel from it as a venv build does: plain HTTP beyond loopback, trusted by
    # the site's /etc/pip.conf the node has (pip would ignore the page otherwise).
    pin = next(line.split()[0] for line in (REPO_ROOT / OPERATOR_LOCK).read_text().splitlines()
               if line[:1].isalnum())
    got = run_ssh(a, f"python3 -m pip download -q --disable-pip-version-check --no-deps --no-index -d /tmp/wheels "
                     f"--find-links {wheels} {pin} && ls /tmp/wheels", check=False, timeout=120)
    assert got.returncode == 0 and ".whl" in got.stdout, got.stdout + got.stderr


def test_an_address_held_by_another_state_directorys_node_is_refused(pair, tmp_path):
    env = dict(os.environ, SANDBOX_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.run([sys.executable, "-m", "sandbox", "up", "net-c", "--addr", ADDRS[B], "--gpu", "none",
                           "--network", "bridge"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert f"address {ADDRS[B]} is already used by the bridged node of network namespace {pair[0][B]['netns']}" \
        in proc.stderr
    assert "gbsbx-net-c-" not in netns_list()


def test_a_reboot_keeps_address_and_namespace(pair):
    entries, _ = pair
    b = entries[B]
    inode = os.stat(network.netns_path(b["netns"])).st_ino
    state = node.reboot(B)
    assert os.readlink(f"/proc/{state['init_pid']}/ns/net") == f"net:[{inode}]"
    addrs = json.loads(run_ssh(b, "ip -j -4 addr show dev eth0").stdout)
    assert [info["local"] for info in addrs[0]["addr_info"]] == [ADDRS[B]]
    assert float(run_ssh(b, "cut -d' ' -f1 /proc/uptime").stdout) < 60  # it did boot again
    out = run_ssh(entries[A], f"timeout 5 bash -c 'exec 3<>/dev/tcp/{ADDRS[B]}/22 && head -c 8 <&3'").stdout
    assert out.startswith("SSH-2.0-"), out


def test_down_removes_namespace_and_veth(pair):
    entries, _ = pair
    veths = [node.node_veth(name) for name in ADDRS]
    assert all(Path("/sys/class/net", veth).exists() for veth in veths)
    node.down(list(ADDRS))
    listed = netns_list()
    assert not any(entries[name]["netns"] in listed for name in ADDRS), listed
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout
    assert not any(veth in links for veth in veths), links
    assert not set(ADDRS) & set(node.read_registry())
