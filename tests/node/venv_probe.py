"""The venv's python, run once per host as the service user with the service's
environment (remote.py ``run_in_service_env``): importing torch takes seconds, so one
run answers three groups of checks. Its parts, in this order:

- ``venv`` (test_venv.py): torch's build, and FlashInfer's ``get_cuda_path()``,
  ``get_cuda_version()`` and ``CompilationContext()`` with the service's
  ``FLASHINFER_CUDA_ARCH_LIST``;
- ``sglang`` (test_sglang.py): ``import sglang`` (its cache redirect runs at import,
  sglang/__init__.py:6-14), where each cache goes, then the unit's arguments parsed the
  way ``sglang serve`` does (sglang/cli/serve.py, srt/server_args.py
  prepare_server_args) and deploy's ``compile_deep_gemm`` arguments by that module's parser;
- ``detect`` (test_venv.py ``test_flashinfer_detects_gpu_arch``): FlashInfer's own
  arch detection with ``FLASHINFER_CUDA_ARCH_LIST`` unset, last: it pops the variable
  and, only on a node that declares ``gpu_standin`` where CUDA does not start, tells
  torch the capabilities nvidia-smi reports. ``CompilationContext()`` reads the variable
  per instance (flashinfer/compilation_context.py, 0.7.x), so a fresh one detects.

Each part starts from the environment the run was given (what one part's imports set
is not the next one's) and is isolated: a part that fails answers its error, the others
still answer. Each prints its answer (``@@PART`` and JSON on a line of its own) as soon
as it has it: a run that dies (no venv python, a crash) leaves the parts it did not
reach without one, and their checks fail with its exit status and output's tail.
"""

import json
import shlex
from dataclasses import dataclass, field

from bringup.caches import CACHE_DIRS
from tests.node.expected import exec_argv, parse_unit
from tests.node.remote import read_text, run_in_service_env, service_environment

PARTS = ("venv", "sglang", "detect")

# argv[1]: per part, its request (JSON), or null for a part with nothing to answer.
SCRIPT = r"""
import json, os, sys
requests = json.loads(sys.argv[1])
service_env = dict(os.environ)


def venv(request):
    out = {"python": sys.version.split()[0]}
    try:
        import torch
        flags = getattr(torch._C, "_cuda_getArchFlags", lambda: "")() or ""
        out["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda, "arch_flags": flags.split()}
    except Exception as error:
        out["torch_error"] = f"{type(error).__name__}: {error}"
    flashinfer = out["flashinfer"] = {}
    try:
        from flashinfer.jit import cpp_ext
        flashinfer["cuda_path"] = cpp_ext.get_cuda_path()
        flashinfer["cuda_version"] = str(cpp_ext.get_cuda_version())
    except Exception as error:
        flashinfer["cuda_error"] = f"{type(error).__name__}: {error}"
    try:
        from flashinfer.compilation_context import CompilationContext
        archs = CompilationContext().TARGET_CUDA_ARCHS
        flashinfer["archs"] = [f"{major}.{minor}" for major, minor in sorted(archs)]
    except Exception as error:
        flashinfer["archs_error"] = f"{type(error).__name__}: {error}"
    return out


def sglang(request):
    import sglang
    from sglang.srt.environ import envs
    out = {"env": {key: os.environ.get(key) for key in request["cache_vars"]}}
    out["env"]["SGLANG_JIT_CACHE_DIR"] = envs.SGLANG_JIT_CACHE_DIR.get() or out["env"].get("SGLANG_JIT_CACHE_DIR")
    out["env"]["SGLANG_DG_CACHE_DIR"] = envs.SGLANG_DG_CACHE_DIR.get()
    argv = request["argv"]
    try:
        from sglang.cli.serve import _extract_model_type_override
        argv = _extract_model_type_override(argv)[1]
    except ImportError:
        pass
    from sglang.srt.server_args import prepare_server_args
    try:
        prepare_server_args(argv)
        out["parse"] = "accepted"
    except SystemExit as exit:
        out["parse"] = f"rejected (argparse exit {exit.code})"
    # compile_deep_gemm.py's parser (0.5.23, :46-52 and :232-240): the server's arguments
    # plus its --timeout. Built here from the same ServerArgs: importing that module
    # loads the whole HTTP server (about 20 s a run).
    import argparse
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    parser.add_argument("--timeout", type=int, default=3600)
    try:
        parser.parse_args(request["deep_gemm_argv"])
        out["deep_gemm_parse"] = "accepted"
    except SystemExit as exit:
        out["deep_gemm_parse"] = f"rejected (argparse exit {exit.code})"
    return out


def detect(request):
    os.environ.pop("FLASHINFER_CUDA_ARCH_LIST", None)
    import torch
    caps = [tuple(int(part) for part in cap.split(".")) for cap in request["caps"]]
    cuda = torch.cuda.is_available()
    standin = request["standin"] and not cuda
    if standin:
        torch.cuda.device_count = lambda: len(caps)
        torch.cuda.get_device_capability = lambda device=None: caps[device or 0]
    from flashinfer.compilation_context import CompilationContext
    archs = sorted(f"{major}.{minor}" for major, minor in CompilationContext().TARGET_CUDA_ARCHS)
    return {"archs": archs, "cuda": cuda, "standin": standin}


for name, part in (("venv", venv), ("sglang", sglang), ("detect", detect)):
    if requests.get(name) is None:
        continue
    os.environ.clear()
    os.environ.update(service_env)
    try:
        answer = part(requests[name])
    except (Exception, SystemExit) as error:
        answer = {"error": f"{type(error).__name__}: {error}"}
    sys.stderr.flush()
    print(f"\n@@{name} " + json.dumps(answer), flush=True)
"""


