"""CUDA starts: as the service user with the service's environment, torch initialises
CUDA, sees every GPU nvidia-smi lists and runs a kernel on each; on an NVSwitch node
every GPU's fabric is up (Fabric Manager has trained it), without which CUDA fails
with "system not yet initialized" although nvidia-smi looks healthy.

A node whose settings declare ``gpu_standin`` (a test bed's recorded nvidia-smi, no
device) reports the CUDA check as STAND-IN when CUDA does not start there; without
the declaration that is a failure, whatever the node is.
"""

import pytest

from tests.node.cuda import cuda_command, cuda_verdict, fabric_verdict, parse_cuda_output
from tests.node.remote import fail, stand_in, venv_script_answer

WHAT = "CUDA in the venv (torch, as the service user with the service env)"
FABRIC = "the GPUs' fabric (nvidia-smi -q: Fabric State)"


@pytest.fixture(scope="module")
def cuda(host, expected):
    """CUDA_SCRIPT's answer in the venv, run as the service user with the service's
    environment (``{"error": why}`` when CUDA does not start), or ``{"venv_error": why}``
    when it could not run: no venv is a failure on any node, stand-in or not."""
    return venv_script_answer(host, expected, cuda_command, parse_cuda_output, "@@cuda ")


def test_cuda_runs_on_every_gpu(host, expected, cuda, record_property):
    listed = len(expected.facts.get("gpus") or [])
    if not listed:
        fail(expected, WHAT, "GPUs to start CUDA on", "nvidia-smi lists none")
    if "venv_error" in cuda:
        fail(expected, WHAT, "a working venv", cuda["venv_error"])
    wrong = cuda_verdict(listed, cuda)
    if wrong and "error" in cuda and expected.config.gpu_standin:
        stand_in(record_property, expected, WHAT, f"{listed} GPU(s) listed; {wrong}")
        return
    if wrong:
        fail(expected, WHAT, f"CUDA to start and run a kernel on each of the {listed} GPU(s) nvidia-smi lists",
             f"{wrong} (run validate.py: its driver-layer findings name the cause)")


def test_nvswitch_fabric_completed(host, expected):
    layer = expected.facts.get("driver_layer")
    if layer is None:
        fail(expected, FABRIC, "the probe's driver_layer fact", "none")
    wrong = fabric_verdict(layer)
    if wrong:
        fail(expected, FABRIC, f"Completed on every GPU of this NVSwitch node ({layer['nvswitch_count']} NVSwitches)",
             f"{wrong} (CUDA fails with error 802 until Fabric Manager has trained the fabric: run validate.py)")
