"""Whether SGLang serves: its health endpoint, the ready decision and the journal lines
that say how far its start got (pure: the gate's I/O is tasks/operations/serving.py).

Source: the sglang 0.5.23 wheel files/locks/sglang-0.5.23-cp311-x86_64.txt pins (its
hash), read on 2026-12-02: sglang/srt/entrypoints/http_server.py (``/health``,
``/health_generate``, ``/ready``, ``/get_model_info``, ``_wait_and_warmup``) and
sglang/srt/utils/auth.py (``decide_request_auth``):

| endpoint | while loading | when ready |
| --- | --- | --- |
| (any) | no answer: the port opens only when ``uvicorn.run`` starts, after the scheduler loaded the weights and captured the CUDA graphs (``_launch_subprocesses``) | |
| ``GET /health``, ``GET /health_generate`` (one handler) | 503 while ``server_status`` is ``Starting`` (until the warm-up request returned) | 200 once a one-token request came back within ``SGLANG_HEALTH_CHECK_TIMEOUT`` (20 s); 503 when it did not (``UnHealthy``) or the server shuts down |
| ``GET /get_model_info`` | answers as soon as the port is open (the warm-up polls it) | ``{"model_path", "tokenizer_path", "is_generation", ...}`` |
| ``POST /generate`` | | ``{"text", "meta_info": {"completion_tokens", ...}}`` |

``/health*`` (and ``/ready``, ``/metrics``) pass the API key middleware without a key
(``--api-key``: every other path needs ``Authorization: Bearer <key>``). ``/health`` runs
the one-token request unless ``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION`` is false
(default true, sglang/srt/environ.py), when it answers 200 as soon as the status is no
longer ``Starting``. The log says "The server is fired up and
ready to roll!" when the warm-up returned: from then on ``/health`` answers 200.
"""

import re

from bringup import explain

HEALTH_PATH = "/health"
GENERATE_PATH = "/generate"
# One token, greedy, as the release's own health check asks for one.
GENERATE_REQUEST = {"text": "The capital city of France is", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}

READY, WAIT, FAILED, TIMED_OUT = "ready", "wait", "failed", "timed out"

# The start's milestones as the release logs them (0.5.23: model_executor/model_runner.py
# load_model; model_runner_components/cuda_graph_setup.py "Capture target decode CUDA
# graph begin."; http_server.py _wait_and_warmup and its "Uvicorn running on" line; older
# releases logged "Capture cuda graph begin.", sgl-project/sglang#11716), and what the
# gate prints for each.
PROGRESS = (
    (re.compile(r"Load weight begin\."), "loading the weights"),
    (re.compile(r"Load weight end\."), "weights loaded"),
    (re.compile(r"Capture (?:[\w ]+ )?graph begin\.", re.IGNORECASE), "capturing CUDA graphs (can take several minutes)"),
    (re.compile(r"Capture (?:[\w ]+ )?graph end\.", re.IGNORECASE), "CUDA graphs captured"),
    (re.compile(r"Uvicorn running on"), "HTTP server listening, warming up"),
    (re.compile(r"The server is fired up and ready to roll!"), "ready to roll"),
)


def progress(line):
    """What a journal line says of the start, or "" when it is no milestone.

    >>> progress("[2026-12-02 16:14:33] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1")
    'capturing CUDA graphs (can take several minutes)'
    >>> progress("[2026-05-02 16:14:30] Load weight begin. avail mem=92.50 GB"), progress("Prefill batch. #new-seq: 1")
    ('loading the weights', '')
    """
    return next((said for pattern, said in PROGRESS if pattern.search(line)), "")


