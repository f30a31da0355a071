"""The readiness gate's pure parts (bringup/serving.py: the ready decision, the journal's
milestones, the cause) and the node-side probe (files/serving_probe.py) against the
test double (tests/fixtures/serving/fake_sglang.py) run as real processes."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bringup import serving
from facts.serving import parse_look

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fixtures" / "serving" / "fake_sglang.py"
PROBE = ROOT / "files" / "serving_probe.py"
UP = {"active_state": "active", "sub_state": "running", "result": "success", "restarts": 0}

# unit, status, restarts before, waited, timeout -> decision, reason (substring)
DECISIONS = [
    ("answers", UP, 200, 0, 3, 60, serving.READY, "answered 200 after 3 s"),
    ("loading: no answer", UP, None, 0, 3, 60, serving.WAIT, "gave no answer"),
    ("warming up: 503", UP, 503, 0, 3, 60, serving.WAIT, "503 (loading)"),
    ("activating yet answering is not ready", dict(UP, active_state="activating"), 200, 0, 3, 60, serving.WAIT, ""),
    ("not in time", UP, 503, 0, 60, 60, serving.TIMED_OUT, "not serving after 60 s (service_ready_timeout)"),
    ("failed", dict(UP, active_state="failed", sub_state="failed", result="exit-code"), None, 0, 2, 60,
     serving.FAILED, "failed (exit-code)"),
    ("waits to restart", dict(UP, active_state="activating", sub_state="auto-restart", result="exit-code"), None, 0,
     2, 60, serving.FAILED, "waits to be restarted"),
    ("restarted since the gate began", dict(UP, restarts=3), 503, 2, 20, 60, serving.FAILED, "1 automatic restart"),
    ("restarts from before the gate", dict(UP, restarts=3), 200, 3, 4, 60, serving.READY, ""),
    ("a failure beats the timeout", dict(UP, active_state="failed", result="exit-code"), None, 0, 99, 60,
     serving.FAILED, ""),
]


@pytest.mark.parametrize("name,unit,status,before,waited,timeout,decided,why", DECISIONS,
                         ids=[case[0] for case in DECISIONS])
def test_decision(name, unit, status, before, waited, timeout, decided, why):
    found, reason = serving.decision(unit, status, before, waited, timeout)
    assert found == decided
    assert why in reason


@pytest.mark.parametrize("line,said", [
    ("[2026-02-26 05:20:20 TP7] Load weight begin. avail mem=283.62 GB", "loading the weights"),
    ("[2025-12-02 12:01:19] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16", "weights loaded"),
    ("[2026-03-04 16:46:41 TP4] Capture cuda graph begin. This can take up to several minutes. avail mem=15.30 GB",
     "capturing CUDA graphs (can take several minutes)"),
    ("[2026-06-05 18:12:34] Capture cuda graph end. Time elapsed: 1.23 s.", "CUDA graphs captured"),
    # 0.5.23's lines (model_runner_components/cuda_graph_setup.py).
    ("[2026-12-02 09:01:02 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
     "avail mem=70.10 GB", "capturing CUDA graphs (can take several minutes)"),
    ("[2026-12-02 09:01:40 TP0] Capture target prefill CUDA graph end. elapsed=3.20 s, mem usage=1.10 GB",
     "CUDA graphs captured"),
    ("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)", "HTTP server listening, warming up"),
    ("[2026-06-05 18:12:40] The server is fired up and ready to roll!", "ready to roll"),
    ("[2026-06-05 18:12:41] Prefill batch. #new-seq: 1, #new-token: 6", ""),
])
def test_progress(line, said):
    assert serving.progress(line) == said


def test_the_cause_is_explains_and_the_recorded_no_gpu_start_names_cuda_unavailable():
    journal = (ROOT / "tests" / "fixtures" / "failures" / "service-start-no-gpu.log").read_text().splitlines()
    assert serving.cause(journal).startswith("CUDA_UNAVAILABLE (SGLang found no usable GPU): ")
    assert serving.cause(["Traceback (most recent call last):", "  x", "OSError: model not found"]) == \
        "no known cause; its last line: OSError: model not found"


def test_parse_look_without_an_answer_nor_a_journal():
    unit, status, journal, cursor = parse_look(["ActiveState=activating", "SubState=start", "Result=success",
                                                "NRestarts=", 'probe={"status": null, "error": "refused"}'])
    assert (unit["restarts"], status, journal, cursor) == ("", None, [], "")
    assert serving.decision(unit, status, 0, 1, 60)[0] == serving.WAIT


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# port -> the pid of the double listening there: the "unit's" process the probe checks.
OWNERS = {}


def ask(port, what, key_file=""):
    out = subprocess.run([sys.executable, "-I", str(PROBE), "127.0.0.1", str(port), what, key_file,
                          str(OWNERS.get(port, ""))],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)


@pytest.fixture
def fake(tmp_path):
    started = []

    def start(*args, **env):
        port = free_port()
        proc = subprocess.Popen([sys.executable, str(FAKE), "serve", "--model-path", "m", "--host", "127.0.0.1",
                                 "--port", str(port), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env={**os.environ, **env})
        started.append(proc)
        OWNERS[port] = proc.pid
        return proc, port

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def until(check, timeout=20, step=0.2):
    """``check()``'s first true answer within ``timeout`` seconds, asked every ``step``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(step)
    raise AssertionError("not within the time")


def test_the_double_answers_as_the_release_no_answer_then_503_then_200_and_one_token(fake):
    proc, port = fake(FAKE_SGLANG_READY_AFTER="3")
    first = ask(port, "health")
    assert first["status"] is None and first["error"]
    until(lambda: ask(port, "health")["status"] == 503)
    until(lambda: ask(port, "health")["status"] == 200)
    generated = ask(port, "generate")
    assert serving.answered_token(generated["status"], generated["body"]), generated
    proc.kill()
    lines = proc.stdout.read().splitlines()
    said = [serving.progress(line) for line in lines if serving.progress(line)]
    assert said[0] == "loading the weights" and said[-1] == "ready to roll", lines


