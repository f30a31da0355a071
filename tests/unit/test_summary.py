"""The fleet summary (bringup/summary.py) on a table of host outcomes: verdict, reason,
row cells, grouping and the run's ok."""

import pytest

from bringup import summary

RTX = [{"index": i, "name": "NVIDIA RTX PRO 6000", "compute_cap": "12.0"} for i in range(8)]
FACTS = {"gpus": RTX, "driver": {"version": "580.95.05", "cuda_version": "13.0"},
         "resolution": {"version": "12.8"}}


def plan(*findings):
    return {"toolkit": {"version": "13.0"},
            "findings": [{"code": code, "severity": severity, "message": f"{code} seen", "fix": f"fix {code}"}
                         for code, severity in findings]}


def op(name, status, error=""):
    return {"name": name, "status": status, "error": error}


CHANGED_REPO = op("NVIDIA CUDA apt repository | Add the CUDA repository", "changed")
UNCHANGED_ENV = op("CUDA environment | Service environment file", "unchanged")
CHANGED_DRIVER = op("NVIDIA driver | Install NVIDIA driver 580.95.05 (open)", "changed")
NEEDS_REBOOT = {"state": "needs reboot", "reason": "loaded: none; installed: 580.95.05 open (driver_reboot: never)"}

REPLANNED_LINE = ("rebooted into 580.95.05 open; planned again, the driver step now also installs "
                  "nvidia-fabricmanager=580.95.05-1, starts nvidia-fabricmanager; nothing after the driver step ran: "
                  "run deploy again")
GATE_FAILED = "failed: sglang.service exited; cause: CUDA_UNAVAILABLE"
SERVED = {"state": "serving", "reason": "/health answered 200 after 2 s", "waited": 2}

