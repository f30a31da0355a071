"""NVIDIA's diagnostic when the operator asks for it (``gpu_diag``): the findings on the facts'
``gpu_diag`` (facts/sections/gpu_diag.py; files/probe.d/gpu_diag.sh). Pure functions of the
facts and the settings.

Each test DCGM failed on a GPU is a finding with the GPU (DCGM's GPU id, the index nvidia-smi
gives the same GPU, and its bus id where the health query lists it), the test, DCGM's message
and the action its severity asks. The severities are dcgm_errors.h's dcgmErrorSeverity_t
(NVIDIA/DCGM, dcgmlib/dcgm_errors.h): MONITOR "can perform workload, but needs to be
monitored", ISOLATE "cannot perform workload, GPU should be isolated", UNKNOWN "not
recognized", TRIAGE "should be triaged", CONFIG "can be configured", RESET "drain and reset
GPU"; DCGM's user guide (docs.nvidia.com/datacenter/dcgm/latest/user-guide/
dcgm-diagnostics.html) acts on them. A failure that only asks to be monitored is a warning;
any other blocks deploy on the node unless ``gpu_health_accept`` accepts ``GPU_DIAG_FAILED``
(on that GPU or all). A warning is a warning; a skipped test is not a pass, and says so.
"""

from bringup.findings import BLOCKER, WARNING, Finding
from bringup.health_accept import accepted

DCGM_GUIDE = "DCGM's user guide, docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html"
# dcgmErrorSeverity_t -> (its name, the finding's severity, NVIDIA's action for the GPU at {index}).
SEVERITIES = {
    1: ("MONITOR", WARNING, "the GPU can serve; watch it (`dcgmi health`, the next diagnostic) for the same error"),
    2: ("ISOLATE", BLOCKER, "take the GPU out of service, drain the node and contact NVIDIA support with "
                            "`nvidia-bug-report.sh`'s log and this diagnostic (an RMA if it fails again)"),
    3: ("UNKNOWN", BLOCKER, "drain the node, run `dcgmi diag -r 3` and contact NVIDIA support with "
                            "`nvidia-bug-report.sh`'s log if it fails again"),
    4: ("TRIAGE", BLOCKER, "drain the node, run `dcgmi diag -r 3` and contact NVIDIA support with "
                           "`nvidia-bug-report.sh`'s log if it fails again"),
    5: ("CONFIG", BLOCKER, "fix the configuration DCGM names (persistence mode, a library, a process or setting in "
                           "the way), then validate again"),
    6: ("RESET", BLOCKER, "drain the node and reset the GPU (`nvidia-smi -r -i {index}`) or reboot, then validate "
                          "again"),
}
# The worst first: the action a failed test asks is that of its gravest error.
WORST_FIRST = (2, 6, 4, 3, 5, 1)
NO_SEVERITY = (None, BLOCKER, SEVERITIES[4][2])
NOT_PASSED = {"skip": "skipped", "not run": "not run"}
# dcgmi's exit status: 256 plus its dcgmReturn_t (NVIDIA/DCGM dcgmlib/dcgm_structs.h), those
# a diagnostic ends with. The first two say a test failed: where the answer cannot be
# read, that is still a failure, never a pass.
FAILED_EXITS = {226: "DCGM_ST_NVVS_ERROR: the diagnostic ran and reported an error",
                205: "DCGM_ST_NVVS_ISOLATE_ERROR: the diagnostic reported a condition that needs the GPU isolated"}
OTHER_EXITS = {217: "DCGM_ST_DIAG_ALREADY_RUNNING: another diagnostic is running",
               215: "DCGM_ST_DIAG_BAD_LAUNCH: DCGM could not launch the diagnostic",
               204: "DCGM_ST_NVVS_BINARY_NOT_FOUND: the diagnostic's binary (nvvs) was not found",
               203: "DCGM_ST_NVVS_KILLED: the diagnostic was stopped by a signal",
               198: "DCGM_ST_NVVS_NO_AVAILABLE_TEST: no test matched the request"}


