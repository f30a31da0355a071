"""Where a sandbox node lives on the network: ``loopback`` (the default) or ``bridge``.

A **loopback** node shares this machine's network namespace and listens on its own
127.0.0.0/8 address (all of it is loopback on Linux; nothing is added to any interface):
every other node's address is "local" to it, and a firewall rule in it would be this
machine's.

A **bridged** node (``python -m sandbox up NAME --addr 198.18.0.N --network bridge``) has a
network namespace of its own, a named one (``ip netns``: ``gbsbx-NAME-TAG``, TAG a short
hash of the node's directory, as its cgroup's), made before the node boots and kept across
its reboots, removed by ``down``. In it: ``lo``, and ``eth0`` with the node's address in
198.18.0.0/24 (RFC 2544's benchmark range, no real network's) and its default route through
198.18.0.1; ``eth0`` is the node's end of a veth pair whose other end (``gbsbxv`` and a
short hash: an interface name has at most 15 characters) is a port of this machine's bridge
``gbsbx0``, which holds 198.18.0.1/24. The bridge is made on first use and stays (its
address is where the sandbox's mirrors listen for bridged nodes); ``destroy`` removes it
once no node is on it. So ``ip route get`` of another node's address names ``eth0`` inside
a bridged node, and nftables in its namespace close a port of that node alone. No traffic
is forwarded beyond the bridge (no NAT): a bridged node reaches the other bridged nodes and
this machine's 198.18.0.1, where the apt repository and the wheel mirror also listen
(sandbox.httpserve; sandbox.registration gives a bridged node their URLs on it).

The decisions are pure (address_problem, netns_name, veth_name, via_bridge); the ``ip``
calls that make and remove the namespace, the veth pair and the bridge are below them.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import subprocess
import urllib.parse
from pathlib import Path

LOOPBACK = "loopback"
BRIDGE = "bridge"
MODES = (LOOPBACK, BRIDGE)

BRIDGE_NAME = "gbsbx0"
BRIDGE_NET = ipaddress.IPv4Network("198.18.0.0/24")
GATEWAY = "198.18.0.1"
NETNS_PREFIX = "gbsbx-"
VETH_PREFIX = "gbsbxv"
NODE_IF = "eth0"
# Linux's interface names: IFNAMSIZ (16) less the terminating NUL.
IFNAME_MAX = 15
NETNS_DIR = Path("/run/netns")
# The fields of a mirror server's state that are URLs on its listening address.
URL_FIELDS = ("url", "repo_url", "key_url")


class NetworkError(RuntimeError):
    """An ``ip`` command failed; the message names it and its output."""


# --------------------------------------------------------------------------
# decisions


def address_problem(addr: str, mode: str = LOOPBACK) -> str | None:
    """Why ``addr`` cannot be a node's address in network ``mode``, or None when it can:
    a loopback node needs 127.0.0.0/8, a bridged one a host of 198.18.0.0/24 other than the
    bridge's own 198.18.0.1 (2-254).

    >>> address_problem("127.0.0.11") is None, address_problem("198.18.0.5", "bridge") is None
    (True, True)
    >>> address_problem("10.0.0.1")
    'address 10.0.0.1 is not in 127.0.0.0/8 (nodes live on loopback only; --network bridge: 198.18.0.2-254)'
    >>> address_problem("198.18.0.1", "bridge")
    'address 198.18.0.1 is the bridge gbsbx0 itself: a bridged node takes one of 198.18.0.2-254'
    """
    if mode not in MODES:
        return f"unknown network {mode!r}; known: {', '.join(MODES)}"
    try:
        ip = ipaddress.IPv4Address(addr)
    except ValueError:
        want = "127.0.0.0/8" if mode == LOOPBACK else "198.18.0.2-254"
        return f"bad address {addr!r}: need an IPv4 address in {want}"
    if mode == LOOPBACK:
        if not ip.is_loopback:
            return f"address {addr} is not in 127.0.0.0/8 (nodes live on loopback only; --network bridge: 198.18.0.2-254)"
        return None
    if ip not in BRIDGE_NET:
        return f"address {addr} is not in {BRIDGE_NET} (a bridged node takes one of 198.18.0.2-254)"
    if str(ip) == GATEWAY:
        return f"address {addr} is the bridge {BRIDGE_NAME} itself: a bridged node takes one of 198.18.0.2-254"
    if ip in (BRIDGE_NET.network_address, BRIDGE_NET.broadcast_address):
        return f"address {addr} is {BRIDGE_NET}'s network or broadcast address: a bridged node takes one of 198.18.0.2-254"
    return None


def short_hash(key: str) -> str:
    """Eight hex digits of ``key``'s SHA-256: the tag of a node's namespace and interface.

    >>> short_hash("/co/.sandbox/nodes/gpu1")
    'e448ddc2'
    """
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def netns_name(name: str, key: str) -> str:
    """The named network namespace of bridged node ``name`` (``ip netns list`` shows it),
    tagged with ``key`` (the node's directory): the names are this machine's, the same node
    name in two state directories must not share one.

    >>> netns_name("gpu1", "/co/.sandbox/nodes/gpu1")
    'gbsbx-gpu1-e448ddc2'
    """
    return f"{NETNS_PREFIX}{name}-{short_hash(key)}"


def veth_name(key: str) -> str:
    """The host's end of a bridged node's veth pair: ``gbsbxv`` and a short hash of ``key``
    (the node's directory, which names the node), never over Linux's 15 characters whatever
    the node's name.

    >>> veth_name("/co/.sandbox/nodes/gpu1"), len(veth_name("/co/.sandbox/nodes/" + "x" * 31))
    ('gbsbxve448ddc2', 14)
    """
    return f"{VETH_PREFIX}{short_hash(key)}"


def bridge_url(url: str, host: str = GATEWAY) -> str:
    """``url`` with its host replaced by ``host`` (port, path and the rest kept).

    >>> bridge_url("http://127.0.0.1:8914/")
    'http://198.18.0.1:8914/'
    >>> bridge_url("http://127.0.0.1:8913/compute/cuda/repos/debian12/x86_64/3bf863cc.pub")
    'http://198.18.0.1:8913/compute/cuda/repos/debian12/x86_64/3bf863cc.pub'
    """
    parts = urllib.parse.urlsplit(url)
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def via_bridge(info: dict | None) -> dict | None:
    """A mirror server's state (sandbox.httpserve) as a bridged node reaches it: its URLs on
    the bridge address it also listens on (``bridge``), or None when it names none (not
    served, or started by a sandbox without bridged nodes).

    >>> via_bridge({"url": "http://127.0.0.1:8914/", "port": 8914, "bridge": "198.18.0.1"})["url"]
    'http://198.18.0.1:8914/'
    >>> via_bridge({"url": "http://127.0.0.1:8914/", "port": 8914}) is None, via_bridge(None) is None
    (True, True)
    """
    if not info or not info.get("bridge"):
        return None
    return {key: bridge_url(value, info["bridge"]) if key in URL_FIELDS and value else value
            for key, value in info.items()}


# --------------------------------------------------------------------------
# this machine's interfaces and namespaces


def _ip(*args: str) -> str:
    """Run ``ip ARGS``; its stdout, NetworkError with its output on failure."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def link_exists(ifname: str) -> bool:
    """Whether this machine's network namespace has interface ``ifname``."""
    return Path("/sys/class/net", ifname).exists()


def netns_exists(netns: str) -> bool:
    """Whether the named network namespace ``netns`` exists."""
    return (NETNS_DIR / netns).exists()


def netns_path(netns: str) -> str:
    """The file that holds the named namespace (``nsenter --net=``'s argument)."""
    return str(NETNS_DIR / netns)


def ensure_bridge() -> None:
    """Make the bridge with 198.18.0.1/24 and bring it up, unless it is there (idempotent:
    two nodes starting at once both find it made)."""
    if not link_exists(BRIDGE_NAME):
        try:
            _ip("link", "add", BRIDGE_NAME, "type", "bridge")
        except NetworkError:
            if not link_exists(BRIDGE_NAME):  # made by another start meanwhile, or a real failure
                raise
    addrs = json.loads(_ip("-j", "-4", "addr", "show", "dev", BRIDGE_NAME) or "[]")
    have = {info.get("local") for link in addrs for info in link.get("addr_info", [])}
    if GATEWAY not in have:
        try:
            _ip("addr", "add", f"{GATEWAY}/{BRIDGE_NET.prefixlen}", "dev", BRIDGE_NAME)
        except NetworkError as error:
            if "File exists" not in str(error):
                raise
    _ip("link", "set", BRIDGE_NAME, "up")


def bridge_ports() -> list[str]:
    """The interfaces attached to the bridge ([] when there is no bridge)."""
    brif = Path("/sys/class/net", BRIDGE_NAME, "brif")
    return sorted(p.name for p in brif.iterdir()) if brif.is_dir() else []


def remove_bridge_if_unused() -> bool:
    """Remove the bridge when no interface is attached to it; whether it was removed."""
    if not link_exists(BRIDGE_NAME) or bridge_ports():
        return False
    _ip("link", "del", BRIDGE_NAME)
    return True


def create(netns: str, veth: str, addr: str) -> None:
    """A bridged node's namespace: ``netns`` with ``lo`` up and ``eth0`` at ``addr``/24, its
    default route through the bridge; the veth pair's other end ``veth`` on the bridge."""
    _ip("netns", "add", netns)
    _ip("link", "add", veth, "type", "veth", "peer", "name", NODE_IF, "netns", netns)
    _ip("link", "set", veth, "master", BRIDGE_NAME, "up")
    _ip("-n", netns, "link", "set", "lo", "up")
    _ip("-n", netns, "addr", "add", f"{addr}/{BRIDGE_NET.prefixlen}", "dev", NODE_IF)
    _ip("-n", netns, "link", "set", NODE_IF, "up")
    _ip("-n", netns, "route", "add", "default", "via", GATEWAY, "dev", NODE_IF)


def remove(netns: str, veth: str) -> None:
    """Remove a bridged node's veth pair and namespace (what is there of them; the node's
    processes are gone, so nothing holds the namespace any more)."""
    if link_exists(veth):
        _ip("link", "del", veth)
    if netns_exists(netns):
        _ip("netns", "del", netns)


def node_namespaces() -> list[str]:
    """The bridged nodes' namespaces on this machine (of every state directory)."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(entry for entry in os.listdir(NETNS_DIR) if entry.startswith(NETNS_PREFIX))


def address_holder(addr: str, exclude: str = "") -> str | None:
    """The namespace of another bridged node (any state directory's) whose ``eth0`` has
    ``addr``, or None: two nodes on one bridge must not share an address."""
    for netns in node_namespaces():
        if netns == exclude:
            continue
        proc = subprocess.run(["ip", "-n", netns, "-j", "-4", "addr", "show", "dev", NODE_IF],
                              capture_output=True, text=True)
        try:
            links = json.loads(proc.stdout or "[]")
        except ValueError:
            continue
        if any(info.get("local") == addr for link in links for info in link.get("addr_info", [])):
            return netns
    return None