# name, outcome, executed, verdict, reason (substring)
CASES = [
    ("unreachable", {"reached": False, "connect_error": "Could not connect (Connection refused)"}, True,
     "unreachable", "Connection refused"),
    ("unreachable without a recorded reason", {"reached": False}, True, "unreachable", "could not connect"),
    ("invalid settings", {"settings_error": "n1: setting stack_torch_cuda='x' is invalid: use X.Y\nmore"}, True,
     "failed", "stack_torch_cuda='x'"),
    ("probe failed", {"probe_failed": True}, True, "failed", "probe failed"),
    ("never examined", {}, True, "not examined", "before this host was examined"),
    ("validate, nothing to fix", {"plan": plan(("OTHER_TOOLKITS", "info"))}, True, "ready", ""),
    ("validate, fixes pending", {"plan": plan(("TOOLKIT_MISSING", "fix"))}, True, "needs deploy", ""),
    ("blocked", {"plan": plan(("NO_GPU", "blocker"), ("TOOLKIT_MISSING", "fix"))}, True, "blocked", "NO_GPU"),
    ("deploy done", {"purpose": "deploy", "plan": plan(("TOOLKIT_MISSING", "fix")),
                     "operations": [CHANGED_REPO, UNCHANGED_ENV]}, True, "deployed", ""),
    ("deploy failed at an operation", {"purpose": "deploy", "plan": plan(), "failed": True, "operations": [
        CHANGED_REPO, op("CUDA toolkit | Refresh apt lists", "error", "n1: the CUDA repository did not answer"),
        op("CUDA toolkit | Install", "not run")]}, True, "failed", "Refresh apt lists: n1: the CUDA repository"),
    ("deploy stopped by --fail-percent", {"purpose": "deploy", "plan": plan(),
                                         "operations": [CHANGED_REPO, op("CUDA toolkit | Install", "not run")]},
     True, "stopped", "before CUDA toolkit | Install"),
    ("deploy --serial stopped before this host", {"purpose": "deploy", "plan": plan(), "operations": [
        op("Deploy lock | Take the node's deploy lock", "not run"), op("CUDA toolkit | Install", "not run")]},
     True, "stopped", "not reached: the run stopped before its first operation; nothing ran on this host"),
    ("deploy failed outside an operation", {"purpose": "deploy", "plan": plan(), "failed": True,
                                            "operations": [CHANGED_REPO]}, True, "failed", "pyinfra failed this host"),
    ("deploy --dry", {"purpose": "deploy", "plan": plan(("TOOLKIT_MISSING", "fix")),
                      "operations": [op("CUDA toolkit | Install", "not run")]}, False, "dry run", ""),
    # The driver step (tasks/driver.py): its outcome's driver_reboot.
    ("deploy left the host needing a reboot", {"purpose": "deploy", "plan": plan(), "failed": True,
                                              "driver_reboot": NEEDS_REBOOT, "operations": [
        CHANGED_DRIVER, op("NVIDIA driver | Needs reboot?", "error", "n1: needs reboot: loaded: none")]},
     True, "needs reboot", "loaded: none; installed: 580.95.05 open"),
    ("the driver step stopped the host before the service", {"purpose": "deploy", "plan": plan(), "failed": True,
                                                            "driver_reboot": NEEDS_REBOOT, "operations": [
        CHANGED_DRIVER, op("NVIDIA driver | Check the loaded module", "error", "n1: needs reboot"),
        op("SGLang service | SGLang systemd unit", "not run")]}, True, "needs reboot", "installed: 580.95.05"),
    ("needs reboot, but another step failed", {"purpose": "deploy", "plan": plan(), "failed": True,
                                              "driver_reboot": NEEDS_REBOOT, "operations": [
        CHANGED_DRIVER, op("CUDA toolkit | Install", "error", "E: Unable to fetch")]}, True, "failed", "Unable"),
    ("needs reboot on a --dry run", {"purpose": "deploy", "plan": plan(), "driver_reboot": NEEDS_REBOOT,
                                     "operations": [op("NVIDIA driver | Install", "not run")]}, False, "dry run", ""),
    ("rebooted, planned again, more to do", {"purpose": "deploy", "plan": plan(), "failed": True,
                                             "driver_reboot": {"state": "replanned", "reason": REPLANNED_LINE},
                                             "operations": [
        CHANGED_DRIVER, op("NVIDIA driver | Check the loaded module", "error", f"n1: {REPLANNED_LINE}"),
        op("SGLang service | SGLang systemd unit", "not run")]}, True, "stopped", "now also installs nvidia-fabric"),
    ("rebooted and validated", {"purpose": "deploy", "plan": plan(), "operations": [CHANGED_DRIVER],
                                "driver_reboot": {"state": "rebooted", "reason": "loaded: none"}}, True, "deployed", ""),
    ("did not come back from its reboot", {"purpose": "deploy", "plan": plan(), "failed": True, "operations": [
        CHANGED_DRIVER, op("NVIDIA driver | Check the loaded module", "error", "Server did not reboot in time")],
        "driver_reboot": {"state": "unreachable", "reason": "did not come back within 903 s of its reboot",
                          "waited": 903}}, True, "unreachable", "within 903 s"),
    # The readiness gate (tasks/operations/serving.py): its outcome's service_serving.
    ("the service answered the gate", {"purpose": "deploy", "plan": plan(), "operations": [
        CHANGED_REPO, op("SGLang service | Wait for sglang to serve", "changed")],
        "service_serving": {"state": "serving", "reason": "/health answered 200 after 7 s", "waited": 7}},
     True, "serving", ""),
    ("the service did not answer in time", {"purpose": "deploy", "plan": plan(), "failed": True, "operations": [
        op("SGLang service | Wait for sglang to serve", "error",
           "n1: sglang.service is not serving: timed out; cause: CUDA_UNAVAILABLE")],
        "service_serving": {"state": "timed out", "reason": "not serving after 60 s", "waited": 60}},
     True, "failed", "Wait for sglang to serve: n1: sglang.service is not serving: timed out; cause: CUDA_UNAVAILABLE"),
    ("a --dry run waits for nothing", {"purpose": "deploy", "plan": plan(),
                                       "operations": [op("SGLang service | Wait for sglang to serve", "not run")]},
     False, "dry run", ""),
    # service_rollback: on-failure (tasks/rollback.py): its outcome's service_rollback.
    ("the gate failed, rolled back, serving", {"purpose": "deploy", "plan": plan(), "failed": True, "operations": [
        op("SGLang rollback | Wait for sglang to serve (the previous release)", "changed"),
        op("SGLang service | Rolled back: the change did not serve", "error", "n1: rolled back")],
        "service_rollback": {"state": "rolled back", "cause": GATE_FAILED}, "service_serving": SERVED},
     True, "rolled back", f"the change failed ({GATE_FAILED}); back on the previous release, serving"),
    ("rolled back, and the previous release fails too", {
        "purpose": "deploy", "plan": plan(), "failed": True, "operations": [
            op("SGLang rollback | Wait for sglang to serve (the previous release)", "error", "n1: not serving")],
        "service_rollback": {"state": "rolled back", "cause": GATE_FAILED},
        "service_serving": {"state": "failed", "reason": "exited; cause: OUT_OF_MEMORY", "waited": 3}},
     True, "failed", f"the change failed ({GATE_FAILED}); rolled back, and the previous release does not serve "
                     "either: failed: exited; cause: OUT_OF_MEMORY"),
    ("the gate failed, nothing to roll back to", {
        "purpose": "deploy", "plan": plan(), "failed": True, "operations": [
            op("SGLang rollback | Put the previous release back", "error", "n1: rollback refused")],
        "service_rollback": {"state": "refused", "cause": GATE_FAILED, "reason": "no previous release recorded"},
        "service_serving": {"state": "failed", "reason": "exited", "waited": 3}},
     True, "failed", f"the change failed ({GATE_FAILED}); rollback refused: no previous release recorded"),
    # A serving group's member failed for the group's sake: the member at fault, named.
    ("held: another member failed earlier", {"purpose": "deploy", "plan": plan(), "failed": True, "operations": [
        op("SGLang service | Hold the serving group (a member cannot restart with it)", "error", "")],
        "group_stopped": {"stage": "held", "reason": "serving group 'llama' is not restarted, nothing restarted "
                                                     "here: gpu-b: failed (Install the venv: pip failed)"}},
     True, "failed", "Hold the serving group (a member cannot restart with it): serving group 'llama' is not "
                     "restarted, nothing restarted here: gpu-b: failed (Install the venv: pip failed)"),
    # rollback.py: a host put back is its good outcome; a refusal names why.
    ("rollback.py put the host back", {"purpose": "rollback", "plan": plan(), "operations": [
        op("SGLang rollback | Put the previous release back", "changed")],
        "service_rollback": {"state": "rolled back", "cause": ""}, "service_serving": SERVED},
     True, "rolled back", "back on the previous release, serving"),
    ("rollback.py with nothing to go back to", {"purpose": "rollback", "plan": plan(), "failed": True,
                                                "operations": [op("Refuse the rollback", "error", "n1: refused")],
                                                "service_rollback": {"state": "refused", "cause": "",
                                                                     "reason": "venv_managed is false"}},
     True, "failed", "rollback refused: venv_managed is false"),
    # The blockers of the change's settings do not make a rollback "blocked" (issue 33, 6);
    # those about the paths it writes do.
    ("rollback.py put back a host whose model cannot be had", {
        "purpose": "rollback", "plan": plan(("MODEL_UNAVAILABLE", "blocker")), "operations": [
            op("SGLang rollback | Put the previous release back", "changed")],
        "service_rollback": {"state": "rolled back", "cause": ""}, "service_serving": SERVED},
     True, "rolled back", "back on the previous release, serving"),
    ("rollback.py refused for an unsafe path", {
        "purpose": "rollback", "plan": plan(("MODEL_UNAVAILABLE", "blocker"), ("UNSAFE_PATH", "blocker")),
        "failed": True, "operations": [op("Refuse n1: rollback refused", "error", "n1: refused")]},
     True, "blocked", "UNSAFE_PATH"),
    ("rollback.py failed midway, put back", {"purpose": "rollback", "plan": plan(), "failed": True,
                                             "operations": [op("Put the previous release back", "error", "x")],
                                             "service_rollback": {"state": "failed", "cause": "",
                                                                  "reason": "rollback failed, the node is as it was "
                                                                            "before it: could not put ..."}},
     True, "failed", "rollback failed, the node is as it was before it"),
]


