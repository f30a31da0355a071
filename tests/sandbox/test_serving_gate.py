"""Deploy's readiness gate (tasks/operations/serving.py) over real SSH to two light
sandbox nodes with real systemd, against the test double of SGLang's HTTP server
(tests/fixtures/serving/fake_sglang.py) started by the unit in place of SGLang.

Light: no toolkit, no venv (``deploy_steps=account,service``). The double is the
only stand-in besides the driver's, and in no product path: it lies in
/usr/local/lib/fake-sglang/ and an operator's drop-in (sglang.service.d/, which deploy
leaves as it is) runs it instead of the unit's ExecStart, with the double's knob in the
drop-in's Environment=; the env file deploy's env step would write is an empty file.
A change of ``service_args`` changes the unit, so deploy restarts it (and reloads
systemd, which reads the new drop-in): the gate then waits for that start.

The other host (``B``) stays a double that becomes ready after a while; ``A`` becomes
one that never is, then one that exits at start as SGLang does on a node without a GPU.
Between the first test and those, the rolling restarts (docs/deploy.md, "Rolling
restarts"): ``--serial`` with the double that exits at start on both, then one run per
batch with it on ``A``; each plants the ready double again when done.
"""

import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from unittest import mock

import pytest
import yaml

from sandbox.registration import inventory_document
from tests.sandbox_fixtures import (PYINFRA, REPO_ROOT, changed_operations, node_addr, node_suite, plant_fake_sglang,
                                    pyinfra_cli, run_ssh, said_for)

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[2]
A, B = "sg-gate-a", "sg-gate-b"
ADDRS = {A: "127.0.0.91", B: "127.0.0.92"}
DATA = ("deploy_steps=account,service", "service_model=fake/model", "service_ready_timeout=60")
# Sandbox nodes share this machine's network: each server listens on its node's own
# address (service_host, per host), or one node's gate would hear another's server.
REPORTS = ROOT / "reports" / "serving-gate"
NO_GPU = "RuntimeError: No accelerator (CUDA, XPU, HPU) or platform plugin is available"


def plant(entry, knob):
    """The double on ``entry``, listening on the node's own address, with ``knob``."""
    plant_fake_sglang(entry, knob, "fake/model")


@pytest.fixture(scope="module")
def nodes(sandbox_host):
    from sandbox import node

    entries = {}
    try:
        for name, addr in ADDRS.items():
            entries[name] = node.up(name, node_addr(addr), "rtx-pro-6000-x8", "none")
            plant(entries[name], "FAKE_SGLANG_READY_AFTER=6")
        registered = inventory_document({name: entry for name, entry in node.read_registry().items()
                                         if name in ADDRS})
        hosts = {name: {**data, "service_host": entries[name]["ssh_hostname"]}
                 for name, data in registered["hosts"].items()}
        REPORTS.mkdir(parents=True, exist_ok=True)
        hosts_file = REPORTS / "hosts.yml"
        hosts_file.write_text(yaml.safe_dump({"all": registered["all"], "hosts": hosts}))
        with mock.patch.dict(os.environ, GPU_BRINGUP_HOSTS=str(hosts_file), GPU_BRINGUP_REPORTS=str(REPORTS)):
            yield entries
    finally:
        node.down(list(ADDRS))


def deploy(*data, json_output=False, options=()):
    """deploy.py on both nodes; ``options`` go to pyinfra (``--serial``, ``--fail-percent 0``)."""
    started = time.monotonic()
    result = pyinfra_cli(*options, "inventory/gpu.py", "deploy.py", data=(*DATA, *data), json_output=json_output,
                         timeout=600)
    result.seconds = time.monotonic() - started
    rows = json.loads((REPORTS / "summary.json").read_text())["hosts"]
    result.rows = {row["host"]: row for row in rows}
    return result


