"""Stand-ins of the Hugging Face hub for the model-source tests, on this machine's
loopback (huggingface.co is not reached by any test): a server that answers every
request with one status, a port where nothing listens, and a minimal, well-formed hub
cache entry (huggingface_hub's layout: ``models--<org>--<name>/refs/main`` naming
``snapshots/<revision>/``, whose files link to ``blobs/``)."""

import contextlib
import http.server
import os
import socket
import threading
from pathlib import Path

REVISION = "c1899de289a04d12100db370d81485cdf75e47ca"


@contextlib.contextmanager
def answering_hub(status=200):
    """An HF_ENDPOINT (``http://127.0.0.1:<port>``) answering ``status`` to everything;
    yields it and the paths asked for."""
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            asked.append(self.path)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def closed_endpoint():
    """An HF_ENDPOINT on a loopback port where nothing listens (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def plant_cache_entry(cache, model, mode=0o644, weights=True):
    """``model``'s entry in the hub cache ``cache``, as huggingface_hub writes one:
    the snapshot's config.json (and, with ``weights``, model.safetensors) a link into
    blobs/. Returns the entry."""
    entry = Path(cache) / f"models--{model.replace('/', '--')}"
    (entry / "refs").mkdir(parents=True, exist_ok=True)
    (entry / "refs" / "main").write_text(REVISION)
    blob = entry / "blobs" / "0f3a"
    blob.parent.mkdir(exist_ok=True)
    blob.write_text('{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}\n')
    blob.chmod(mode)
    snapshot = entry / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    link = snapshot / "config.json"
    if not link.is_symlink():
        os.symlink(os.path.relpath(blob, snapshot), link)
    if weights:
        blob = entry / "blobs" / "9a1c"
        blob.write_bytes(b"\0" * 64)
        blob.chmod(mode)
        link = snapshot / "model.safetensors"
        if not link.is_symlink():
            os.symlink(os.path.relpath(blob, snapshot), link)
    return entry