def parse_output(output):
    """(part -> (its answer, what it printed before it), for each part that answered;
    what the run printed after the last answer: a run that dies, the dying part's).

    >>> parse_output('torch warns\\n@@venv {"python": "3.11.2"}\\nusage: x\\nerror: bad\\n\\n@@sglang {}\\nSegfault')
    ({'venv': ({'python': '3.11.2'}, 'torch warns'), 'sglang': ({}, 'usage: x\\nerror: bad\\n')}, 'Segfault')
    """
    answers, printed = {}, []
    for line in output.splitlines():
        marker, sep, rest = line.partition(" ")
        if sep and marker.startswith("@@") and marker[2:] in PARTS:
            answers[marker[2:]] = (json.loads(rest), "\n".join(printed))
            printed = []
        else:
            printed.append(line)
    return answers, "\n".join(printed)


def gpu_caps(expected):
    """The compute capabilities nvidia-smi reports on the host (its facts), sorted."""
    return sorted({gpu["compute_cap"] for gpu in expected.facts.get("gpus") or []})


@dataclass
class VenvRun:
    """What the checks need to know of the run on one host, and its answers."""

    python: str
    executable: bool                 # the venv's python is there (test -x)
    env_error: str | None            # why there is no service environment (then nothing ran)
    argv: list | None                # the unit's `sglang serve` arguments; None: no unit file
    deep_gemm_argv: list
    caps: list
    rc: int | None = None
    tail: str = ""                   # the end of what it printed after the last answer
    answers: dict = field(default_factory=dict)

    def answer(self, part):
        """The part's answer, or None when the run did not reach it."""
        return self.answers[part][0] if part in self.answers else None

    def printed(self, part):
        """What the part printed (stdout and stderr) before its answer."""
        return self.answers[part][1] if part in self.answers else ""

    def died(self):
        """The run's exit status and output's tail, for a part without an answer.

        >>> VenvRun("/v/bin/python", False, None, [], [], [], rc=127, tail="sh: 1: /v/bin/python: not found").died()
        'exit 127: sh: 1: /v/bin/python: not found'
        """
        return f"exit {self.rc}: {self.tail}"


def run_venv_probe(host, expected):
    """Run SCRIPT on ``host`` (once; the fixture caches it per session), or only find out
    why it cannot run (no service environment)."""
    python = expected.venv_python
    executable = host.run(f"test -x {shlex.quote(python)}").rc == 0
    env, why = service_environment(host, expected)
    unit = read_text(host, expected.layout.unit)
    argv = None
    if unit is not None:
        exec_start = [value for key, value in parse_unit(unit).get("Service", []) if key == "ExecStart" and value]
        argv = exec_argv(exec_start[-1])[2:] if exec_start else []
    # The arguments deploy gives `python -m sglang.compile_deep_gemm` (prewarm_deep_gemm).
    deep_gemm_argv = list(expected.plan.deep_gemm.command[3:])
    caps = gpu_caps(expected)
    run = VenvRun(python, executable, None if env is not None else why, argv, deep_gemm_argv, caps)
    if env is None:
        return run
    requests = {
        "venv": {},
        "sglang": None if argv is None else {"cache_vars": sorted(CACHE_DIRS), "argv": argv,
                                             "deep_gemm_argv": deep_gemm_argv},
        "detect": {"caps": caps, "standin": bool(expected.config.gpu_standin)} if caps else None,
    }
    result = run_in_service_env(host, expected, f"{shlex.quote(python)} -c {shlex.quote(SCRIPT)} "
                                f"{shlex.quote(json.dumps(requests))} 2>&1", as_service_user=True)
    run.answers, rest = parse_output(result.stdout)
    run.rc, run.tail = result.rc, (rest + (result.stderr or "")).strip()[-300:]
    return run