@pytest.mark.parametrize("name,outcome,executed,verdict,reason", CASES, ids=[case[0] for case in CASES])
def test_verdict(name, outcome, executed, verdict, reason):
    found, why = summary.verdict({"host": "n1", "facts": FACTS, **outcome}, executed)
    assert found == verdict
    assert reason in why if reason else why == ""


def test_row_cells():
    row = summary.host_row({"host": "n1", "purpose": "deploy", "facts": FACTS,
                            "plan": plan(("TOOLKIT_MISSING", "fix"), ("OTHER_TOOLKITS", "info")),
                            "operations": [CHANGED_REPO, CHANGED_REPO, UNCHANGED_ENV]})
    assert row == {"host": "n1", "gpus": "8x SM 12.0", "driver": "580.95.05", "toolkit": "12.8 -> 13.0",
                   "verdict": "deployed", "blockers": [], "fixes": ["TOOLKIT_MISSING"], "service": "-",
                   "reason": "", "changed": "repo 2"}


def test_row_of_an_unreachable_host_has_no_facts():
    row = summary.host_row({"host": "n9", "reached": False, "connect_error": "timed out"})
    assert (row["gpus"], row["driver"], row["toolkit"], row["verdict"]) == ("-", "-", "-", "unreachable")


@pytest.mark.parametrize("gpus,expected", [
    ([], "none"),
    ([{"compute_cap": "10.0"}, {"compute_cap": "12.0"}, {"compute_cap": "10.0"}], "2x SM 10.0 + 1x SM 12.0"),
])
def test_gpu_cell(gpus, expected):
    assert summary.host_row({"host": "n", "facts": {"gpus": gpus}, "plan": plan()})["gpus"] == expected


