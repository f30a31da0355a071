"""How the node suite's serving-group checks judge the members' answers (tests/node/group.py), by
table. The script itself runs with a real torch between two sandbox nodes
(tests/sandbox/test_serving_group.py)."""

import os
import shlex
import subprocess

import pytest

from tests.node.group import (GROUP_SCRIPT, free_port_command, gloo_verdict, group_command, nccl_verdict,
                              parse_group_output)

RIGHT = {"wrong": 0, "bytes": 16777216, "iterations": 5, "seconds": 0.12}
NCCL = {**RIGHT, "version": "2.30.7", "network": "Socket"}
PLANNED = {"NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0"}


def member(gloo=RIGHT, nccl=NCCL, ifname="eth0"):
    return {"gloo": gloo, "nccl": nccl, "gloo_socket_ifname": ifname, "nccl_socket_ifname": f"={ifname}"}


GLOO_CASES = [
    # answers (rank order), planned interface -> what member "b" is told ("" passes)
    ({"a": member(), "b": member()}, "eth0", ""),
    ({"a": member(ifname=None), "b": member(ifname=None)}, None, ""),
    ({"a": member(), "b": member(ifname=None)}, "eth0", "the service env's GLOO_SOCKET_IFNAME is None, the plan chose 'eth0'"),
    ({"a": member(), "b": member(ifname="ib0")}, "eth0", "the service env's GLOO_SOCKET_IFNAME is 'ib0', the plan chose "
                                                         "'eth0'"),
    ({"a": {"run_error": "exit 124, no @@group-gloo answer"}, "b": member(gloo={"error": "DistStoreError: timed out"})},
     "eth0", "DistStoreError: timed out (and a: exit 124, no @@group-gloo answer)"),
    ({"a": member(gloo={"error": "RuntimeError: Connection refused"}), "b": member()}, "eth0",
     "the group did not reduce: a: RuntimeError: Connection refused"),
    ({"a": member(), "b": member(gloo={**RIGHT, "wrong": 3})}, "eth0", "3 of 4194304 sums wrong"),
    ({"a": member()}, "eth0", "no answer: no answer"),
    ({"a": member(), "b": {"run_error": "grp-b not in this run"}}, "eth0", "no answer: grp-b not in this run"),
]


@pytest.mark.parametrize("answers, planned, told", GLOO_CASES)
def test_gloo_verdict(answers, planned, told):
    wrong, measured = gloo_verdict("b", answers, planned)
    assert wrong == told
    assert bool(measured) == (not told)


def test_a_passing_gloo_verdict_says_what_was_measured_and_through_which_interface():
    assert gloo_verdict("a", {"a": member(), "b": member()}, "eth0")[1] == (
        "2 members, 16777216 bytes: 5 all-reduces in 0.12 s over eth0")


NO_DRIVER = "RuntimeError: Found no NVIDIA driver on your system."
NCCL_CASES = [
    # answers (rank order), the plan's group env -> what member "b" is told ("" passes)
    ({"a": member(), "b": member()}, PLANNED, ""),
    ({"a": member(), "b": member(nccl={"cuda_error": NO_DRIVER})}, PLANNED, NO_DRIVER),
    ({"a": member(nccl={"cuda_error": NO_DRIVER}), "b": member(nccl={"not_started": [0]})}, PLANNED,
     f"CUDA did not start on every member, no NCCL all-reduce: a: {NO_DRIVER}"),
    ({"a": member(nccl={"cuda_error": "CUDA did not start within 30 s (hung)"}), "b": member(nccl={"not_started": [0]})},
     PLANNED, "CUDA did not start on every member, no NCCL all-reduce: a: CUDA did not start within 30 s (hung)"),
    ({"a": member(), "b": member(nccl={**NCCL, "wrong": 1})}, PLANNED, "1 of 4194304 sums wrong"),
    ({"a": member(nccl={"error": "no NCCL answer: killed at the bound (150 s)"}), "b": member()}, PLANNED,
     "the group did not reduce: a: no NCCL answer: killed at the bound (150 s)"),
    ({"a": member(), "b": {"gloo": {"error": "timed out"}, "gloo_socket_ifname": "eth0"}}, PLANNED,
     "no NCCL all-reduce: the Gloo group did not form (timed out)"),
    ({"a": member(), "b": member(ifname="ib0")}, PLANNED,
     "the service env's NCCL_SOCKET_IFNAME is '=ib0', the plan chose '=eth0'"),
    ({"a": member(), "b": member()}, {**PLANNED, "NCCL_IB_HCA": "=mlx5_0:1"},
     "NCCL took its Socket network, not InfiniBand (the plan names NCCL_IB_HCA==mlx5_0:1)"),
    ({"a": member(nccl={**NCCL, "network": "IB"}), "b": member(nccl={**NCCL, "network": "IB"})},
     {**PLANNED, "NCCL_IB_HCA": "=mlx5_0:1"}, ""),
    ({"a": member(nccl={**NCCL, "network": "IBext_v8"}), "b": member(nccl={**NCCL, "network": "IBext_v8"})},
     {**PLANNED, "NCCL_IB_HCA": "=mlx5_0:1"}, ""),
]


