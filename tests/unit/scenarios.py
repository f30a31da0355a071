"""Facts documents for planner scenarios: a converged RTX PRO 6000 node, varied."""

import copy
import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
HOME = "/usr/local/cuda-13.0"


def gpus(name, sm, count=1):
    return [{"index": i, "name": name, "compute_cap": sm, "memory_total_mib": 1} for i in range(count)]


def converged():
    """An 8x RTX PRO 6000 node after a deploy: everything agrees on CUDA 13.0."""
    return {
        "os": {"id": "debian", "version_id": "12", "arch": "x86_64"},
        "driver": {"version": "580.95.05", "cuda_version": "13.0"},
        "nvidia_smi": {"present": True, "error": None},
        "gpus": gpus(RTX_PRO, "12.0", 8),
        "toolkits": [{"home": HOME, "version": "13.0", "nvcc_ok": True}],
        "cuda_symlink": HOME,
        "path_nvcc": {"path": f"{HOME}/bin/nvcc", "version": "13.0"},
        "resolution": {"cuda_home": HOME, "version": "13.0", "via": "CUDA_HOME", "nvcc_ok": True,
                       "env_file": True, "arch_list_env": "12.0f"},
        "python": {"version": "3.11.2"},
        "torch": {"version": "2.14.1+cu130", "cuda": "13.0",
                  "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]},
        "flashinfer": {"version": "0.7.2"},
        "jit_cache": {"base": "/var/cache/sglang",
                      "modules": [{"flashinfer": "0.7.2", "arch": "120f", "module": "sampling"}],
                      "prewarm": prewarmed("12.0f")},
    }


def prewarmed(arch_list, flashinfer="0.7.2", stale=()):
    """The pre-warm state of a node whose cache holds the default request."""
    from bringup.config import Config
    from bringup.prewarm import prewarm_request

    return {"manifest": {"flashinfer": flashinfer, "arch_list": arch_list,
                         "request": prewarm_request(Config()), "modules": []},
            "stale": list(stale)}


def incident():
    """The seeds' node, as recorded in tests/fixtures/facts/incident.json."""
    return json.loads((FIXTURES / "facts" / "incident.json").read_text())


def varied(base, **changes):
    """A deep copy of ``base`` with top-level keys replaced (``key=None`` clears)."""
    facts = copy.deepcopy(base)
    facts.update(changes)
    return facts
