"""Bridged sandbox nodes' decisions (sandbox/network.py): which address a node of each
network may take, the names of its namespace and host interface, the mirrors' URLs a
bridged node gets in the registered host list (a loopback node's exactly as before), the
port a bridged node's sshd takes without binding anything here, the CLI's ``--network``,
the firewall script of close_port/open_port, and a mirror server that also listens on a
bridge address (real processes on loopback; no node booted)."""

import re
import urllib.parse

import pytest

from sandbox import __main__ as sandbox_cli
from sandbox import network, node, registration
from sandbox.httpserve import StaticServer, answers
from tests.sandbox_fixtures import firewall_script

BRIDGE, LOOPBACK = network.BRIDGE, network.LOOPBACK


@pytest.mark.parametrize("addr,mode,problem", [
    ("127.0.0.11", LOOPBACK, None),
    ("127.5.4.3", LOOPBACK, None),
    ("10.0.0.1", LOOPBACK, "not in 127.0.0.0/8"),
    ("198.18.0.11", LOOPBACK, "not in 127.0.0.0/8"),
    ("localhost", LOOPBACK, "need an IPv4 address in 127.0.0.0/8"),
    ("198.18.0.2", BRIDGE, None),
    ("198.18.0.11", BRIDGE, None),
    ("198.18.0.254", BRIDGE, None),
    ("198.18.0.1", BRIDGE, "is the bridge gbsbx0 itself"),
    ("198.18.0.0", BRIDGE, "network or broadcast address"),
    ("198.18.0.255", BRIDGE, "network or broadcast address"),
    ("198.18.1.5", BRIDGE, "not in 198.18.0.0/24"),
    ("127.0.0.11", BRIDGE, "not in 198.18.0.0/24"),
    ("198.18.0.11\n", BRIDGE, "need an IPv4 address in 198.18.0.2-254"),
    ("::1", BRIDGE, "need an IPv4 address"),
    ("127.0.0.11", "host", "unknown network 'host'"),
])
def test_which_address_a_node_may_take(addr, mode, problem):
    found = network.address_problem(addr, mode)
    assert found is None if problem is None else problem in found, found


@pytest.mark.parametrize("addr,mode", [("10.0.0.1", LOOPBACK), ("198.18.0.1", BRIDGE), ("127.0.0.12", BRIDGE)])
def test_up_refuses_a_bad_address_before_anything_starts(addr, mode):
    with pytest.raises(node.SandboxError, match=re.escape(network.address_problem(addr, mode))):
        node._validate("n1", addr, "none", "none", "debian12", [], "x86_64", mode)


@pytest.mark.parametrize("name", ["a", "gpu1", "net-a", "x" * 31, "0-very-long-node-name-of-31-chr"])
def test_the_host_interface_fits_linuxs_15_characters_whatever_the_name(name):
    key = f"/work/checkout/.sandbox/nodes/{name}"
    veth = network.veth_name(key)
    assert len(veth) <= network.IFNAME_MAX and re.fullmatch(r"gbsbxv[0-9a-f]{8}", veth)
    assert veth == network.veth_name(key) and veth != network.BRIDGE_NAME
    assert network.netns_name(name, key) == f"gbsbx-{name}-{veth[len('gbsbxv'):]}"


def test_the_same_node_name_in_two_state_directories_gets_its_own_namespace_and_interface(monkeypatch, tmp_path):
    names = set()
    for state in ("one", "two"):
        monkeypatch.setenv("SANDBOX_STATE_DIR", str(tmp_path / state))
        names.add((node.node_netns("gpu1"), node.node_veth("gpu1")))
    assert len(names) == 2 and len({netns for netns, _ in names}) == 2


@pytest.mark.parametrize("url,expected", [
    ("http://127.0.0.1:8914/", "http://198.18.0.1:8914/"),
    ("http://127.0.0.1:8913/compute/cuda/repos/", "http://198.18.0.1:8913/compute/cuda/repos/"),
    ("http://127.0.0.1/x?y=1", "http://198.18.0.1/x?y=1"),
])
def test_a_url_on_the_bridge(url, expected):
    assert network.bridge_url(url) == expected


REPO = {"url": "http://127.0.0.1:8913/compute/cuda/repos/", "repo_url": "http://127.0.0.1:8913/r/",
        "key_url": "http://127.0.0.1:8913/r/3bf863cc.pub", "fingerprint": "F" * 40, "port": 8913,
        "bridge": "198.18.0.1"}
PYPI = {"url": "http://127.0.0.1:8914/", "port": 8914, "bridge": "198.18.0.1"}
LOOP_NODE = {"ssh_hostname": "127.0.0.11", "ssh_port": 22, "gpu_profile": "b200-x8"}
BRIDGED_NODE = {"ssh_hostname": "198.18.0.11", "ssh_port": 22, "gpu_profile": "none", "network": "bridge",
                "netns": "gbsbx-n2-0123abcd"}