@pytest.mark.parametrize("answers, planned, told", NCCL_CASES)
def test_nccl_verdict(answers, planned, told):
    wrong, measured = nccl_verdict("b", answers, planned)
    assert wrong == told
    assert bool(measured) == (not told)


def test_a_member_killed_while_nccl_hangs_keeps_its_gloo_answer():
    """Each part answers as soon as it is done: the Gloo part stays when NCCL is killed at the bound."""
    stdout = '@@group-gloo {"gloo": %s, "gloo_socket_ifname": "eth0", "nccl_socket_ifname": "=eth0"}\n' % (
        str(RIGHT).replace("'", '"'))
    answer = parse_group_output(stdout, 124)
    assert gloo_verdict("b", {"a": member(), "b": answer}, "eth0")[0] == ""
    assert nccl_verdict("b", {"a": member(), "b": answer}, PLANNED)[0] == "no NCCL answer: killed at the bound (150 s)"
    assert nccl_verdict("a", {"a": member(), "b": answer}, PLANNED)[0] == (
        "the group did not reduce: b: no NCCL answer: killed at the bound (150 s)")


def test_an_answer_printed_twice_is_no_answer():
    line = '@@group-gloo {"gloo": {"wrong": 0}}\n'
    assert parse_group_output(line * 2, 0) == {"run_error": "exit 0, no @@group-gloo answer"}


def test_the_members_command_is_bounded_and_names_the_head_rank_and_world():
    command = group_command("/opt/sglang/venv/bin/python", "[fd00::1]:29500", 41234, 1, 2)
    words = shlex.split(command.split("; ", 2)[2])
    assert words[:4] == ["timeout", "-k", "10", "150"]
    assert words[4:6] == ["/opt/sglang/venv/bin/python", "-c"] and words[6] == GROUP_SCRIPT
    assert words[7:] == ["[fd00::1]", "41234", "1", "2", "$scratch"]


def test_the_scratch_is_removed_even_when_the_script_is_killed(tmp_path):
    """The shell around the script makes and removes its scratch: a script killed at its bound
    (here a stand-in python that sleeps past it) leaves none behind."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nfor last; do :; done\necho \"$last\" > " + str(tmp_path / "scratch") + "\nsleep 30\n")
    python.chmod(0o755)
    command = group_command(str(python), "10.0.0.1:29500", 41234, 0, 2, seconds=1).replace("timeout -k 10", "timeout -k 1")
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30,
                            env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert result.returncode == 124
    scratch = (tmp_path / "scratch").read_text().strip()
    assert scratch.startswith(str(tmp_path)) and not os.path.exists(scratch)


def test_the_free_port_is_asked_of_the_heads_system_python_as_nobody_within_a_bound():
    words = shlex.split(free_port_command("/usr/bin/python3", "10.0.0.1:29500"))
    assert words[:9] == ["timeout", "-k", "5", "10", "runuser", "-u", "nobody", "--", "/usr/bin/python3"]
    assert words[9:11] == ["-I", "-c"] and words[-1] == "10.0.0.1"


def test_the_script_compiles():
    compile(GROUP_SCRIPT, "<group>", "exec")