def test_a_server_ready_after_a_while_is_serving_and_a_second_deploy_changes_nothing(nodes):
    result = deploy()
    assert result.returncode == 0, result.output[-4000:]
    assert {host: row["verdict"] for host, row in result.rows.items()} == {A: "serving", B: "serving"}
    # The journal's milestones, at default verbosity, as the double logs the release's lines.
    for said in (f"waiting for sglang.service to answer http://{nodes[A]['ssh_hostname']}:30000/health (up to 60 s)",
                 "sglang.service: loading the weights",
                 "sglang.service: capturing CUDA graphs (can take several minutes)",
                 "sglang.service: /health answered 503 (loading)", "sglang.service serves: /health answered 200 after"):
        assert said_for(A, said, result.output), result.output[-4000:]

    again = deploy(json_output=True)
    assert again.returncode == 0 and changed_operations(again) == [], again.output[-4000:]
    assert {host: row["verdict"] for host, row in again.rows.items()} == {A: "serving", B: "serving"}


def health(entry):
    """What the node's server answers to ``GET /health`` (its status, or "no answer")."""
    try:
        with urllib.request.urlopen(f"http://{entry['ssh_hostname']}:30000/health", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return "no answer"


def service_as_found(entry):
    """What a deploy that reached the node would change: the unit file's sha256, the
    unit's start (systemd's InvocationID and when it became active) and what it serves."""
    unit = run_ssh(entry, "sha256sum /etc/systemd/system/sglang.service").stdout.split()[0]
    start = run_ssh(entry, "systemctl show sglang.service -p InvocationID -p ActiveEnterTimestampMonotonic "
                           "-p NRestarts -p ActiveState").stdout.split()
    return {"unit": unit, "start": sorted(start), "health": health(entry)}


SERIAL = ("--serial", "--fail-percent", "0")


def test_a_serial_deploy_stops_at_the_first_host_that_fails_the_gate_and_leaves_the_next_unchanged(nodes):
    """A rolling restart: ``--serial --fail-percent 0``, a ``service_args`` change that
    restarts the unit on both, each planted to exit at start. pyinfra runs every
    operation of one host before the next (``_run_serial_ops``), in the order of a set
    (``Inventory.get_active_hosts``), not the inventory's: whichever it takes first fails
    the gate, ``State.fail_hosts`` stops the run, and the other is as it was, still
    serving on its old unit and start."""
    before = {name: service_as_found(entry) for name, entry in nodes.items()}
    assert {name: found["health"] for name, found in before.items()} == {A: 200, B: 200}, before
    for entry in nodes.values():  # written, not read: systemd reads a drop-in at deploy's reload
        plant(entry, f"FAKE_SGLANG_EXIT_AT_START={NO_GPU}")
    result = deploy("service_args=--log-level debug", options=SERIAL)
    assert result.returncode == 1, result.output[-4000:]
    assert "Over 0% of hosts failed (50%)" in result.output, result.output[-4000:]
    failed = [host for host, row in result.rows.items() if row["verdict"] == "failed"]
    assert len(failed) == 1, result.rows
    first, = failed
    second, = set(nodes) - {first}
    assert "cause: CUDA_UNAVAILABLE (SGLang found no usable GPU): " in result.rows[first]["reason"], result.rows
    assert said_for(first, "waiting for sglang.service to answer", result.output), result.output[-4000:]
    assert not said_for(second, "waiting for sglang.service", result.output), result.output[-4000:]
    assert service_as_found(nodes[second]) == before[second]
    assert service_as_found(nodes[first])["unit"] != before[first]["unit"]
    # The summary says what happened to the host pyinfra never reached, and why the run ended.
    reached_none = "not reached: the run stopped before its first operation; nothing ran on this host"
    assert (result.rows[second]["verdict"], result.rows[second]["reason"]) == ("stopped", reached_none), result.rows
    assert f"{second}: stopped: {reached_none}" in result.stderr, result.stderr[-3000:]
    assert "-- the run stopped early: pyinfra stopped the run while executing operations" in result.stderr
    assert result.seconds < 60, result.seconds

    # The contrast: without --fail-percent, pyinfra goes on to the next host after a failure.
    carried_on = deploy("service_args=--log-level error", options=("--serial",))
    assert carried_on.returncode == 1, carried_on.output[-4000:]
    assert {host: row["verdict"] for host, row in carried_on.rows.items()} == {A: "failed", B: "failed"}, \
        carried_on.rows
    for name in nodes:
        assert said_for(name, "waiting for sglang.service to answer", carried_on.output), carried_on.output[-4000:]
    # For the tests below: both ready again at their next restart (the next service_args change).
    for entry in nodes.values():
        plant(entry, "FAKE_SGLANG_READY_AFTER=6")


# docs/deploy.md's batch script ("Rolling restarts"), with this module's hosts and settings.
BATCHES = """n=0
for batch in {batches}; do
    n=$((n + 1))
    GPU_BRINGUP_REPORTS={reports}/batch-$n {pyinfra} -y {data} inventory/gpu.py deploy.py --limit "$batch" \\
        || {{ echo "batch $n ($batch) stopped the roll: {reports}/batch-$n/summary.json" >&2; exit 1; }}
done
"""


def test_one_run_per_batch_stops_at_the_first_batch_that_fails_and_the_next_is_not_run(nodes):
    """Batches in an order of the operator's (``--limit``, one run each): the first, ``A``
    alone (the canary), fails the gate; the script stops, ``B``'s batch never runs."""
    ready = deploy("service_args=--log-level critical")
    assert ready.returncode == 0, ready.output[-4000:]
    before = service_as_found(nodes[B])
    assert before["health"] == 200, before
    plant(nodes[A], f"FAKE_SGLANG_EXIT_AT_START={NO_GPU}")
    for batch in REPORTS.glob("batch-*/summary.json"):
        batch.unlink()
    data = " ".join(f"--data {shlex.quote(item)}" for item in (*DATA, "service_args=--log-level debug"))
    # The first batch a pattern (sg-gate-[a]), as the page's are; the second a name.
    script = BATCHES.format(batches=f"'{A[:-1]}[a]' {B}", reports=shlex.quote(str(REPORTS)),
                            pyinfra=shlex.quote(PYINFRA), data=data)
    rolled = subprocess.run(["sh", "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL)
    assert rolled.returncode == 1, rolled.stdout[-3000:] + rolled.stderr[-3000:]
    assert f"batch 1 ({A[:-1]}[a]) stopped the roll" in rolled.stderr, rolled.stderr[-3000:]
    rows = json.loads((REPORTS / "batch-1" / "summary.json").read_text())["hosts"]
    assert [(row["host"], row["verdict"]) for row in rows] == [(A, "failed")], rows
    assert "cause: CUDA_UNAVAILABLE" in rows[0]["reason"], rows
    assert not (REPORTS / "batch-2" / "summary.json").exists()
    assert service_as_found(nodes[B]) == before
    plant(nodes[A], "FAKE_SGLANG_READY_AFTER=6")  # ready again at its next restart


def test_never_ready_fails_that_host_in_the_timeout_and_the_other_serves(nodes):
    plant(nodes[A], "FAKE_SGLANG_NEVER_READY=1")
    result = deploy("service_ready_timeout=15", "service_args=--log-level info")
    assert result.returncode == 1, result.output[-4000:]
    assert result.rows[B]["verdict"] == "serving", result.rows
    failed = result.rows[A]
    assert failed["verdict"] == "failed", failed
    assert "Wait for sglang to serve" in failed["reason"], failed
    assert "sglang.service is not serving: not serving after 15 s (service_ready_timeout): /health answered 503" \
        in failed["reason"], failed
    # The cause: explain knows no signature of a server that never warms up; its last line.
    assert "cause: no known cause; its last line:" in failed["reason"], failed
    # Bounded by the timeout (and the deploy's own steps), not by systemd's 1800 s.
    assert result.seconds < 120, result.seconds


def test_a_start_that_fails_fails_the_host_with_explains_cause(nodes):
    plant(nodes[A], f"FAKE_SGLANG_EXIT_AT_START={NO_GPU}")
    result = deploy("service_args=--log-level warning")
    assert result.returncode == 1, result.output[-4000:]
    assert result.rows[B]["verdict"] == "serving", result.rows
    reason = result.rows[A]["reason"]
    assert "sglang.service is not serving: sglang.service failed (exit-code) and waits to be restarted" in reason, \
        reason
    assert "cause: CUDA_UNAVAILABLE (SGLang found no usable GPU): " in reason and NO_GPU in reason, reason
    # Found at the first failed start, long before the 60 s timeout.
    assert result.seconds < 60, result.seconds


def test_the_node_suite_says_which_host_serves(nodes, tmp_path):
    """The node check ``service_serving``: ``B`` answers ``/health`` and a one-token
    generate; ``A`` (the double that exits at start) does not, named in one line."""
    run = node_suite(tmp_path, "-k", "service_serving", data=DATA)
    assert run.results.get((B, "service_serving")) == "PASS", run.output[-3000:]
    assert run.failing(A) == {"service_serving"}, run.output[-3000:]
    assert f"{A}: sglang.service health (http://{nodes[A]['ssh_hostname']}:30000/health): expected 200" \
        in run.output, run.output[-3000:]


# A listener any local user may start on the service's port while SGLang loads: it
# answers 200 to everything and records the path and Authorization header it was sent.
STRANGER = """
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Handler(BaseHTTPRequestHandler):
    def answer(self):
        with open(sys.argv[3], "a") as record:
            record.write(json.dumps([self.path, self.headers.get("Authorization")]) + "\\n")
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
    do_GET = do_POST = answer
    def log_message(self, *args):
        pass
server = HTTPServer((sys.argv[1], int(sys.argv[2])), Handler)
with open(sys.argv[4], "w") as pid:
    pid.write(str(os.getpid()))
server.serve_forever()
"""
STRANGER_LOG = "/tmp/stranger-asked"
STRANGER_PID = "/tmp/stranger-pid"


def test_a_stranger_on_the_port_is_not_the_units_listener_and_never_serving(nodes):
    """Issue 33, finding 4: while the double loads (it listens only after a while, as
    SGLang), another user's process holds the port and answers 200. The gate asks it
    nothing ("not the unit's listener"), never says serving; the unit cannot bind and
    fails. Not run by the author (sandbox nodes); the lead runs it."""
    entry = nodes[A]
    address = entry["ssh_hostname"]
    plant(entry, "FAKE_SGLANG_READY_AFTER=6")
    run_ssh(entry, "systemctl stop sglang.service")
    run_ssh(entry, f"rm -f {STRANGER_LOG} {STRANGER_PID}; : > {STRANGER_LOG}; : > {STRANGER_PID}; "
                   f"chown nobody {STRANGER_LOG} {STRANGER_PID}; "
                   f"nohup runuser -u nobody -- /usr/bin/python3 -c {shlex.quote(STRANGER)} {address} 30000 "
                   f"{STRANGER_LOG} {STRANGER_PID} >/dev/null 2>&1 & sleep 2")
    try:
        assert health(entry) == 200, "the stranger does not answer"
        run_ssh(entry, f": > {STRANGER_LOG}")  # this test's own question is not the gate's
        result = deploy("service_ready_timeout=20", "service_args=--log-level error")
        assert result.returncode == 1, result.output[-4000:]
        assert result.rows[A]["verdict"] != "serving", result.rows
        assert "not the unit's listener" in result.output, result.output[-4000:]
        asked = run_ssh(entry, f"cat {STRANGER_LOG}").stdout
        assert asked.strip() == "", f"the stranger was asked: {asked}"
    finally:
        run_ssh(entry, f"[ ! -s {STRANGER_PID} ] || kill $(cat {STRANGER_PID}); rm -f {STRANGER_LOG} {STRANGER_PID}; "
                       "systemctl restart sglang.service; true", check=False)
