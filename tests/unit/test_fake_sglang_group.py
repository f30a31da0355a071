"""The test double of SGLang (tests/fixtures/serving/fake_sglang.py) in a serving group, run as
real processes on 127.0.0.1 as the units run it (``python3 -I``): the head's HTTP port stays
closed until every member joined the rendezvous at ``--dist-init-addr``, a member's dummy health
server answers 200 once the group went; a member that never joins keeps the head unready and
named in its output; a peer that dies after the group is up takes the others down (exit 1);
``--nnodes 1`` is the lone server, line for line."""

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.unit.test_serving import until as serving_until

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fixtures" / "serving" / "fake_sglang.py"
# The units run it with the system's python3, isolated: standard library only.
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
FAST = {"FAKE_SGLANG_READY_AFTER": "0.3"}
# How long a node that must exit may take (a bound on failure only, as ``until``'s).
EXIT_S = 30


def free_port(host="127.0.0.1"):
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def health(port, path="/health"):
    """The status ``path`` answered, None for no answer (the port not open)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def until(check, timeout=30.0):
    # Each wait ends at the first true answer: the bound only matters on a failure. 4 s
    # ran out once while three test workers kept both cores busy (python starts, the
    # double's 0.3 s readiness and a rendezvous retry).
    return serving_until(check, timeout, step=0.05)


class Node:
    def __init__(self, proc, port, out):
        self.proc, self.port, self.out = proc, port, out

    def said(self):
        return self.out.read_text()


@pytest.fixture
def group(tmp_path):
    """``start(rank, nnodes, dist_init_addr, **env)``: one node of a group as its own process,
    its output in a file; every process killed at the end."""
    started = []

    def start(rank, nnodes, addr, *args, **env):
        port = free_port()
        out = tmp_path / f"node-{len(started)}-rank-{rank}.log"
        with out.open("w") as handle:
            proc = subprocess.Popen([PYTHON, "-I", str(FAKE), "serve", "--model-path", "m", "--host", "127.0.0.1",
                                     "--port", str(port), "--nnodes", str(nnodes), "--node-rank", str(rank),
                                     "--dist-init-addr", addr, *args],
                                    stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, **FAST, **env})
        started.append(proc)
        return Node(proc, port, out)

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def stays(check, seconds):
    """``check`` holds all along ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check()
        time.sleep(0.1)
    return True


def test_the_head_answers_only_once_its_member_joined_a_member_waits_for_the_head(group):
    """The member started first cannot connect (torch's client line, naming the address and the
    error); the head alone opens no HTTP port; both answer 200 once the member joined."""
    addr = f"127.0.0.1:{free_port()}"
    member = group(1, 2, addr)
    until(lambda: f"The client socket has failed to connect to [{addr.replace(':', ']:')} (errno: 111 - "
                  "Connection refused)." in member.said())
    head = group(0, 2, addr, "--nccl-init-addr", addr)  # the alias names the same address
    until(lambda: health(head.port) == 200 and health(member.port) == 200)
    assert health(member.port, "/health_generate") == 200 and health(member.port, "/get_model_info") == 404
    said = head.said()
    assert re.search(r"rank 1 of 2 joined from 127\.0\.0\.1:\d+\n", said), said
    assert f"all node ranks joined at {addr} (joined 1 of 1)" in said
    assert said.index("Init torch distributed ends.") < said.index("Load weight begin.") < \
        said.index("Uvicorn running on") < said.index("The server is fired up and ready to roll!"), said
    assert f"node rank 1 of 2 connected to the head at {addr}; waiting for the other node ranks" in member.said()
    assert "Starting dummy health check server at 127.0.0.1:" in member.said()
    assert head.proc.poll() is None and member.proc.poll() is None


def test_a_group_of_three_is_unready_until_the_last_rank_joined(group):
    """Head and rank 1 up: the head's port stays closed past its READY_AFTER, its output says
    it waits for rank 2; rank 1 gone before the group was up is forgotten and may join again."""
    addr = f"127.0.0.1:{free_port()}"
    head = group(0, 3, addr)
    first = group(1, 3, addr)
    until(lambda: "waiting for node ranks [2] at " + addr + " (joined 1 of 2)" in head.said())
    first.proc.kill()
    until(lambda: "rank 1 of 3 left before the group was up" in head.said())
    assert "waiting for node ranks [1, 2] at " + addr + " (joined 0 of 2)" in head.said()
    again = group(1, 3, addr)
    until(lambda: "waiting for node ranks [2] at " + addr + " (joined 1 of 2)" in head.said().split("left")[-1])
    assert stays(lambda: health(head.port) is None and health(again.port) is None, 0.8)
    last = group(2, 3, addr)
    until(lambda: all(health(node.port) == 200 for node in (head, again, last)))
    assert "all node ranks joined at " + addr + " (joined 2 of 2)" in head.said()


