"""How the node suite's GPU communication checks judge a node (tests/node/comm.py), by
table: the busbw floor per topology, the all-reduce and P2P verdicts on the script's
answers; and the script itself (its parent and child processes, its bounds) run with
a stand-in torch (tests/fixtures/fake_torch: symbolic tensors, an all-reduce through
files), since this machine has no GPU and no torch."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.node.comm import (
    ALL_REDUCE_BYTES, all_reduce_verdict, bandwidth_floor, bus_bandwidth, comm_command, comm_script, p2p_verdict,
    parse_comm_output,
)

FAKE_TORCH = Path(__file__).resolve().parent.parent / "fixtures" / "fake_torch"


def full(count, link):
    return [{"a": a, "b": b, "link": link} for a in range(count) for b in range(a + 1, count)]


def test_bus_bandwidth_is_nccl_tests_formula():
    # PERFORMANCE.md: busbw = S/t * 2(n-1)/n; 1 GB in 1 s on 2 ranks is 1 GB/s, on 4 ranks 1.5.
    assert bus_bandwidth(1e9, 1.0, 2) == 1.0
    assert bus_bandwidth(1e9, 1.0, 4) == 1.5
    assert bus_bandwidth(1e9, 0.5, 8) == 3.5
    assert bus_bandwidth(1e9, 1.0, 1) == 0.0


# topology, GPUs -> floor (GB/s), a fragment of its source
FLOORS = [
    (full(8, "NV18"), 8, 63.28, "NVLink: NV18 on every pair, 25% of 18 x 14.0625 GB/s"),  # HGX H100/H200/B200
    (full(8, "NV12"), 8, 42.19, "NV12 on every pair"),  # HGX A100
    (full(2, "NV4"), 2, 14.06, "NV4"),  # an NVLink bridge (GA102's: its links are the slowest)
    (full(4, "NV12")[:-1] + [{"a": 2, "b": 3, "link": "NV6"}], 4, 21.09, "NV6 on the narrowest pair"),
    (full(8, "SYS"), 8, 3.94, "PCIe: a pair without NVLink (0-1 SYS), 25% of PCIe 3.0 x16 (15.75 GB/s)"),
    (full(4, "PIX"), 4, 3.94, "0-1 PIX"),
    ([{"a": 0, "b": 1, "link": "NV4"}, {"a": 0, "b": 2, "link": "NODE"}, {"a": 1, "b": 2, "link": "PHB"}], 3, 3.94,
     "0-2 NODE"),  # bridged pairs, the ring crosses PCIe
    (None, 8, 3.94, "the topology was not read"),
    (full(8, "NV18")[:5], 8, 3.94, "the topology was not read"),  # pairs missing: nothing vouches for NVLink
    ([], 1, None, "one GPU: busbw is 0 by definition"),
    (None, 1, None, "no floor applies"),
]


@pytest.mark.parametrize("topology, count, floor, source", FLOORS)
def test_bandwidth_floor(topology, count, floor, source):
    got, why = bandwidth_floor(topology, count)
    assert got == floor and source in why, (got, why)


def ranks(world, seconds=0.002, iters=20, **change):
    lines = {str(rank): {"rank": rank, "wrong": 0, "seconds": seconds * iters, "iters": iters} for rank in range(world)}
    for rank, fields in change.items():
        lines[rank.removeprefix("r")] = {"rank": int(rank[1:]), **fields}
    return lines


def reduced(world, lines=None, overran=(), errors=()):
    return {"count": world, "all_reduce": {"world": world, "bytes": ALL_REDUCE_BYTES, "ranks": lines or ranks(world),
                                           "overran": list(overran), "errors": list(errors), "bound": 150}}


# GPUs listed, the script's answer, topology -> a fragment of what is wrong ("" when nothing)
ALL_REDUCE = [
    (8, reduced(8), full(8, "NV18"), ""),  # 234.9 GB/s busbw over NV18's 63.28 floor
    (8, reduced(8, ranks(8, seconds=0.02)), full(8, "NV18"), "busbw 23.5 GB/s (algbw 13.4 GB/s, 8 ranks"),
    (8, reduced(8, ranks(8, seconds=0.02)), full(8, "SYS"), ""),  # the same on PCIe passes its floor
    (8, reduced(8, ranks(8, seconds=0.2)), full(8, "SYS"), "below the floor 3.94 GB/s (PCIe"),
    # The slowest rank's time counts.
    (2, reduced(2, ranks(2, r1={"wrong": 0, "seconds": 0.05 * 20, "iters": 20})), full(2, "NV4"), "below the floor 14.06"),
    (1, reduced(1), [], ""),  # one GPU: reduced right, no floor
    (1, reduced(1, ranks(1, seconds=10)), [], ""),  # however slow: nothing is claimed of a bandwidth
    (1, reduced(1, ranks(1, r0={"wrong": 3, "seconds": 0.04, "iters": 20})), [], "rank 0: 3 wrong value(s)"),
    (8, reduced(8, ranks(8, r3={"wrong": 67108864, "seconds": 0.04, "iters": 20})), full(8, "NV18"),
     "rank 3: 67108864 wrong value(s) after all_reduce"),
    (2, reduced(2, {}, overran=["0", "1"]), full(2, "PIX"), "rank 0 did not answer within 150 s (killed: hung)"),
    (2, reduced(2, ranks(2, r1={"error": "DistBackendError: NCCL error in: ... unhandled system error"})),
     full(2, "PIX"), "rank 1: DistBackendError: NCCL error"),
    (2, reduced(2, {"0": ranks(2)["0"]}, errors=["child 1 exit -11: "]), full(2, "PIX"), "rank 1 gave no answer"),
    (8, {"error": "RuntimeError: Found no NVIDIA driver on your system."}, None, "CUDA does not start: RuntimeError"),
    (8, {"count": 7}, full(8, "NV18"), "torch.cuda.device_count() is 7, nvidia-smi lists 8"),
    (2, {"count": 2}, full(2, "NV4"), "no all-reduce ran"),
]


@pytest.mark.parametrize("listed, answer, topology, wrong", ALL_REDUCE)
def test_all_reduce_verdict(listed, answer, topology, wrong):
    verdict, measured = all_reduce_verdict(listed, answer, topology)
    assert (verdict == "") if not wrong else (wrong in verdict), verdict
    if not verdict:
        assert "busbw" in measured or "world size 1" in measured, measured


def test_one_gpu_claims_no_bandwidth():
    verdict, measured = all_reduce_verdict(1, reduced(1), [])
    assert verdict == "" and "GB/s" not in measured and "no floor applies" in measured, measured


def p2p(count, no=(), copies=None, errors=()):
    access = {f"{a},{b}": (a, b) not in no for a in range(count) for b in range(count) if a != b}
    made = {key: {"wrong": 0, "seconds": 0.002} for key, can in access.items() if can}
    made.update(copies or {})
    return {"count": count, "p2p": {"access": access, "copies": made, "errors": list(errors), "bytes": 64 * 2**20}}


# GPUs listed, the answer, topology -> a fragment of what is wrong ("" when nothing), a fragment of what is seen
P2P = [
    (8, p2p(8), full(8, "NV18"), "", "0-1 NV18: P2P both ways, copies right (33.6, 33.6 GB/s)"),
    (2, p2p(2, no=[(0, 1), (1, 0)]), full(2, "NV4"), "0-1 NV4: NVLink but CUDA reports no P2P (0->1 no, 1->0 no)", ""),
    (2, p2p(2, no=[(1, 0)]), full(2, "NV4"), "0-1 NV4: NVLink but CUDA reports no P2P (0->1 yes, 1->0 no)", ""),
    # PCIe: what CUDA says is reported, not judged.
    (2, p2p(2, no=[(0, 1), (1, 0)]), full(2, "SYS"), "", "0-1 SYS: no P2P (CUDA)"),
    (2, p2p(2), full(2, "PIX"), "", "0-1 PIX: P2P both ways, copies right"),
    # ... but a copy CUDA allows must be right and finish (NVIDIA/nccl#1999, #2079).
    (2, p2p(2, copies={"0,1": {"wrong": 16777216, "seconds": 0.01}}), full(2, "PXB"),
     "0->1 PXB: peer copy has 16777216 wrong value(s)", ""),
    (3, p2p(3, copies={"1,2": {"error": "no answer within 60 s (hung)"},
                       "2,0": {"error": "not run (after a copy that hung)"}}), full(3, "PHB"),
     "1->2 PHB: peer copy no answer within 60 s (hung)", ""),
    (2, p2p(2, copies={"1,0": {"error": "RuntimeError: CUDA error: an illegal memory access was encountered"}}),
     full(2, "NV4"), "1->0 NV4: peer copy RuntimeError: CUDA error: an illegal memory access", ""),
    (2, p2p(2), None, "", "0-1 link unknown: P2P both ways"),
    (1, p2p(1), [], "", "one GPU: no pair to check"),
    (8, {"error": "RuntimeError: Found no NVIDIA driver on your system."}, None, "CUDA does not start", ""),
    (8, p2p(7), full(8, "NV18"), "torch.cuda.device_count() is 7, nvidia-smi lists 8", ""),
]


@pytest.mark.parametrize("listed, answer, topology, wrong, seen", P2P)
def test_p2p_verdict(listed, answer, topology, wrong, seen):
    verdict, said = p2p_verdict(listed, answer, topology)
    assert (verdict == "") if not wrong else (wrong in verdict), verdict
    assert seen in said, said


def run_script(mode, gpus, p2p_seconds=20, all_reduce_seconds=30, **fake):
    """The real script as the node suite runs it, with the stand-in torch."""
    env = {**os.environ, "PYTHONPATH": str(FAKE_TORCH), "FAKE_TORCH_GPUS": str(gpus),
           **{f"FAKE_TORCH_{key.upper()}": value for key, value in fake.items()}}
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", comm_script(p2p_seconds, all_reduce_seconds), mode],
                            capture_output=True, text=True, env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return parse_comm_output(result.stdout), time.monotonic() - started


def test_where_cuda_does_not_start_the_script_stops_at_once():
    answer, seconds = run_script("all", 0)
    assert answer == {"error": "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an "
                               "NVIDIA GPU"}
    assert seconds < 5, seconds  # no child process started


def test_eight_healthy_gpus_pass_both_checks():
    answer, _ = run_script("all", 8)
    # The stand-in's all-reduce goes through files: judged against the PCIe floor.
    assert all_reduce_verdict(8, answer, full(8, "SYS"))[0] == ""
    assert answer["all_reduce"]["ranks"]["0"]["nccl"] == "2.27.3"
    verdict, seen = p2p_verdict(8, answer, full(8, "NV18"))
    assert verdict == "" and seen.count("P2P both ways, copies right") == 28, seen


def test_one_gpu_reduces_with_world_size_one():
    answer, _ = run_script("all", 1)
    assert answer["all_reduce"]["world"] == 1 and answer["all_reduce"]["ranks"]["0"]["wrong"] == 0
    assert "world size 1" in all_reduce_verdict(1, answer, [])[1]
    assert p2p_verdict(1, answer, []) == ("", "one GPU: no pair to check")


def test_a_rank_that_sums_wrong_is_named():
    answer, _ = run_script("all-reduce", 4, ar_wrong="2")
    assert "p2p" not in answer
    verdict, _ = all_reduce_verdict(4, answer, full(4, "NV12"))
    # Every rank receives the wrong sum: the check compares each rank's result.
    assert "rank 0: 134217728 wrong value(s)" in verdict and "rank 3:" in verdict, verdict


def test_a_hung_all_reduce_is_killed_at_its_bound():
    answer, seconds = run_script("all-reduce", 2, all_reduce_seconds=3, ar_sleep="60")
    assert seconds < 20, seconds
    verdict, _ = all_reduce_verdict(2, answer, full(2, "PIX"))
    assert "rank 0 did not answer within 3 s (killed: hung)" in verdict and "rank 1 did not answer" in verdict, verdict


def test_a_peer_copy_that_hangs_or_corrupts_is_named_and_bounded():
    answer, seconds = run_script("p2p", 3, p2p_seconds=3, hang="1,2", corrupt="0,2", no_p2p="0,1 1,0")
    assert seconds < 20 and "all_reduce" not in answer, seconds
    verdict, seen = p2p_verdict(3, answer, [{"a": 0, "b": 1, "link": "SYS"}, {"a": 0, "b": 2, "link": "PIX"},
                                            {"a": 1, "b": 2, "link": "PIX"}])
    assert "0->2 PIX: peer copy has 16777216 wrong value(s)" in verdict, verdict
    assert "1->2 PIX: peer copy no answer within 3 s (hung)" in verdict, verdict
    assert "0-1 SYS: no P2P (CUDA)" in seen, seen


def test_ranks_that_print_more_than_a_pipe_holds_do_not_hang():
    # NCCL_DEBUG=INFO in the service env: every rank prints its channels and rings, far
    # more than a pipe's 64 KiB; a healthy ring must not stall on a rank blocked writing.
    answer, seconds = run_script("all-reduce", 4, all_reduce_seconds=20, noise="4000")
    verdict, measured = all_reduce_verdict(4, answer, full(4, "PIX"))
    assert verdict == "" and "busbw" in measured, verdict
    assert seconds < 15, seconds


def test_an_answer_printed_by_something_else_in_the_venv_is_no_answer(tmp_path):
    # A sitecustomize (or a .pth) that prints a passing '@@comm' line before the script's
    # own, on a node where CUDA does not start: that node must not pass either check.
    ranks = {str(rank): {"rank": rank, "wrong": 0, "seconds": 0.04, "iters": 20} for rank in range(2)}
    fake = {"count": 2, "all_reduce": {"world": 2, "bytes": ALL_REDUCE_BYTES, "ranks": ranks, "overran": [],
                                       "errors": [], "bound": 150},
            "p2p": {"access": {"0,1": True, "1,0": True}, "errors": [],
                    "copies": {"0,1": {"wrong": 0, "seconds": 0.002}, "1,0": {"wrong": 0, "seconds": 0.002}}}}
    (tmp_path / "sitecustomize.py").write_text(f"print('@@comm ' + {json.dumps(json.dumps(fake))}, flush=True)\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{FAKE_TORCH}", "FAKE_TORCH_GPUS": "0"}
    result = subprocess.run([sys.executable, "-c", comm_script(), "all"], capture_output=True, text=True, env=env,
                            timeout=60, check=False)
    assert result.stdout.count("@@comm ") == 2, result.stdout
    assert parse_comm_output(result.stdout) is None


def _marked(mark):
    # Processes whose environment carries ``mark`` (this test's script and its ranks).
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(") ", 1)[-1][0]
                found += [] if state == "Z" else [int(entry.name)]
        except OSError:
            continue
    return found


@pytest.mark.parametrize("fake", [{"FAKE_TORCH_INIT_SLEEP": "60"}, {"FAKE_TORCH_AR_SLEEP": "60"}],
                         ids=["cuda-init-hangs", "all-reduce-hangs-past-the-run"])
def test_the_node_suites_command_is_bounded_and_leaves_no_rank_behind(fake):
    # The parent's own start (cuInit on a wedged GPU) has no bound in the script; the
    # node suite's command bounds the whole run, ranks included (systemd-run --wait has
    # no bound of its own).
    mark = f"COMM_TEST_MARK={os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(FAKE_TORCH), "FAKE_TORCH_GPUS": "2", mark.split("=")[0]: mark, **fake}
    started = time.monotonic()
    result = subprocess.run(["sh", "-c", comm_command(sys.executable, seconds=3)], capture_output=True, text=True,
                            env=env, timeout=60, check=False)
    assert result.returncode in (124, 137) and time.monotonic() - started < 20, (result.returncode, result.stderr)
    for _ in range(50):
        left = _marked(mark)
        if not left:
            break
        time.sleep(0.1)
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"still running after the bound: {left}"
