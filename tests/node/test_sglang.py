"""SGLang itself, imported in the venv as the service runs it: every cache it and its
libraries write lands under service_cache_dir (bringup/caches.py), and the unit's
command line is accepted by the release's own argument parser (no GPU needed)."""

import json
import shlex

import pytest

from bringup.caches import CACHE_DIRS
from tests.node.expected import exec_argv, parse_unit
from tests.node.remote import fail, read_text, run_in_service_env

# Run with the service's environment: import sglang (its cache redirect runs at import,
# sglang/__init__.py:6-14), read where each cache goes, then parse the unit's arguments
# the way `sglang serve` does (sglang/cli/serve.py, srt/server_args.py prepare_server_args).
SCRIPT = r"""
import json, os, sys
out = {}
try:
    import sglang
    from sglang.srt.environ import envs
    out["env"] = {key: os.environ.get(key) for key in json.loads(sys.argv[1])}
    out["env"]["SGLANG_JIT_CACHE_DIR"] = envs.SGLANG_JIT_CACHE_DIR.get() or out["env"].get("SGLANG_JIT_CACHE_DIR")
    out["env"]["SGLANG_DG_CACHE_DIR"] = envs.SGLANG_DG_CACHE_DIR.get()
    argv = json.loads(sys.argv[2])
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
        parser.parse_args(json.loads(sys.argv[3]))
        out["deep_gemm_parse"] = "accepted"
    except SystemExit as exit:
        out["deep_gemm_parse"] = f"rejected (argparse exit {exit.code})"
except Exception as error:
    out["error"] = f"{type(error).__name__}: {error}"
print("@@sglang " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def sglang(host, expected):
    """What SGLang sees in the venv with the service's environment, or ``{"error": why}``."""
    unit = read_text(host, expected.layout.unit)
    if unit is None:
        return {"error": f"no {expected.layout.unit}"}
    exec_start = [value for key, value in parse_unit(unit).get("Service", []) if key == "ExecStart" and value]
    argv = exec_argv(exec_start[-1])[2:] if exec_start else []
    # The arguments deploy gives `python -m sglang.compile_deep_gemm` (prewarm_deep_gemm).
    deep_gemm_argv = list(expected.plan.deep_gemm.command[3:])
    command = (f"{shlex.quote(expected.venv_python)} -c {shlex.quote(SCRIPT)} "
               f"{shlex.quote(json.dumps(sorted(CACHE_DIRS)))} {shlex.quote(json.dumps(argv))} "
               f"{shlex.quote(json.dumps(deep_gemm_argv))} 2>&1")
    result = run_in_service_env(host, expected, command, as_service_user=True)
    line = next((line for line in result.stdout.splitlines() if line.startswith("@@sglang ")), None)
    if line is None:
        return {"error": f"exit {result.rc}: {result.stdout.strip()[-300:]}"}
    data = json.loads(line[len("@@sglang "):])
    data["argv"], data["deep_gemm_argv"], data["output"] = argv, deep_gemm_argv, result.stdout
    return data


@pytest.mark.parametrize("variable", sorted(CACHE_DIRS))
def test_service_cache_placed(host, expected, sglang, variable):
    if "error" in sglang:
        fail(expected, f"{variable} after import sglang", "sglang to import", sglang["error"])
    value, root = sglang["env"].get(variable), expected.layout.cache_dir
    want = expected.env.get(variable)
    if value != want or not (value == root or value.startswith(root + "/")):
        fail(expected, f"{variable} after import sglang (service env)", f"{want} (under {root})", value or "(unset)")


def test_service_unit_args_accepted(host, expected, sglang):
    if "error" in sglang:
        fail(expected, "the unit's arguments", "sglang to import", sglang["error"])
    argv = sglang["argv"]
    if "--model-path" not in argv:
        fail(expected, "the unit's arguments", "a --model-path",
             "none: not serving-ready, set service_model (validate: SERVICE_NOT_SERVING_READY)")
    if sglang.get("parse") != "accepted":
        usage = " / ".join(line for line in sglang["output"].splitlines() if "error:" in line)[-300:]
        fail(expected, "the unit's arguments (sglang serve's parser)", "accepted",
             f"{sglang.get('parse')}: {usage or ' '.join(argv)}")


def test_deep_gemm_args_accepted(host, expected, sglang):
    """What deploy runs for prewarm_deep_gemm (the unit's model and arguments, the
    compile's --host/--port/--timeout) is accepted by compile_deep_gemm.py's parser, on
    every node with a model: turning the setting on never meets an argparse error after
    the service was stopped for it."""
    if "error" in sglang:
        fail(expected, "DeepGEMM compile's arguments", "sglang to import", sglang["error"])
    if not expected.config.service_model:
        fail(expected, "DeepGEMM compile's arguments", "a --model-path",
             "none: not serving-ready, set service_model (validate: SERVICE_NOT_SERVING_READY)")
    if sglang.get("deep_gemm_parse") != "accepted":
        usage = " / ".join(line for line in sglang["output"].splitlines() if "error:" in line)[-300:]
        fail(expected, "DeepGEMM compile's arguments (compile_deep_gemm's parser)", "accepted",
             f"{sglang.get('deep_gemm_parse')}: {usage or ' '.join(sglang['deep_gemm_argv'])}")
