"""Operations for the SGLang venv and the FlashInfer JIT pre-warm."""

import hashlib
import posixpath
import shlex
from pathlib import Path

from pyinfra import host
from pyinfra.api import operation
from pyinfra.operations import files

from bringup.prewarm import prewarm_gap
from bringup.versions import parse
from facts.node import JitCache
from facts.venv import VenvLink

LIBEXEC = "/usr/local/libexec/gpu-bringup"


def lock_digest(lock):
    """First 16 hex of the lock's sha256: names the venv built from it."""
    return hashlib.sha256(Path(lock).read_bytes()).hexdigest()[:16]


def index_options(index_url, extra_index_urls, find_links, no_index):
    """pip/uv options for the configured package sources.

    >>> index_options("", (), ("http://127.0.0.1:8914/",), True)
    ['--find-links', 'http://127.0.0.1:8914/', '--no-index']
    """
    options = ["--index-url", index_url] if index_url else []
    for url in extra_index_urls:
        options += ["--extra-index-url", url]
    for url in find_links:
        options += ["--find-links", url]
    return options + (["--no-index"] if no_index else [])


@operation()
def venv_from_lock(lock, uv_lock, path, owner, installer="uv", sources=()):
    """
    Build the venv from a lock beside the live one and switch it in atomically.

    + lock: the lock (pins with hashes) on the control machine
    + uv_lock: the lock uv is bootstrapped from
    + path: the live venv path (a symlink to ``venvs/<digest>``)
    + owner: user owning the venv
    + installer: ``uv`` or ``pip``
    + sources: index options (``index_options``)

    **Example**:

    .. code:: python

        venv_from_lock(lock="files/locks/sglang-0.5.23-cp311-x86_64.txt",
                       uv_lock="files/locks/uv-cp311-x86_64.txt", path="/opt/sglang/venv", owner="sglang")
    """
    digest = lock_digest(lock)
    link = host.get_fact(VenvLink, path=path)
    if link["target"] == f"venvs/{digest}" and link["complete"] == digest:
        host.noop(f"{path} is the venv of lock {digest}")
        return
    root = posixpath.dirname(path)
    node_lock, node_uv_lock = f"{root}/locks/{digest}.txt", f"{root}/locks/uv-{lock_digest(uv_lock)}.txt"
    yield from files.directory._inner(path=f"{root}/locks", user="root", group="root", mode="0755")
    yield from files.put._inner(src=lock, dest=node_lock, user="root", group="root", mode="0644")
    yield from files.put._inner(src=uv_lock, dest=node_uv_lock, user="root", group="root", mode="0644")
    arguments = [node_lock, digest, path, owner, installer, node_uv_lock, *sources]
    yield " ".join(shlex.quote(str(argument)) for argument in [f"{LIBEXEC}/build-venv.sh", *arguments])


@operation()
def jit_prewarm(probe_args, request, flashinfer, arch_list, user, home, env_file, venv, manifest):
    """
    Compile FlashInfer's JIT modules as the service user with the service's
    environment, unless the cache already holds them (manifest matches and ninja
    has no work).

    + probe_args: ``venv``, ``env_file``, ``cache_dir`` for the JitCache fact
    + request: ``bringup.prewarm.prewarm_request(config)``
    + flashinfer: the FlashInfer release that serves
    + arch_list: the plan's FLASHINFER_CUDA_ARCH_LIST
    + user, home: the service user and its home
    + env_file: the service's environment file
    + venv: the live venv path
    + manifest: where files/prewarm.py records what it built

    **Example**:

    .. code:: python

        jit_prewarm(probe_args={...}, request={"modules": ["norm"], "head_dims": [128], "dtypes": ["bf16"]},
                    flashinfer="0.7.2", arch_list="12.0f", user="sglang", home="/var/lib/sglang",
                    env_file="/etc/sglang/sglang.env", venv="/opt/sglang/venv",
                    manifest="/var/cache/sglang/prewarm/manifest.json")
    """
    state = host.get_fact(JitCache, **probe_args)
    gap = prewarm_gap(state.get("prewarm") if state else None, request, parse(flashinfer), arch_list)
    if not gap:
        host.noop(f"JIT cache holds {', '.join(request['modules'])} for {arch_list}")
        return
    service = ["runuser", "-u", user, "--", "env", f"HOME={home}", f"{LIBEXEC}/with-service-env", env_file]
    prewarm = [
        f"{venv}/bin/python", f"{LIBEXEC}/prewarm.py",
        "--modules", ",".join(request["modules"]),
        "--head-dims", ",".join(str(head_dim) for head_dim in request["head_dims"]),
        "--dtypes", ",".join(request["dtypes"]),
        "--manifest", manifest,
    ]
    # Every core compiles: MAX_JOBS is left unquoted so the node computes it.
    yield f"{shlex.join(service)} env MAX_JOBS=$(nproc) {shlex.join(prewarm)}"