def worst(warnings):
    """The severity to act on among a result's warnings: the gravest DCGM gave, else None.

    >>> worst([{"severity": 1}, {"severity": 6}]), worst([{"severity": None}]), worst([])
    (6, None, None)
    """
    given = {warning.get("severity") for warning in warnings}
    return next((severity for severity in WORST_FIRST if severity in given), None)


def entity_gpu(result, facts):
    """The GPU (index, bus id) a result names: DCGM's GPU id is nvidia-smi's index on a node
    without MIG; the health query (or the driver layer) gives that index's bus id.

    >>> entity_gpu({"entity_group": "GPU", "entity_id": 3},
    ...            {"gpu_health": {"gpus": [{"index": 3, "bus_id": "0000:48:00.0"}]}})
    {'index': 3, 'bus_id': '0000:48:00.0', 'label': 'GPU 3 (0000:48:00.0)'}
    >>> entity_gpu({"entity_group": "CPU", "entity_id": 0}, {})["label"]
    'CPU 0'
    """
    group, number = result.get("entity_group") or "GPU", result.get("entity_id")
    if group.upper() != "GPU":
        return {"index": None, "bus_id": None, "label": f"{group} {number}" if number is not None else
                "the test as a whole" if group == "overall" else group}
    listed = [gpu for gpu in ((facts.get("gpu_health") or {}).get("gpus") or []) if gpu.get("index") == number]
    bus = listed[0]["bus_id"] if listed else None
    return {"index": number, "bus_id": bus, "label": f"GPU {number}" + (f" ({bus})" if bus else "")}


def messages(warnings):
    """DCGM's messages of a result, one line.

    >>> messages([{"message": "a"}, {"message": ""}, {"message": "b"}]), messages([])
    ('a; b', '')
    """
    return "; ".join(warning["message"] for warning in warnings if warning.get("message"))[:600]


def check_not_run(diag, add):
    """Asked for and not run: the GPUs were busy, or dcgmi is not installed."""
    level = diag.get("level")
    if diag.get("busy"):
        add(Finding("GPU_DIAG_NOT_RUN", WARNING,
                    f"gpu_diag asked for NVIDIA's diagnostic (`dcgmi diag -r {level}`) and it was not run: it loads "
                    f"every GPU and needs them idle, and {'; '.join(diag['busy'])}",
                    "run validate with the node drained (the service stopped: `systemctl stop <unit>`, no process "
                    "on a GPU), or set gpu_diag: off"))
    elif diag.get("installed") is False:
        add(Finding("GPU_DIAG_NOT_RUN", WARNING,
                    f"gpu_diag asked for NVIDIA's diagnostic (`dcgmi diag -r {level}`) and DCGM's dcgmi is not "
                    "installed on the node", "set gpu_diag_install: true (deploy installs NVIDIA's DCGM at its lock's "
                    "versions and starts nvidia-dcgm), or install `datacenter-gpu-manager-4-cuda<major>` from "
                    "NVIDIA's repository and start its host engine (`systemctl enable --now nvidia-dcgm`), or set "
                    "gpu_diag: off"))


