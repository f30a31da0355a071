"""The node suite's one venv run per host (tests/node/venv_probe.py SCRIPT), run here for
real on stand-ins of torch, FlashInfer and SGLang: each part answers, in its order and
from the service's environment; a part that fails is its own error and the others
still answer; a run that dies leaves the parts after it without an answer."""

import json
import subprocess
import sys
import textwrap

import pytest

from tests.node.venv_probe import SCRIPT, VenvRun, parse_output

# Each stand-in module does what STUB_<NAME> (in the environment) says, else behaves.
STUBS = {
    "torch/__init__.py": """
        import os
        if os.environ.get("STUB_TORCH") == "missing":
            raise ModuleNotFoundError("No module named 'torch'")
        from torch import _C, cuda, version
        __version__ = "2.9.1+cu130"
    """,
    "torch/_C.py": """
        def _cuda_getArchFlags():
            return "sm_90 sm_100 sm_120"
    """,
    "torch/version.py": 'cuda = "13.0"\n',
    "torch/cuda.py": """
        def is_available():
            return False
        def device_count():
            return 0
        def get_device_capability(device=None):
            raise RuntimeError("no CUDA")
    """,
    "flashinfer/__init__.py": "",
    "flashinfer/jit/__init__.py": "",
    "flashinfer/jit/cpp_ext.py": """
        import os
        os.environ["TRITON_CACHE_DIR"] = "/set/by/flashinfer"  # a later part must not see it
        def get_cuda_path():
            return os.environ["CUDA_HOME"]
        def get_cuda_version():
            return "13.0"
    """,
    # As flashinfer/compilation_context.py (0.7.x): the variable read per instance, else
    # torch.cuda's devices looked up at call time.
    "flashinfer/compilation_context.py": """
        import os
        import torch
        class CompilationContext:
            def __init__(self):
                self.TARGET_CUDA_ARCHS = set()
                if "FLASHINFER_CUDA_ARCH_LIST" in os.environ:
                    for arch in os.environ["FLASHINFER_CUDA_ARCH_LIST"].split(" "):
                        major, minor = arch.split(".")
                        self.TARGET_CUDA_ARCHS.add((int(major), minor))
                else:
                    for device in range(torch.cuda.device_count()):
                        major, minor = torch.cuda.get_device_capability(device)
                        self.TARGET_CUDA_ARCHS.add((major, f"{minor}f" if major == 12 else str(minor)))
    """,
    "sglang/__init__.py": """
        import os
        what = os.environ.get("STUB_SGLANG")
        if what == "broken":
            raise ImportError("cannot import name 'x' from 'sglang.srt'")
        if what == "crash":
            print("Fatal Python error: Segmentation fault", flush=True)
            os._exit(139)
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.environ["SGLANG_CACHE_DIR"] + "/inductor")
        os.environ["FLASHINFER_CUDA_ARCH_LIST"] = "9.0a"  # the detection must not see it
    """,
    "sglang/cli/__init__.py": "",
    "sglang/cli/serve.py": """
        def _extract_model_type_override(argv):
            return None, argv
    """,
    "sglang/srt/__init__.py": "",
    "sglang/srt/environ.py": """
        import os
        class _Env:
            def __init__(self, name):
                self.name = name
            def get(self):
                return os.environ.get(self.name)
        class envs:
            SGLANG_JIT_CACHE_DIR = _Env("SGLANG_JIT_CACHE_DIR")
            SGLANG_DG_CACHE_DIR = _Env("SGLANG_DG_CACHE_DIR")
    """,
    "sglang/srt/server_args.py": """
        import argparse
        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--model-path", required=True)
                parser.add_argument("--port", type=int)
        def prepare_server_args(argv):
            parser = argparse.ArgumentParser()
            ServerArgs.add_cli_args(parser)
            return parser.parse_args(argv)
    """,
}

SERVICE_ENV = {"CUDA_HOME": "/usr/local/cuda-13.0", "FLASHINFER_CUDA_ARCH_LIST": "12.0f",
               "SGLANG_CACHE_DIR": "/var/cache/sglang", "TRITON_CACHE_DIR": "/var/cache/sglang/triton",
               "SGLANG_JIT_CACHE_DIR": "/var/cache/sglang/jit", "SGLANG_DG_CACHE_DIR": "/var/cache/sglang/deep_gemm"}
