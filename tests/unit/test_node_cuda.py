"""How the node suite's CUDA checks judge a node (tests/node/cuda.py), by table: the
answer of the script run in the venv against the GPUs nvidia-smi lists, and the
driver layer's fabric state on NVSwitch nodes; and how a stand-in shows in the report."""

import pytest

from tests.node.cuda import cuda_verdict, fabric_verdict
from tests.node.report import Results

# GPUs listed, the script's answer -> a fragment of what is wrong ("" when nothing)
CUDA = [
    (1, {"count": 1, "kernels": {"0": 2.0}}, ""),
    (8, {"count": 8, "kernels": {str(index): 2.0 for index in range(8)}}, ""),
    (8, {"error": "RuntimeError: Found no NVIDIA driver on your system."}, "CUDA does not start: RuntimeError"),
    (8, {"error": "RuntimeError: CUDA error: system not yet initialized"}, "system not yet initialized"),
    (8, {"count": 0, "kernels": {}}, "torch.cuda.device_count() is 0"),
    (2, {"count": 2, "kernels": {"0": 2.0, "1": 1.0}}, "cuda:1 torch.ones(1).add_(1): 1.0"),
    (2, {"count": 2, "kernels": {"0": "RuntimeError: CUDA error: an illegal memory access", "1": 2.0}},
     "cuda:0 torch.ones(1).add_(1): RuntimeError: CUDA error: an illegal memory access"),
]


@pytest.mark.parametrize("listed, answer, wrong", CUDA)
def test_cuda_verdict(listed, answer, wrong):
    verdict = cuda_verdict(listed, answer)
    assert (verdict == "") if not wrong else (wrong in verdict), verdict


def gpu(index, state, status=None):
    return {"index": index, "fabric_state": state, "fabric_status": status}


# driver_layer -> what is wrong ("" when nothing)
FABRIC = [
    ({"nvswitch_count": 0, "gpus": [gpu(0, None)]}, ""),  # PCIe: no fabric to train
    ({"nvswitch_count": 0, "gpus": [gpu(0, "N/A")]}, ""),
    ({"nvswitch_count": 4, "gpus": [gpu(0, "Completed", "Success"), gpu(1, "Completed", "Success")]}, ""),
    ({"nvswitch_count": 4, "gpus": [gpu(0, "Completed")]}, ""),  # a driver that prints no Status
    ({"nvswitch_count": 4, "gpus": [gpu(0, "Completed", "Success"), gpu(1, "In Progress")]}, "GPU 1 In Progress"),
    ({"nvswitch_count": 4, "gpus": [gpu(0, "Not Started"), gpu(1, "Not Started")]},
     "GPU 0 Not Started, GPU 1 Not Started"),
    ({"nvswitch_count": 4, "gpus": [gpu(0, None)]}, "GPU 0 no Fabric State"),
    ({"nvswitch_count": 4, "gpus": [gpu(0, "Completed", "Failure")]}, "GPU 0 Completed (Failure)"),
    ({"nvswitch_count": 4, "gpus": []}, "nvidia-smi -q lists no GPU"),
]


@pytest.mark.parametrize("layer, wrong", FABRIC)
def test_fabric_verdict(layer, wrong):
    assert fabric_verdict(layer) == wrong


def test_a_stand_in_is_not_a_failure_and_is_named():
    results = Results()
    results.add("sb1", "nvidia_smi_answers", "PASS")
    results.add("sb1", "cuda_runs_on_every_gpu", "STAND-IN", "sb1: CUDA ...: stand-in (gpu_standin: ...): no device")
    assert results.failing("sb1") == [] and results.standins("sb1") == ["cuda_runs_on_every_gpu"]
    text = results.render()
    assert "YES (2 passed, 1 stand-in)" in text
    assert "- sb1 cuda_runs_on_every_gpu: CUDA ...: stand-in (gpu_standin: ...): no device" in text
    # A failure later in the same check (its teardown) still wins.
    results.add("sb1", "cuda_runs_on_every_gpu", "ERROR", "sb1: teardown")
    assert results.failing("sb1") == ["cuda_runs_on_every_gpu"] and "Stand-ins" not in results.render()