def check_results(diag, facts, config, add):
    """One finding per GPU and test DCGM did not pass."""
    level = diag.get("level")
    skipped = []
    for result in diag.get("results") or []:
        status, warnings = result.get("status"), result.get("warnings") or []
        gpu = entity_gpu(result, facts)
        test = f"test {result.get('test')} ({result.get('category')})"
        said = messages(warnings)
        if status == "fail":
            severity_code = worst(warnings)
            name, severity, action = SEVERITIES.get(severity_code, NO_SEVERITY)
            what = (f"{gpu['label']}: NVIDIA's diagnostic (`dcgmi diag -r {level}`) failed its {test}: "
                    f"{said or 'DCGM gave no message'} (DCGM severity {name or 'not given'})")
            entry = accepted(config, "GPU_DIAG_FAILED", gpu["bus_id"]) if severity == BLOCKER else None
            if entry:
                severity, what = WARNING, f"{what} (accepted by gpu_health_accept {entry}: deploy goes on)"
            index = gpu["index"]
            fix = action.replace("{index}", str(index) if index is not None else "<index>")
            add(Finding("GPU_DIAG_FAILED", severity, what, f"NVIDIA's action: {fix} ({DCGM_GUIDE})"))
        elif status == "warn" or (status == "pass" and said):
            add(Finding("GPU_DIAG_WARNING", WARNING,
                        f"{gpu['label']}: NVIDIA's diagnostic (`dcgmi diag -r {level}`) passed its {test} with a "
                        f"warning: {said or 'DCGM gave no message'}",
                        f"read DCGM's message; the test passed, nothing blocks ({DCGM_GUIDE})"))
        elif status != "pass":
            skipped.append(f"{gpu['label']} {result.get('test')} ({NOT_PASSED.get(status, status or 'no status')}"
                           + (f": {said}" if said else "") + ")")
    if skipped:
        add(Finding("GPU_DIAG_WARNING", WARNING,
                    f"NVIDIA's diagnostic (`dcgmi diag -r {level}`) did not pass {len(skipped)} test(s), which are "
                    f"not passes: {'; '.join(skipped)[:900]}",
                    "a test DCGM skips does not apply to the GPU or its configuration (DCGM's message says which); "
                    f"run `dcgmi diag -r {level}` by hand for its reasons ({DCGM_GUIDE})"))


def diag_findings(facts, config, add):
    """The findings of NVIDIA's diagnostic on a node.

    + facts: the facts document; ``gpu_diag`` absent or null (not asked for) says nothing
    + config: the settings (``gpu_health_accept``)
    + add: called with each ``Finding``

    >>> from bringup.config import Config
    >>> found = []
    >>> failed = {"category": "Hardware", "test": "memory", "entity_group": "GPU", "entity_id": 0, "status": "fail",
    ...           "warnings": [{"message": "DBE", "severity": 2, "category": 10, "error_id": 18}]}
    >>> diag_findings({"gpu_diag": {"level": 2, "busy": [], "ran": True, "installed": True, "error": None,
    ...                             "results": [failed]}}, Config(), found.append)
    >>> [(finding.code, finding.severity) for finding in found]
    [('GPU_DIAG_FAILED', 'blocker')]
    """
    diag = facts.get("gpu_diag")
    if not diag:
        return
    check_not_run(diag, add)
    if diag.get("error"):
        check_unread(diag, config, add)
    check_results(diag, facts, config, add)


def check_unread(diag, config, add):
    """An answer that could not be read: a failure where dcgmi's exit status says a test
    failed (the status is DCGM's own verdict), else a warning naming what the status means."""
    level, status = diag.get("level"), diag.get("exit_status")
    if status in FAILED_EXITS:
        what = (f"NVIDIA's diagnostic (`dcgmi diag -r {level}`) exited {status} ({FAILED_EXITS[status]}) and its "
                f"answer could not be read ({diag['error']}): which GPU and test failed is not known")
        severity = BLOCKER
        entry = accepted(config, "GPU_DIAG_FAILED", None)
        if entry:
            severity, what = WARNING, f"{what} (accepted by gpu_health_accept {entry}: deploy goes on)"
        add(Finding("GPU_DIAG_FAILED", severity, what,
                    f"NVIDIA's action: drain the node, run `dcgmi diag -r {level}` by hand for the failed test and "
                    f"follow its severity ({DCGM_GUIDE})"))
        return
    meaning = f" (exit {status}: {OTHER_EXITS[status]})" if status in OTHER_EXITS else ""
    add(Finding("GPU_DIAG_UNREAD", WARNING,
                f"NVIDIA's diagnostic (`dcgmi diag -r {level}`) ran, and its answer could not be read: "
                f"{diag['error']}{meaning}: no diagnostic finding is made of it",
                "run `dcgmi diag -r <level> -j` by hand; a host engine that does not answer: `systemctl restart "
                "nvidia-dcgm`; DCGM 4 is the one this release reads"))
