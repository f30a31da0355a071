"""The node facts: one probe per host (files/probe.sh), exposed as pyinfra facts.

``NodeFacts`` returns the whole facts document; the narrower facts below return one
part of it for use in tasks and on the command line. Each narrower fact runs the
probe again (pyinfra 3 caches no facts), so code that needs several parts gets
``NodeFacts`` once.

    pyinfra inventory/gpu.py fact facts.node.NodeFacts
    pyinfra @local fact facts.node.GpuDevices
"""

import base64
import shlex
from pathlib import Path

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from bringup.config import DEFAULTS
from facts.probe_output import build_document

PROBE_SCRIPT = Path(__file__).resolve().parent.parent / "files" / "probe.sh"


def probe_command(venv, env_file, cache_dir):
    """The one shell command that runs the probe on a node.

    The script travels base64-encoded so no quoting of its body can break, and runs
    under ``sh`` so a node without bash still answers.

    >>> probe_command("/opt/v", "/etc/e", "/var/c").startswith("echo ")
    True
    """
    encoded = base64.b64encode(PROBE_SCRIPT.read_bytes()).decode("ascii")
    inputs = {"PROBE_VENV": venv, "PROBE_ENV_FILE": env_file, "PROBE_CACHE_DIR": cache_dir}
    assignments = " ".join(f"{key}={shlex.quote(str(value))}" for key, value in inputs.items())
    return f"echo {encoded} | base64 -d | {assignments} sh"


class NodeFacts(FactBase):
    """
    Returns the facts document of a GPU node (GPUs, driver, toolkits, resolution,
    venv stack, JIT cache), or None if the probe printed nothing.

    + venv: the SGLang venv path
    + env_file: the service's environment file
    + cache_dir: the service's FlashInfer workspace base

    .. code:: python

        facts = host.get_fact(NodeFacts, venv="/opt/sglang/venv")
        facts["gpus"][0]["compute_cap"]  # "12.0"
    """

    def command(
        self,
        venv=DEFAULTS.venv_path,
        env_file=DEFAULTS.service_env_file,
        cache_dir=DEFAULTS.service_cache_dir,
    ):
        return probe_command(venv, env_file, cache_dir)

    def process(self, output):
        try:
            return self.select(build_document(output))
        except (ValueError, KeyError, TypeError) as error:
            raise FactProcessError(f"could not parse the node probe: {error}") from error

    def select(self, document):
        return document


class GpuDevices(NodeFacts):
    """
    Returns the GPUs nvidia-smi lists: ``[{"index", "name", "compute_cap", "memory_total_mib"}]``.
    """

    @staticmethod
    def default():
        return []

    def select(self, document):
        return document["gpus"]


class Driver(NodeFacts):
    """
    Returns ``{"version", "cuda_version"}`` of the loaded driver, or None without one.
    """

    def select(self, document):
        return document["driver"]


class CudaToolkits(NodeFacts):
    """
    Returns every installed toolkit: ``[{"home", "version", "nvcc_ok"}]``.
    """

    @staticmethod
    def default():
        return []

    def select(self, document):
        return document["toolkits"]


class CudaResolution(NodeFacts):
    """
    Returns what FlashInfer/SGLang resolve in the service environment:
    ``{"cuda_home", "version", "via", ...}``.
    """

    def select(self, document):
        return document["resolution"]


class VenvStack(NodeFacts):
    """
    Returns the venv's ``{"torch", "flashinfer", "sglang"}`` (each None when absent).
    """

    def select(self, document):
        return {key: document[key] for key in ("torch", "flashinfer", "sglang")}


class JitCache(NodeFacts):
    """
    Returns the FlashInfer JIT modules compiled under the service's workspace.
    """

    def select(self, document):
        return document["jit_cache"]
