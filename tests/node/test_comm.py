"""The GPUs talk to each other: as the service user with the service's environment, an
NCCL all-reduce across every GPU (torch.distributed, one process per GPU) reduces right
and reaches the bus bandwidth floor of the node's topology; CUDA's peer access agrees
with the topology the probe saw (NVLink means P2P), and every peer copy CUDA allows
copies right within its bound (tests/node/comm.py: the script, the floors, the verdicts).

One remote run answers both checks; where CUDA does not start it returns at once. A
node whose settings declare ``gpu_standin`` reports both as STAND-IN then; without the
declaration that is a failure, as for test_cuda.py.
"""

import pytest

from tests.node.comm import all_reduce_verdict, comm_command, p2p_verdict, parse_comm_output
from tests.node.remote import fail, stand_in, venv_script_answer

ALL_REDUCE = "NCCL all-reduce across the GPUs (torch.distributed, as the service user with the service env)"
P2P = "CUDA peer access against the probe's topology (torch, as the service user with the service env)"


@pytest.fixture(scope="module")
def comm(host, expected):
    """COMM_SCRIPT's answer in the venv as the service user with the service's
    environment (``{"error": why}`` when CUDA does not start), or ``{"venv_error": why}``
    when it could not run."""
    return venv_script_answer(host, expected, comm_command, parse_comm_output, "@@comm ")


def _judge(expected, comm, record_property, what, want, verdict):
    listed = len(expected.facts.get("gpus") or [])
    if not listed:
        fail(expected, what, "GPUs", "nvidia-smi lists none")
    if "venv_error" in comm:
        fail(expected, what, "a working venv", comm["venv_error"])
    wrong, measured = verdict(listed)
    if wrong and "error" in comm and expected.config.gpu_standin:
        stand_in(record_property, expected, what, f"{listed} GPU(s) listed; {wrong}")
        return
    if wrong:
        fail(expected, what, want(listed), wrong)
    # What was measured, in the JUnit XML beside the pass (a one-GPU node says no floor applied).
    record_property("measured", measured)


def _topology(expected):
    return (expected.facts.get("driver_layer") or {}).get("topology")


def test_nccl_all_reduce(host, expected, comm, record_property):
    _judge(expected, comm, record_property, ALL_REDUCE,
           lambda listed: f"an all-reduce over all {listed} GPU(s) with the right sums, at or above the topology's "
                          "busbw floor",
           lambda listed: all_reduce_verdict(listed, comm, _topology(expected)))


def test_p2p_matches_topology(host, expected, comm, record_property):
    _judge(expected, comm, record_property, P2P,
           lambda listed: "P2P on every NVLink pair and right peer copies wherever CUDA reports P2P",
           lambda listed: p2p_verdict(listed, comm, _topology(expected)))
