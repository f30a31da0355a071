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


# The model a ``serving_hub`` serves: a config.json and a weights file, in the order
# huggingface_hub fetches a snapshot's files (the hub's tree, sorted by path).
SERVED_FILES = {"config.json": b'{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}\n',
                "model.safetensors": bytes(range(256)) * 1024}


def serving_hub_handler(model, revision=REVISION, files=None, chunk=4096, pause=0.0):
    """A request handler class answering what ``hf download MODEL`` asks (huggingface_hub
    1.33.0: ``/api/models/<id>/revision/main`` for the snapshot's commit, its tree
    ``/api/models/<id>/tree/<commit>``, then HEAD and GET of ``/<id>/resolve/<commit>/<file>``
    with X-Repo-Commit, ETag and Content-Length; no xet headers, so plain HTTP), every
    file's body sent ``chunk`` bytes at a time with ``pause`` s between (a slow weights
    download, to be killed midway). Run it with ``http.server.ThreadingHTTPServer``."""
    import hashlib
    import json
    import time

    files = dict(SERVED_FILES if files is None else files)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _json(self, data):
            body = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _file(self, name):
            body = files[name]
            self.send_response(200)
            self.send_header("X-Repo-Commit", revision)
            self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "HEAD":
                return
            try:
                for start in range(0, len(body), chunk):
                    self.wfile.write(body[start:start + chunk])
                    self.wfile.flush()
                    time.sleep(pause)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the fetch was killed midway: what the test wants

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path in (f"/api/models/{model}/revision/main", f"/api/models/{model}"):
                return self._json({"id": model, "modelId": model, "sha": revision,
                                   "siblings": [{"rfilename": name} for name in files]})
            if path.startswith(f"/api/models/{model}/tree/"):
                return self._json([{"type": "file", "path": name, "size": len(body),
                                    "oid": hashlib.sha1(body).hexdigest()} for name, body in sorted(files.items())])
            prefix = f"/{model}/resolve/"
            if path.startswith(prefix) and path[len(prefix):].split("/", 1)[-1] in files:
                return self._file(path[len(prefix):].split("/", 1)[-1])
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    return Handler


@contextlib.contextmanager
def serving_hub(model, **options):
    """An HF_ENDPOINT on loopback that ``hf download`` fetches ``model`` from
    (``serving_hub_handler``); yields it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), serving_hub_handler(model, **options))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
