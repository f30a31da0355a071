"""The node facts: the probe (files/probe.d/) run on the node, parsed into the facts document
(docs/facts.md). ``NodeFacts`` runs every section once and returns the whole
document; each narrower fact runs only the sections its key needs.

    pyinfra inventory/gpu.py fact facts.node.NodeFacts
    pyinfra @local fact facts.node.GpuDevices
"""

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from bringup.layout import ProbeInputs
from facts.probe_output import build_document, sections_for
from facts.probe_script import probe_command  # pyinfra-free: bench/gpu_proof.py sends it too


class NodeFacts(FactBase):
    """
    Returns the facts document of a GPU node (docs/facts.md: GPUs, driver, toolkits,
    resolution, venv stack, JIT cache).

    + inputs: the node's ``ProbeInputs`` (bringup/layout.py: its layout, built from the
      host's settings, and the env file keys to report); from the pyinfra CLI, which
      passes none, those of a node with every setting at its default

    .. code:: python

        facts = host.get_fact(NodeFacts, inputs=probe_inputs(config))  # control/host_plan.py
        facts["gpus"][0]["compute_cap"]  # "12.0"
    """

    keys = ()  # the document's keys this fact returns; () for all of them

    def command(self, inputs=None):
        inputs = ProbeInputs.defaults() if inputs is None else inputs
        return probe_command(inputs, sections_for(*self.keys) if self.keys else ())

    def process(self, output):
        try:
            document = build_document(output, self.keys or None)
        except Exception as error:
            # Whatever a node printed, a parse failure is that host's one line (pyinfra
            # prints a FactProcessError as "could not process fact"), never a traceback.
            raise FactProcessError(f"could not parse the node probe: {parse_error_line(error)}") from error
        return document[self.keys[0]] if len(self.keys) == 1 else document


def parse_error_line(error, limit=300):
    """One bounded line for a parse failure; a bug's type is named (it is no ValueError).

    >>> parse_error_line(IndexError("tuple index out of range"))
    'IndexError: tuple index out of range'
    >>> len(parse_error_line(ValueError("x" * 1000)))
    300
    """
    text = " ".join(str(error).split()) if isinstance(error, ValueError) else \
        f"{type(error).__name__}: {' '.join(str(error).split())}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


class GpuDevices(NodeFacts):
    """
    Returns the GPUs nvidia-smi lists: ``[{"index", "name", "compute_cap", "memory_total_mib"}]``.
    """

    keys = ("gpus",)

    @staticmethod
    def default():
        return []


class VenvStack(NodeFacts):
    """
    Returns the venv's ``{"torch", "flashinfer", "sglang"}`` (each None when absent).
    """

    keys = ("torch", "flashinfer", "sglang")


class JitCache(NodeFacts):
    """
    Returns the FlashInfer JIT modules compiled under the service's workspace and the
    pre-warm's state (its manifest, and the modules ninja would rebuild).
    """

    keys = ("jit_cache",)


class DriverLayer(NodeFacts):
    """
    Returns the driver layer (docs/facts.md ``driver_layer``): the loaded and installed
    kernel module, the user space and packages, nouveau, NVSwitches and the driver's
    daemons, nvidia-smi's per-GPU modes, DKMS and headers, a pending reboot, the IOMMU
    arguments, the ACS control above each GPU and the GPUs' topology.
    """

    keys = ("driver_layer",)


class ServiceAccount(NodeFacts):
    """
    Returns the service account as found (``service_user``): its passwd entry, the user
    the probe ran for, and what is at its planned home (docs/facts.md ``account``).
    """

    keys = ("account",)


class ModelSource(NodeFacts):
    """
    Returns where the inputs' ``model`` would come from (docs/facts.md ``model``): a local
    directory, or its hub cache entry and snapshot, and what the hub answered.
    """

    keys = ("model",)