def test_the_double_never_ready_and_exit_at_start(fake):
    _, port = fake(FAKE_SGLANG_NEVER_READY="1", FAKE_SGLANG_READY_AFTER="0.3")
    until(lambda: ask(port, "health")["status"] == 503)
    time.sleep(1)
    assert ask(port, "health")["status"] == 503
    proc, _ = fake(FAKE_SGLANG_EXIT_AT_START="RuntimeError: No accelerator (CUDA, XPU, HPU) or platform plugin "
                                             "is available")
    assert proc.wait(timeout=20) == 1
    assert serving.cause(proc.stdout.read().splitlines()).startswith("CUDA_UNAVAILABLE")


def test_the_key_goes_in_the_header_health_needs_none_and_is_never_printed(fake, tmp_path):
    key_file = tmp_path / "api-key.yaml"
    key_file.write_text("api-key: sk-serving-test-1234\n")
    _, port = fake("--config", str(key_file), FAKE_SGLANG_READY_AFTER="0.3")
    until(lambda: ask(port, "health")["status"] == 200)
    assert ask(port, "generate")["status"] == 401
    answer = subprocess.run([sys.executable, "-I", str(PROBE), "127.0.0.1", str(port), "generate", str(key_file),
                             str(OWNERS[port])],
                            capture_output=True, text=True, timeout=60).stdout
    assert json.loads(answer)["status"] == 200 and "sk-serving-test-1234" not in answer


STRANGER = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
record = open(sys.argv[2], "a")
class Handler(BaseHTTPRequestHandler):
    def answer(self):
        record.write(json.dumps([self.path, self.headers.get("Authorization")]) + "\\n")
        record.flush()
        body = json.dumps({"text": "x", "meta_info": {"completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


@pytest.fixture
def stranger(tmp_path):
    """A local listener that answers 200 to everything and records what it was sent
    (the path and the Authorization header): what any user may start on a free port."""
    port, record = free_port(), tmp_path / "asked"
    record.touch()
    proc = subprocess.Popen([sys.executable, "-c", STRANGER, str(port), str(record)])
    until(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0)
    yield proc, port, record
    proc.kill()
    proc.wait()


def probe_as(port, what, key_file, owners):
    out = subprocess.run([sys.executable, "-I", str(PROBE), "127.0.0.1", str(port), what, key_file, *owners],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return out, json.loads(out)


def test_a_stranger_on_the_port_is_not_the_units_listener_and_gets_no_key(stranger, tmp_path):
    """While SGLang loads, the port is free: a listener of another process (not the
    unit's main PID nor of its cgroup) answering 200 is "not the unit's listener", is
    asked nothing, and never sees the key; the gate never says serving for it."""
    proc, port, record = stranger
    key_file = tmp_path / "api-key.yaml"
    key_file.write_text("api-key: sk-stranger-test-5678\n")
    for what in ("health", "generate"):
        out, answer = probe_as(port, what, str(key_file), [str(os.getpid())])
        assert answer["status"] is None and "not the unit's listener" in answer["error"], answer
        assert "sk-stranger-test-5678" not in out
    assert record.read_text() == "", "the stranger was asked"
    unit, status, _, _ = parse_look(["ActiveState=active", "SubState=running", "Result=success", "NRestarts=0",
                                     f"probe={out.strip()}"])
    decided, why = serving.decision(unit, status, 0, 700, 600)
    assert decided == serving.TIMED_OUT and "not the unit's listener" in why, why


def test_the_units_own_listener_gets_the_key_only_with_generate(stranger, tmp_path):
    """The listener of one of the unit's processes: /health is asked without the key
    (it needs none), /generate with it."""
    proc, port, record = stranger
    key_file = tmp_path / "api-key.yaml"
    key_file.write_text("api-key: sk-own-test-9012\n")
    _, health = probe_as(port, "health", str(key_file), [str(proc.pid)])
    out, generated = probe_as(port, "generate", str(key_file), ["999999999", str(proc.pid)])
    assert health["status"] == 200 and generated["status"] == 200, (health, generated)
    assert "sk-own-test-9012" not in out
    asked = [json.loads(line) for line in record.read_text().splitlines()]
    assert asked == [["/health", None], ["/generate", "Bearer sk-own-test-9012"]], asked


def test_no_process_of_the_unit_is_no_answer_and_no_request(stranger):
    _, port, record = stranger
    _, answer = probe_as(port, "health", "", [])
    assert answer["status"] is None and "not the unit's listener" in answer["error"], answer
    assert record.read_text() == ""


def test_a_port_nothing_listens_on_is_not_asked_a_stranger_binding_it_meanwhile_gets_nothing(stranger, monkeypatch):
    """Review (trust in what answers): the listeners are read before the request
    connects. When none listens at that moment the probe used to ask anyway ("the
    request itself says so"), and a local user binding the free port in between (a loop
    of bind, listen, close: 38 requests answered 200 in 90 s of polling) was asked and
    taken as serving. Nothing listening is no answer, and nothing is sent."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("serving_probe_under_test", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _, port, record = stranger
    # The moment the probe reads /proc/net/tcp*: the stranger is not listening yet.
    monkeypatch.setattr(module, "listening", lambda host, port: set())
    answer = module.ask("127.0.0.1", str(port), "health", "", pids=[str(os.getpid())])
    assert answer["status"] is None, answer
    assert record.read_text() == "", "the stranger was asked"