def test_document_groups_by_verdict_and_is_ok_only_when_every_host_is():
    outcomes = [
        {"host": "b", "reached": False, "connect_error": "refused"},
        {"host": "a", "facts": FACTS, "plan": plan(("TOOLKIT_MISSING", "fix"))},
        {"host": "c", "facts": FACTS, "plan": plan(("NO_GPU", "blocker"))},
        {"host": "d", "facts": FACTS, "plan": plan()},
    ]
    document = summary.summary_document("validate", outcomes)
    assert [row["host"] for row in document["hosts"]] == ["d", "a", "c", "b"]
    assert document["counts"] == {"ready": 1, "needs deploy": 1, "blocked": 1, "unreachable": 1}
    assert document["ok"] is False
    assert summary.summary_document("validate", outcomes[1:2] + outcomes[3:])["ok"] is True
    assert summary.summary_document("validate", [])["ok"] is False, "no host at all is no success"
    assert summary.summary_document("deploy", [{"host": "d", "plan": plan(), "operations": []}],
                                    stopped="pyinfra stopped the run")["ok"] is False


def test_render_names_every_host_and_why():
    outcomes = [
        {"host": "gpu-01", "purpose": "deploy", "facts": FACTS, "plan": plan(("TOOLKIT_MISSING", "fix")),
         "operations": [CHANGED_REPO]},
        {"host": "gpu-02", "reached": False, "connect_error": "Could not connect (timed out)"},
        {"host": "gpu-03", "purpose": "deploy", "facts": FACTS, "plan": plan(("DRIVER_NOT_LOADED", "blocker"))},
    ]
    text = summary.render(summary.summary_document("deploy", outcomes))
    lines = text.splitlines()
    assert lines[0] == "== fleet summary: deploy.py, 3 host(s)"
    assert lines[1].split() == ["host", "GPUs", "driver", "CUDA", "now", "->", "plan", "verdict", "blockers",
                                "fixes", "service", "deploy", "changed"]
    table = {line.split()[0]: line for line in lines[3:6]}
    assert set(table) == {"gpu-01", "gpu-02", "gpu-03"}
    assert "deployed" in table["gpu-01"] and "repo 1" in table["gpu-01"]
    assert "-- 1 deployed, 1 blocked, 1 unreachable: 2 of 3 host(s) need a look (exit status 1)" in lines
    assert "gpu-02: unreachable: Could not connect (timed out)" in lines
    assert "gpu-03: [BLOCKER] DRIVER_NOT_LOADED: DRIVER_NOT_LOADED seen" in lines


NO_MODEL = {"code": "SERVICE_NOT_SERVING_READY", "severity": "warning", "fix": "set service_model",
            "message": "service_model is empty: deploy writes sglang.service without --model-path and does not enable it"}