CACHE_VARS = ["SGLANG_CACHE_DIR", "SGLANG_DG_CACHE_DIR", "SGLANG_JIT_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
              "TRITON_CACHE_DIR"]


def requests(argv=("--model-path", "m", "--port", "30000"), caps=("12.0",), standin=True):
    return {"venv": {},
            "sglang": {"cache_vars": CACHE_VARS, "argv": list(argv), "deep_gemm_argv": [*argv, "--timeout", "60"]},
            "detect": {"caps": list(caps), "standin": standin} if caps else None}


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    root = tmp_path_factory.mktemp("venv-probe-stubs")
    for path, text in STUBS.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text))
    return root


def probe(stubs, request=None, **env):
    """Run SCRIPT as the fixture does (stdout and stderr together): (rc, answers, the rest)."""
    result = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(request or requests())],
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(stubs), **SERVICE_ENV, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    return (result.returncode, *parse_output(result.stdout))


def test_every_part_answers_from_the_service_env(stubs):
    rc, answers, _ = probe(stubs)
    assert rc == 0 and list(answers) == ["venv", "sglang", "detect"]
    venv = answers["venv"][0]
    assert venv["torch"] == {"version": "2.9.1+cu130", "cuda": "13.0", "arch_flags": ["sm_90", "sm_100", "sm_120"]}
    assert venv["flashinfer"] == {"cuda_path": "/usr/local/cuda-13.0", "cuda_version": "13.0", "archs": ["12.0f"]}
    sglang = answers["sglang"][0]
    # What the venv part's imports set is not what import sglang sees; its setdefault is.
    assert sglang["env"] == {**{key: SERVICE_ENV[key] for key in CACHE_VARS if key in SERVICE_ENV},
                             "TORCHINDUCTOR_CACHE_DIR": "/var/cache/sglang/inductor"}
    assert (sglang["parse"], sglang["deep_gemm_parse"]) == ("accepted", "accepted")
    # The detection: the service's list popped (and sglang's own value gone), torch told the caps.
    assert answers["detect"][0] == {"archs": ["12.0f"], "cuda": False, "standin": True}


def test_detection_without_the_declaration_finds_no_gpu(stubs):
    _, answers, _ = probe(stubs, requests(standin=False))
    assert answers["detect"][0] == {"archs": [], "cuda": False, "standin": False}


def test_rejected_arguments_print_their_usage_in_their_part(stubs):
    _, answers, _ = probe(stubs, requests(argv=("--port", "30000")))
    sglang, printed = answers["sglang"]
    assert sglang["parse"] == sglang["deep_gemm_parse"] == "rejected (argparse exit 2)"
    assert printed.count("error: the following arguments are required: --model-path") == 2, printed
    assert "error:" not in answers["detect"][1] + answers["venv"][1]


def test_a_broken_sglang_is_its_own_error(stubs):
    rc, answers, _ = probe(stubs, STUB_SGLANG="broken")
    assert rc == 0
    assert answers["sglang"][0] == {"error": "ImportError: cannot import name 'x' from 'sglang.srt'"}
    assert answers["venv"][0]["flashinfer"]["archs"] == ["12.0f"]
    assert answers["detect"][0]["archs"] == ["12.0f"]


def test_no_torch_fails_the_parts_that_need_it(stubs):
    _, answers, _ = probe(stubs, STUB_TORCH="missing")
    venv = answers["venv"][0]
    assert venv["torch_error"] == "ModuleNotFoundError: No module named 'torch'"
    assert set(venv["flashinfer"]) == {"cuda_path", "cuda_version", "archs_error"}
    assert answers["sglang"][0]["parse"] == "accepted"
    assert answers["detect"][0] == {"error": "ModuleNotFoundError: No module named 'torch'"}


def test_a_run_that_dies_leaves_the_later_parts_unanswered(stubs):
    rc, answers, rest = probe(stubs, STUB_SGLANG="crash")
    assert rc == 139 and list(answers) == ["venv"]
    run = VenvRun("/v/bin/python", True, None, [], [], ["12.0"], rc=rc, tail=rest.strip()[-300:],
                  answers=answers)
    assert run.answer("sglang") is None and run.answer("detect") is None
    assert run.died() == "exit 139: Fatal Python error: Segmentation fault"


def test_skipped_parts_do_not_run(stubs):
    _, answers, _ = probe(stubs, {**requests(caps=()), "sglang": None})
    assert list(answers) == ["venv"]