def test_a_member_that_never_joins_keeps_the_head_unready_and_named(group):
    addr = f"127.0.0.1:{free_port()}"
    head = group(0, 2, addr)
    member = group(1, 2, addr, FAKE_SGLANG_NEVER_JOIN="1")
    assert stays(lambda: health(head.port) is None and health(member.port) is None, 2)
    assert f"waiting for node ranks [1] at {addr} (joined 0 of 1)" in head.said()
    assert "joined from" not in head.said() and "Load weight begin." not in head.said()
    assert f"node rank 1 of 2 is loading forever: FAKE_SGLANG_NEVER_JOIN (it never joins the head at {addr})" \
        in member.said()
    assert head.proc.poll() is None and member.proc.poll() is None


def test_a_member_killed_after_the_group_is_up_takes_the_head_down_and_the_head_its_members(group):
    """Three nodes up; rank 2 killed: the head exits 1 with NCCL's line naming the rank, and
    rank 1, whose link to the head closed, exits 1 naming the head."""
    addr = f"127.0.0.1:{free_port()}"
    head, first, last = (group(rank, 3, addr) for rank in range(3))
    until(lambda: all(health(node.port) == 200 for node in (head, first, last)))
    last.proc.kill()
    assert head.proc.wait(timeout=EXIT_S) == 1
    assert first.proc.wait(timeout=EXIT_S) == 1
    assert re.search(r"Scheduler hit an exception: torch\.distributed\.DistBackendError: NCCL error: remote process "
                     r"exited or there was a network error; Last error: socketProgress: Connection closed by remote "
                     r"peer 127\.0\.0\.1:\d+ \(node rank 2\)\n", head.said()), head.said()
    assert f"Connection closed by remote peer {addr} (node rank 0, the head)" in first.said()


def test_the_head_refuses_a_rank_it_has_no_place_for_and_the_group_it_closed(group):
    """The protocol by hand: ``JOIN <rank> <nnodes>`` out of place is ``REFUSED <reason>``;
    a member with another --nnodes exits 1 naming the refusal; once up, a join is refused."""
    port = free_port()
    addr = f"127.0.0.1:{port}"
    head = group(0, 2, addr)
    until(lambda: "waiting for node ranks" in head.said())
    with socket.create_connection(("127.0.0.1", port), timeout=3) as conn:
        conn.sendall(b"JOIN 5 2\n")
        assert conn.makefile().readline() == "REFUSED node rank 5 is not one of 1..1\n"
    stranger = group(1, 3, addr)
    assert stranger.proc.wait(timeout=EXIT_S) == 1
    assert f"the head at {addr} refused node rank 1: the head has --nnodes 2, the member 3" in stranger.said()
    member = group(1, 2, addr)
    until(lambda: health(head.port) == 200 and health(member.port) == 200)
    late = group(1, 2, addr)
    assert late.proc.wait(timeout=EXIT_S) == 1
    assert f"the head at {addr} refused node rank 1: the group is already up" in late.said()
    assert head.proc.poll() is None, head.said()


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6")
def test_an_ipv6_head_in_brackets(group):
    try:
        port = free_port("::1")
    except OSError:
        pytest.skip("no IPv6 loopback")
    addr = f"[::1]:{port}"
    head, member = group(0, 2, addr), group(1, 2, addr)
    until(lambda: health(head.port) == 200 and health(member.port) == 200)
    assert re.search(r"rank 1 of 2 joined from \[::1\]:\d+\n", head.said()), head.said()


def lone(tmp_path, *args):
    """The double alone (``args`` added), until ready; its lines without times and ports."""
    port = free_port()
    out = tmp_path / f"lone-{len(args)}.log"
    with out.open("w") as handle:
        proc = subprocess.Popen([PYTHON, "-I", str(FAKE), "serve", "--model-path", "m", "--host", "127.0.0.1",
                                 "--port", str(port), *args], stdout=handle, stderr=subprocess.STDOUT,
                                env={**os.environ, **FAST})
    try:
        assert health(port) is None
        until(lambda: health(port) == 503 or health(port) == 200)
        until(lambda: health(port) == 200)
    finally:
        proc.kill()
        proc.wait()
    return [re.sub(r"^\[[^]]*\] ", "", line).replace(str(port), "PORT") for line in out.read_text().splitlines()]


def test_nnodes_1_is_the_lone_server_line_for_line(tmp_path):
    plain = lone(tmp_path)
    assert plain == lone(tmp_path, "--nnodes", "1", "--node-rank", "0", "--dist-init-addr", "127.0.0.1:1")
    assert plain[-1] == "The server is fired up and ready to roll!" and not any("distributed" in line for line in plain)