# purpose, plan's service, a no-model warning, verdict, service cell
SERVICE_CASES = [
    ("validate", {"enable": True}, False, "ready", "enabled"),
    ("validate", {"enable": False}, False, "ready", "not enabled (service_enable)"),
    ("validate", {"enable": False}, True, "ready", "not serving-ready (service_model)"),
    ("deploy", {"enable": False}, True, "deployed", "not serving-ready (service_model)"),
]


@pytest.mark.parametrize("purpose,service,no_model,verdict,cell", SERVICE_CASES)
def test_not_serving_ready_is_said_and_keeps_the_exit_status(purpose, service, no_model, verdict, cell):
    """A node without service_model is good for the run's exit status (deploy can run, or
    ran) and the summary says it is not serving-ready, naming service_model."""
    host_plan = dict(plan(), service=service)
    if no_model:
        host_plan["findings"] = [NO_MODEL]
    document = summary.summary_document(purpose, [{"host": "n1", "facts": FACTS, "plan": host_plan,
                                                   "operations": [UNCHANGED_ENV]}])
    row, = document["hosts"]
    assert (row["verdict"], row["service"], document["ok"]) == (verdict, cell, True)
    text = summary.render(document)
    said = f"n1: not serving-ready: {NO_MODEL['message']}"
    assert (said in text.splitlines()) is no_model, text
    assert ("service_model" in row.get("not_serving_ready", "")) is no_model


@pytest.mark.parametrize("lines,expected", [
    (["Reading package lists...", "E: Failed to fetch http://m/a.deb  404", "E: Unable to fetch some archives"],
     "E: Failed to fetch http://m/a.deb  404"),
    (["\x1b[31mbuild-venv: uv failed\x1b[0m", ""], "build-venv: uv failed"),
    (["", "  "], ""),
])
def test_error_line(lines, expected):
    assert summary.error_line(lines) == expected


@pytest.mark.parametrize("argv,purpose", [
    (["pyinfra", "-y", "inventory/gpu.py", "validate.py"], "validate"),
    (["pyinfra", "inventory/gpu.py", "/abs/path/deploy.py"], "deploy"),
    (["pyinfra", "inventory/gpu.py", "rollback.py"], "rollback"),
    (["pyinfra", "inventory/gpu.py", "fact", "facts.node.NodeFacts"], None),
    (["pyinfra", "inventory/gpu.py", "debug-inventory"], None),
])
def test_purpose_from_argv(argv, purpose):
    assert summary.purpose_from_argv(argv) == purpose


def test_needs_reboot_is_a_row_of_its_own_that_fails_the_run():
    deployed = {"host": "a", "purpose": "deploy", "facts": FACTS, "plan": plan(), "operations": [CHANGED_DRIVER]}
    waiting = {**deployed, "host": "b", "driver_reboot": NEEDS_REBOOT, "failed": True,
               "operations": [CHANGED_DRIVER, op("NVIDIA driver | Needs reboot?", "error", "b: needs reboot")]}
    document = summary.summary_document("deploy", [waiting, deployed])
    assert [row["verdict"] for row in document["hosts"]] == ["deployed", "needs reboot"]
    assert document["counts"] == {"deployed": 1, "needs reboot": 1} and document["ok"] is False
    text = summary.render(document)
    assert "b: needs reboot: loaded: none; installed: 580.95.05 open" in text
    assert "1 of 2 host(s) need a look (exit status 1)" in text


@pytest.mark.parametrize("purpose,ok,line", [
    ("deploy", False, "1 of 1 host(s) need a look (exit status 1)"),
    ("rollback", True, "every host rolled back (exit status 0)"),
])
def test_rolled_back_fails_a_deploy_and_is_a_rollbacks_good_outcome(purpose, ok, line):
    # deploy's change did not serve: the host fails (exit status 1), saying it is back.
    outcome = {"host": "n1", "purpose": purpose, "facts": FACTS, "plan": plan(),
               "operations": [op("SGLang rollback | Put the previous release back", "changed")],
               "service_rollback": {"state": "rolled back", "cause": GATE_FAILED if purpose == "deploy" else ""},
               "service_serving": SERVED}
    document = summary.summary_document(purpose, [outcome])
    assert (document["ok"], document["hosts"][0]["verdict"]) == (ok, "rolled back")
    text = summary.render(document)
    assert line in text
    assert "n1: rolled back: " in text
