"""Operations for the SGLang venv and the FlashInfer JIT pre-warm."""

import json
import shlex

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.util import get_file_sha256

from bringup.layout import NodeLayout, ProbeInputs
from bringup.plan import SYSTEM_PYTHON, DeepGemmPlan, PrewarmPlan, VenvPlan
from facts.files import ManagedFile
from facts.node import JitCache, VenvStack
from facts.venv import VenvLink
from tasks.operations.files import directory_if_missing, whole_file
from tasks.operations.progress import StreamedCommand


def as_plan(kind, value):
    """A plan part as its dataclass: from the CLI (``pyinfra HOST tasks.operations.sglang.OP
    venv='{...}'``) it arrives as a mapping.

    >>> as_plan(PrewarmPlan, {"request": {}, "flashinfer": "0.7.2", "arch_list": "12.0f", "venv": "/v",
    ...     "env_file": "/e", "cache_dir": "/c", "manifest": "/c/m", "user": "u", "home": "/h", "base_path": "/p",
    ...     "runner": "/r", "script": "/s"}).arch_list
    '12.0f'
    """
    return kind(**value) if isinstance(value, dict) else value


def as_service_user(user, home):
    """The words that run a command as the service user with its own HOME (root's
    environment otherwise leaks through runuser).

    >>> as_service_user("sglang", "/var/lib/sglang")
    ['runuser', '-u', 'sglang', '--', 'env', 'HOME=/var/lib/sglang']
    """
    return ["runuser", "-u", user, "--", "env", f"HOME={home}"]


def lock_digest(lock):
    """First 16 hex of the lock's sha256: names the venv built from it."""
    return get_file_sha256(lock)[:16]


@operation()
def venv_from_lock(venv: VenvPlan):
    """
    Build the venv from its lock beside the live one and switch it in atomically
    (files/build-venv.sh), unless the live venv is already the lock's.

    + venv: the plan's ``VenvPlan``

    **Example**:

    .. code:: python

        venv_from_lock(venv=node.venv)
    """
    venv = as_plan(VenvPlan, venv)
    digest = lock_digest(venv.lock)
    link = host.get_fact(VenvLink, path=venv.path)
    if link["target"] == f"venvs/{digest}" and link["complete"] == digest:
        host.noop(f"{venv.path} is the venv of lock {digest}")
        return
    node_lock, node_uv_lock = f"{venv.locks}/{digest}.txt", f"{venv.locks}/uv-{lock_digest(venv.uv_lock)}.txt"
    yield from directory_if_missing._inner(path=venv.locks)
    yield from whole_file._inner(src=venv.lock, dest=node_lock)
    yield from whole_file._inner(src=venv.uv_lock, dest=node_uv_lock)
    inputs = {"VENV_LINK": venv.path, "VENV_DIRS": venv.dirs, "VENV_DIGEST": digest, "VENV_LOCK": node_lock,
              "VENV_UV_LOCK": node_uv_lock, "VENV_TOOLS": venv.tools, "VENV_CACHE": venv.cache,
              "VENV_INSTALLER": venv.installer, "VENV_PYTHON": venv.python, "VENV_TORCH_INFO": venv.torch_info,
              "VENV_RELEASES": venv.releases}
    # The build dies with its SSH session (files/session-bound): a killed connection
    # never leaves one running beside the re-run's. The wrapper runs on the system's
    # python: the operator's CPython (venv.python) is run by root only after the build
    # script's root_may_run check (files/root-may-run.sh) has passed it.
    yield StreamedCommand(shlex.join(["env", *(f"{key}={value}" for key, value in inputs.items()), SYSTEM_PYTHON,
                                      "-I", venv.session_bound, venv.builder, *venv.sources]))


@operation()
def torch_arch_recorded(venv: VenvPlan, layout: NodeLayout):
    """
    Record torch's compiled arch list inside the managed venv (files/torch_info.py), so
    the node probe reads it instead of importing torch: for a venv built before such
    records existed (files/build-venv.sh writes one into every venv it builds).

    + venv: the plan's ``VenvPlan``
    + layout: the plan's ``NodeLayout`` (what the probe looks at)

    **Example**:

    .. code:: python

        torch_arch_recorded(venv=node.venv, layout=node.layout)
    """
    venv, layout = as_plan(VenvPlan, venv), as_plan(NodeLayout, layout)
    if venv.torch_recorded:
        host.noop(f"{venv.torch_record} recorded torch's arch list when the node was probed")
        return
    stack = host.get_fact(VenvStack, inputs=ProbeInputs(layout))
    torch = (stack or {}).get("torch")
    if not torch or torch.get("error"):
        host.noop(f"{venv.path} has no torch that imports: nothing to record")
        return
    if torch.get("arch_list_from") == "record":
        host.noop(f"{venv.torch_record} records torch's arch list")
        return
    # Root runs the venv's python only when root may (files/root-may-run.sh: it, its
    # links and everything its interpreter loads root's alone); else one line, nothing run.
    record, python = shlex.quote(venv.torch_record), shlex.quote(venv.path + '/bin/python')
    yield (f"sh {shlex.quote(venv.root_may_run)} {python} interpreter && "
           f"{python} -I {shlex.quote(venv.torch_info)} --emit-record > {record}.tmp && mv -f {record}.tmp {record}")


