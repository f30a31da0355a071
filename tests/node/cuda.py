"""What the CUDA checks (tests/node/test_cuda.py) run on a node and how they judge the
answers: pure functions, tested without a node (tests/unit/test_node_cuda.py)."""

import shlex

from tests.node.script_answer import marked_answer

# One remote python run: CUDA's start (torch's first line of why not), the devices it
# sees, and per device a kernel whose result has come back (synchronised).
CUDA_SCRIPT = r"""
import json
out = {}
def why(error):
    return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
try:
    import torch
    torch.cuda.init()
    out["count"] = torch.cuda.device_count()
    out["kernels"] = {}
    for index in range(out["count"]):
        try:
            value = torch.ones(1, device=f"cuda:{index}").add_(1)
            torch.cuda.synchronize(index)
            out["kernels"][str(index)] = value.item()
        except Exception as error:
            out["kernels"][str(index)] = why(error)
except Exception as error:
    out["error"] = why(error)
print("@@cuda " + json.dumps(out))
"""

# The node suite's bound on the whole run (a wedged GPU hangs CUDA's start): coreutils'
# timeout stops the python's process group.
CUDA_SECONDS = 120


def cuda_command(python, seconds=CUDA_SECONDS):
    """The shell command the node suite runs: CUDA_SCRIPT in ``python``, stopped at ``seconds``.

    >>> cuda_command("/v/bin/python").startswith("timeout -k 10 120 /v/bin/python -c ")
    True
    """
    return f"timeout -k 10 {int(seconds)} {shlex.quote(python)} -c {shlex.quote(CUDA_SCRIPT)}"


def parse_cuda_output(stdout):
    """The JSON object CUDA_SCRIPT prints, or None: also when more than one line claims to
    be it (a ``sitecustomize`` or ``.pth`` of the venv printing one must not stand in for
    the script's own answer) or it is not an object.

    >>> parse_cuda_output('noise\\n@@cuda {"count": 1, "kernels": {"0": 2.0}}\\n')
    {'count': 1, 'kernels': {'0': 2.0}}
    >>> parse_cuda_output('@@cuda {"count": 1, "kernels": {"0": 2.0}}\\n@@cuda {"error": "no driver"}\\n')
    """
    return marked_answer(stdout, "@@cuda ")


def cuda_verdict(listed, cuda):
    """What is wrong with CUDA on a node whose nvidia-smi lists ``listed`` GPUs, given
    CUDA_SCRIPT's answer ``cuda`` (``{"error": why}`` when it did not run): "" when
    CUDA started, saw them all and ran a kernel on each.

    >>> cuda_verdict(2, {"count": 2, "kernels": {"0": 2.0, "1": 2.0}})
    ''
    >>> cuda_verdict(8, {"count": 7, "kernels": {}})
    'torch.cuda.device_count() is 7 (is CUDA_VISIBLE_DEVICES set in the service env?)'
    >>> cuda_verdict(2, {"count": 2, "kernels": {"0": 2.0, "1": "RuntimeError: CUDA error: launch failure"}})
    'cuda:1 torch.ones(1).add_(1): RuntimeError: CUDA error: launch failure'
    """
    if "error" in cuda:
        return f"CUDA does not start: {cuda['error']}"
    if cuda["count"] != listed:
        return f"torch.cuda.device_count() is {cuda['count']} (is CUDA_VISIBLE_DEVICES set in the service env?)"
    wrong = [f"cuda:{index} torch.ones(1).add_(1): {value}" for index, value in sorted(cuda["kernels"].items())
             if value != 2]
    return "; ".join(wrong)


def fabric_verdict(driver_layer):
    """What keeps an NVSwitch node's fabric from being up, from the probe's
    ``driver_layer`` fact: "" on a node without NVSwitches, or when every GPU's fabric
    state is Completed (and its status, where the driver prints one, Success).

    >>> fabric_verdict({"nvswitch_count": 0, "gpus": []})
    ''
    >>> fabric_verdict({"nvswitch_count": 4, "gpus": [{"index": 0, "fabric_state": "Completed",
    ...                 "fabric_status": "Success"}, {"index": 1, "fabric_state": "In Progress"}]})
    'GPU 1 In Progress'
    >>> fabric_verdict({"nvswitch_count": 4, "gpus": []})
    'nvidia-smi -q lists no GPU'
    """
    if not driver_layer.get("nvswitch_count"):
        return ""
    gpus = driver_layer.get("gpus") or []
    if not gpus:
        return "nvidia-smi -q lists no GPU"
    wrong = [f"GPU {gpu['index']} {gpu.get('fabric_state') or 'no Fabric State'}"
             + (f" ({gpu['fabric_status']})" if gpu.get("fabric_status") not in (None, "Success") else "")
             for gpu in gpus
             if gpu.get("fabric_state") != "Completed" or gpu.get("fabric_status") not in (None, "Success")]
    return ", ".join(wrong)
