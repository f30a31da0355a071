"""SGLang itself, imported in the venv as the service runs it: every cache it and its
libraries write lands under service_cache_dir (bringup/caches.py), and the unit's
command line is accepted by the release's own argument parser (no GPU needed)."""

import pytest

from bringup.caches import CACHE_DIRS
from tests.node.remote import fail


@pytest.fixture(scope="module")
def sglang(expected, venv_probe):
    """What SGLang sees in the venv with the service's environment (the ``sglang`` part of
    the host's one run, venv_probe.py), or ``{"error": why}``."""
    if venv_probe.argv is None:
        return {"error": f"no {expected.layout.unit}"}
    if venv_probe.env_error is not None:
        fail(expected, "service environment", "an env file", venv_probe.env_error)
    data = venv_probe.answer("sglang")
    if data is None:
        return {"error": venv_probe.died()}
    return {**data, "argv": venv_probe.argv, "deep_gemm_argv": venv_probe.deep_gemm_argv,
            "output": venv_probe.printed("sglang")}


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