@operation()
def jit_prewarm(prewarm: PrewarmPlan, layout: NodeLayout):
    """
    Compile FlashInfer's JIT modules as the service user with the service's
    environment, unless the cache already holds them (manifest matches and ninja
    has no work: checked when this runs, after the venv step).

    + prewarm: the plan's ``PrewarmPlan``
    + layout: the plan's ``NodeLayout`` (what the probe looks at)

    **Example**:

    .. code:: python

        jit_prewarm(prewarm=node.prewarm, layout=node.layout)
    """
    prewarm, layout = as_plan(PrewarmPlan, prewarm), as_plan(NodeLayout, layout)
    state = host.get_fact(JitCache, inputs=ProbeInputs(layout))
    state = state or {}
    gap = prewarm.gap_for(state.get("prewarm"), state.get("toolchain"))
    if not gap:
        host.noop(f"JIT cache holds {', '.join(prewarm.request['modules'])} for {prewarm.arch_list}")
        return
    # with-service-env --as: root reads the env file (an operator's 0600 one too) and starts
    # runuser with a clean environment; the command runs as the service user.
    service = [prewarm.runner, "--as", prewarm.user, prewarm.home, prewarm.base_path, prewarm.env_file]
    command = [
        f"{prewarm.venv}/bin/python", prewarm.script,
        "--modules", ",".join(prewarm.request["modules"]),
        "--head-dims", ",".join(str(head_dim) for head_dim in prewarm.request["head_dims"]),
        "--dtypes", ",".join(prewarm.request["dtypes"]),
        "--manifest", prewarm.manifest,
        *(["--toolchain", state["toolchain"]] if state.get("toolchain") else []),
        *(["--no-device"] if prewarm.no_device else []),
    ]
    # Every core compiles: MAX_JOBS is left unquoted so the node computes it. No byte
    # code is written: the venv is never changed by the pre-warm (an external one).
    # It dies with its SSH session (files/session-bound): ninja removes what it was
    # writing and the manifest, written last, stays the old one. session-bound runs as
    # root, so by the system's python (stdlib only, -I): never the venv's, whose
    # site-packages .pth files -I still runs and which another user may own
    # (venv_managed: false). The venv's python runs only as the service user, after
    # runuser. Why it runs comes first in its output.
    bound = [SYSTEM_PYTHON, "-I", prewarm.session_bound]
    yield StreamedCommand(f"echo {shlex.quote(f'prewarm: {gap}')} && {shlex.join(bound + service)} env MAX_JOBS=$(nproc) "
                          f"PYTHONDONTWRITEBYTECODE=1 {shlex.join(command)}")


def recorded_request(manifest):
    """What a DeepGEMM manifest (the ManagedFile fact, with text) records, or None.

    >>> recorded_request({"kind": "file", "text": '{"model": "m"}'})
    {'model': 'm'}
    >>> recorded_request({"kind": "file", "text": "{"}) is None
    True
    """
    if manifest.get("kind") != "file":
        return None
    try:
        return json.loads(manifest.get("text") or "")
    except ValueError:
        return None


@operation()
def deep_gemm_compiled(deep_gemm: DeepGemmPlan):
    """
    Compile DeepGEMM's kernels for the service's model with SGLang's own tool
    (``python -m sglang.compile_deep_gemm``: the server loaded on the GPUs, one request),
    as the service user with the service's environment, so they land in
    SGLANG_DG_CACHE_DIR; then record the request in the manifest. Skipped when the
    manifest records this request. A running service is stopped for the compile (it
    needs the GPUs and the port) and started again after it, whether it succeeded or not.

    + deep_gemm: the plan's ``DeepGemmPlan``

    **Example**:

    .. code:: python

        deep_gemm_compiled(deep_gemm=node.deep_gemm)
    """
    deep_gemm = as_plan(DeepGemmPlan, deep_gemm)
    recorded = recorded_request(host.get_fact(ManagedFile, path=deep_gemm.manifest, text=True))
    if recorded == deep_gemm.request:
        host.noop(f"{deep_gemm.manifest} records DeepGEMM's kernels for {deep_gemm.request['model']}")
        return
    why = "no DeepGEMM manifest" if recorded is None else f"the manifest records {json.dumps(recorded)}"
    service = as_service_user(deep_gemm.user, deep_gemm.home)
    in_env = [deep_gemm.runner, "--as", deep_gemm.user, deep_gemm.home, deep_gemm.base_path, deep_gemm.env_file]
    unit = shlex.quote(deep_gemm.unit)
    # It dies with its SSH session (files/session-bound); the manifest, written last and
    # whole (renamed into place), stays the old one when it fails or times out, so a
    # re-run compiles again (SGLang: "feel free to restart the command until the
    # compilation is fully finished"). Run as root by the system's python, as the
    # pre-warm's (jit_prewarm): the venv's python (command[0]) only as the service user.
    bound = [SYSTEM_PYTHON, "-I", deep_gemm.session_bound]
    # In the unit's WorkingDirectory (the service's home): a relative model path, or a
    # hub name SGLang first stats as a local path, resolves as it does for the service.
    compile_command = (f"cd {shlex.quote(deep_gemm.home)} && {shlex.join(bound + in_env)} "
                       f"env PYTHONDONTWRITEBYTECODE=1 {shlex.join(deep_gemm.command)}")
    # A running service is stopped for the compile (its GPUs, its port) and started again
    # after it, failed or not: a failed compile fails the host before the service step,
    # and must not leave the service down.
    yield StreamedCommand(f"echo {shlex.quote(f'deep_gemm: {why}')}; was=$(systemctl is-active {unit} 2>/dev/null); "
                          f"if [ \"$was\" = active ]; then systemctl stop {unit}; fi; "
                          f"{compile_command}; status=$?; "
                          f"if [ \"$was\" = active ]; then systemctl start {unit}; fi; exit $status")
    record = 'mkdir -p "${1%/*}" && printf \'%s\\n\' "$2" > "$1.tmp" && mv -f "$1.tmp" "$1"'
    yield shlex.join([*service, "sh", "-c", record, "sh", deep_gemm.manifest,
                      json.dumps(deep_gemm.request, sort_keys=True)])
