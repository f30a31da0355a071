"""Serve .sandbox/aptrepo/ over HTTP on the loopback, in the background
(sandbox.httpserve), and on the bridge's 198.18.0.1 for bridged nodes once it exists
(``bridge``: sandbox.network.via_bridge gives their URLs). server.json is the server's
state and lease, plus what a node needs to use the repository: ``url`` (the repos base,
like NVIDIA's ``.../compute/cuda/repos/``), ``repo_url``, ``key_url`` and ``fingerprint``.
"""

from __future__ import annotations

from sandbox.aptrepo.build import DEFAULT_HOST, FINGERPRINT_FILE, REPO_REL, SANDBOX, SERVE_ROOT, SERVER_JSON, pubkey_name
from sandbox.httpserve import StaticServer

SERVER = StaticServer(SERVE_ROOT, SERVER_JSON, SANDBOX / "aptrepo-server.log")


def running() -> dict | None:
    """server.json's content if that server is up, else None (a stale file is removed)."""
    return SERVER.running()


def refresh_key(info: dict) -> dict:
    """Point server.json at the repository and the current key (after a build made or changed it)."""
    base = f"http://{info['host']}:{info['port']}"
    fpr = FINGERPRINT_FILE.read_text().strip() if FINGERPRINT_FILE.is_file() else ""
    fields = {
        "url": f"{base}/compute/cuda/repos/",
        "repo_url": f"{base}/{REPO_REL}/",
        "key_url": f"{base}/{REPO_REL}/{pubkey_name(fpr)}" if fpr else "",
        "fingerprint": fpr,
    }
    if any(info.get(key) != value for key, value in fields.items()):
        info = SERVER.update(**fields)
    return info


def start(host: str = DEFAULT_HOST, port: int = 0, any_port_if_busy: bool = False) -> dict:
    """Start the server (caller holds the repo lock and checked running())."""
    return refresh_key(SERVER.start(host, port, any_port_if_busy))


def stop(pid: int | None = None) -> dict | None:
    """Stop the server server.json names (only if it is ``pid``, when given)."""
    return SERVER.stop(pid)