def decision(unit, status, restarts_before, waited, timeout):
    """The gate's decision on one look at the service, and why (one line).

    + unit: ``{"active_state", "sub_state", "result", "restarts"}`` (systemctl show), and
      ``listener`` when the port is held by a process outside the unit (never ready then)
    + status: the HTTP status ``/health`` answered, None for no answer
    + restarts_before: NRestarts when the gate began (a growing count is a failing start)
    + waited, timeout: seconds

    >>> up = {"active_state": "active", "sub_state": "running", "result": "success", "restarts": 0}
    >>> decision(up, 200, 0, 5, 60)
    ('ready', '/health answered 200 after 5 s')
    >>> decision(up, 503, 0, 5, 60)
    ('wait', '/health answered 503 (loading)')
    >>> decision(up, None, 0, 60, 60)
    ('timed out', 'not serving after 60 s (service_ready_timeout): /health gave no answer')
    >>> decision(dict(up, restarts=1), None, 0, 12, 60)[0], decision(dict(up, active_state="failed"), None, 0, 3, 60)[0]
    ('failed', 'failed')
    """
    restarts = unit.get("restarts") or 0
    if unit.get("active_state") == "failed" or unit.get("sub_state") == "auto-restart" or restarts > restarts_before:
        return FAILED, explain.unit_state_text({**unit, "restarts": restarts - restarts_before})
    if unit.get("active_state") == "active" and status == 200:
        return READY, f"{HEALTH_PATH} answered 200 after {int(waited)} s"
    answer = f"answered {status}" if status is not None else (
        f"was not asked ({unit['listener']})" if unit.get("listener") else "gave no answer")
    if waited >= timeout:
        return TIMED_OUT, f"not serving after {int(timeout)} s (service_ready_timeout): {HEALTH_PATH} {answer}"
    return WAIT, f"{HEALTH_PATH} {answer}" + (" (loading)" if status == 503 else "")


def cause(journal_lines):
    """Why the start failed, from the unit's journal: the first known cause
    ``bringup.explain`` finds (its code, title and the line), else the last line.

    >>> cause(["INFO start", "RuntimeError: No accelerator (CUDA, XPU, HPU) or platform plugin is available"])[:52]
    'CUDA_UNAVAILABLE (SGLang found no usable GPU): Runti'
    >>> cause(["a", "Killed", ""]), cause([])
    ('no known cause; its last line: Killed', 'no known cause; the journal is empty')
    """
    lines = explain.clean_lines("\n".join(journal_lines))
    found = explain.explain(lines)
    if found:
        match = found[0]
        return f"{match.signature.code} ({match.signature.title}): {explain.shorten(match.line)}"
    filled = [line.strip() for line in lines if line.strip()]
    return f"no known cause; its last line: {explain.shorten(filled[-1])}" if filled else \
        "no known cause; the journal is empty"


def answered_token(status, body):
    """Whether a ``/generate`` answer carries a token: status 200, a JSON object whose
    ``meta_info.completion_tokens`` is at least 1 (the release's GenerateReqInput reply).

    >>> answered_token(200, {"text": " Paris", "meta_info": {"completion_tokens": 1}})
    True
    >>> answered_token(200, {"text": "", "meta_info": {"completion_tokens": 0}}), answered_token(401, {})
    (False, False)
    """
    if status != 200 or not isinstance(body, dict):
        return False
    return int((body.get("meta_info") or {}).get("completion_tokens") or 0) >= 1


def serving_of(gate):
    """Whether a host serves, and why not ("" when it does), from what deploy's gate
    recorded (``{"state", "reason", "waited"}``; None: no gate ran: the service is not
    enabled, or the run ended before it). The one question a rollback asks.

    >>> serving_of({"state": "serving", "reason": "/health answered 200 after 3 s", "waited": 3})
    (True, '')
    >>> serving_of({"state": "timed out", "reason": "not serving after 60 s", "waited": 60})
    (False, 'timed out: not serving after 60 s')
    >>> serving_of(None)
    (False, 'no readiness gate ran (service not enabled, or the run ended before it)')
    """
    if not gate:
        return False, "no readiness gate ran (service not enabled, or the run ended before it)"
    if gate.get("state") == "serving":
        return True, ""
    return False, f"{gate.get('state')}: {gate.get('reason', '')}"