def hosts_of(url):
    return urllib.parse.urlsplit(url).hostname


@pytest.mark.parametrize("repo,pypi,expected", [
    # Both mirrors on the bridge: every URL the bridged node gets is the bridge's.
    (REPO, PYPI, {"venv_find_links": ["198.18.0.1"], "cuda_repo_url": "198.18.0.1",
                  "cuda_repo_key_url": "198.18.0.1"}),
    # A server that names no bridge (an older one) gives the node nothing over all:'s.
    ({k: v for k, v in REPO.items() if k != "bridge"}, PYPI, {"venv_find_links": ["198.18.0.1"]}),
    (None, {k: v for k, v in PYPI.items() if k != "bridge"}, {}),
    (None, None, {}),
])
def test_a_bridged_node_gets_the_mirrors_on_the_bridge_and_a_loopback_node_what_it_had(repo, pypi, expected):
    alone = registration.inventory_document({"n1": LOOP_NODE}, repo, pypi)
    both = registration.inventory_document({"n1": LOOP_NODE, "n2": BRIDGED_NODE}, repo, pypi)
    assert both["all"] == alone["all"] and both["hosts"]["n1"] == alone["hosts"]["n1"]
    assert all(hosts_of(value if isinstance(value, str) else value[0]) == "127.0.0.1"
               for key, value in alone["all"].items() if key.endswith("_url") or key == "venv_find_links")
    mine = both["hosts"]["n2"]
    assert "network" not in mine and "netns" not in mine  # the sandbox's own, not pyinfra's
    urls = {key: [hosts_of(v) for v in value] if isinstance(value, list) else hosts_of(value)
            for key, value in mine.items() if key.endswith("_url") or key == "venv_find_links"}
    assert urls == expected
    if "cuda_repo_url" in expected:
        assert mine["cuda_repo_fingerprint"] == REPO["fingerprint"] and mine["cuda_repo_key_url"].endswith(".pub")


def test_a_bridged_nodes_ssh_port_is_22_and_nothing_is_bound_here(monkeypatch):
    def no_bind(addr, port):
        raise AssertionError(f"bound {addr}:{port} on this machine")
    monkeypatch.setattr(node, "_port_free", no_bind)
    assert node._choose_port("198.18.0.11", None, BRIDGE) == 22
    assert node._choose_port("198.18.0.11", 2200, BRIDGE) == 2200


@pytest.mark.parametrize("argv,expected", [
    ([], "loopback"),
    (["--network", "bridge"], "bridge"),
    (["--network", "loopback"], "loopback"),
])
def test_the_cli_takes_the_network(argv, expected):
    args = sandbox_cli._parser().parse_args(["up", "n1", "--addr", "198.18.0.11", "--gpu", "none", *argv])
    assert args.network == expected


def test_the_cli_refuses_an_unknown_network(capsys):
    with pytest.raises(SystemExit) as refused:
        sandbox_cli._parser().parse_args(["up", "n1", "--addr", "198.18.0.11", "--gpu", "none", "--network", "host"])
    assert refused.value.code == 2 and "invalid choice: 'host'" in capsys.readouterr().err


@pytest.mark.parametrize("port,closed,lines", [
    (29500, True, ["add table inet sandbox-closed-29500", "delete table inet sandbox-closed-29500",
                   "add table inet sandbox-closed-29500",
                   "add chain inet sandbox-closed-29500 input { type filter hook input priority 0; policy accept; }",
                   'add rule inet sandbox-closed-29500 input iifname != "lo" tcp dport 29500 drop']),
    (22, False, ["add table inet sandbox-closed-22", "delete table inet sandbox-closed-22"]),
])
def test_the_firewall_script_of_one_port(port, closed, lines):
    assert firewall_script(port, closed).splitlines() == lines


@pytest.mark.parametrize("bridge,listens", [
    ("127.0.0.2", True),        # an address this machine has (all of 127.0.0.0/8): at once
    ("198.51.100.7", False),    # TEST-NET-2, no address of this machine's: only loopback
])
def test_a_mirror_also_listens_on_the_bridge_when_this_machine_has_it(tmp_path, bridge, listens):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "x.whl").write_text("wheel")
    server = StaticServer(tmp_path / "root", tmp_path / "server.json", tmp_path / "server.log")
    state = server.start("127.0.0.1", 0, bridge=bridge)
    try:
        assert state["bridge"] == bridge and answers(state["url"] + "x.whl")
        if listens:
            assert answers(network.via_bridge(state)["url"] + "x.whl", timeout=5)
        # (nothing is sent to an address this machine does not have: its log says where it serves)
        assert ("also serving at http://" + bridge in (tmp_path / "server.log").read_text()) is listens
    finally:
        server.stop()
