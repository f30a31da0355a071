"""The fleet summary of a validate.py or deploy.py run: one row per host, a verdict
each, grouped by verdict (pure: plain data in, rows, a document and text out).

control/fleet.py collects what a run saw of each host (reached or not and why, its
facts and plan, each operation's outcome) and calls ``summary_document`` and
``render`` at the end of the run.

A host's outcome (``HostOutcome`` as plain data)::

    {"host": "gpu-01", "purpose": "deploy", "reached": True, "connect_error": "",
     "settings_error": "", "plan_error": "", "probe_failed": False, "facts": {...}, "plan": {...NodePlan.as_dict()},
     "operations": [{"name": "CUDA toolkit | Install ...", "status": "changed", "error": ""}],
     "driver_reboot": {"state": "needs reboot", "reason": "loaded: none; installed: 580.95.05 open", "waited": 0},
     "service_serving": {"state": "serving", "reason": "/health answered 200 after 41 s", "waited": 41}}

``service_serving`` is what deploy's readiness gate found (tasks/operations/serving.py):
``{"state": "serving" | "failed" | "timed out", "reason", "waited"}``; absent when the
service is not enabled (or the run ended before the gate).

``driver_reboot`` is what the driver step found of the loaded module after its install
(tasks/operations/driver.py): ``loaded``, ``needs reboot``, ``rebooting``, ``rebooted``
or ``unreachable`` (the host did not come back from its reboot; ``waited`` seconds).

Operation status: ``changed``, ``unchanged``, ``error`` or ``not run``.
"""

import re

from bringup import redact, release, serving
from bringup.driver_reboot import REPLANNED
from bringup.findings import BLOCKER, FIX
from bringup.steps import STEP_OF_TASK

# Verdicts, in the order the table groups them: what went well first, so the
# hosts that need a look end the table, just above the lines that say why.
READY, NEEDS_DEPLOY, DEPLOYED, DRY_RUN = "ready", "needs deploy", "deployed", "dry run"
# serving: deployed, and SGLang's health endpoint answered deploy's readiness gate;
# deployed stays for a host whose service is not enabled (nothing to wait for).
SERVING = "serving"
# needs reboot: deployed, but the driver installed is not the loaded module until the
# host boots (driver_reboot: never, or its service serving); exit status 1.
NEEDS_REBOOT = "needs reboot"
# rolled back: deploy's gate failed and the host is back on its previous release,
# serving (service_rollback: on-failure; exit status 1: the change failed), or
# rollback.py put it back (its good outcome).
ROLLED_BACK = "rolled back"
BLOCKED, FAILED, STOPPED, UNREACHABLE, NOT_EXAMINED = "blocked", "failed", "stopped", "unreachable", "not examined"
VERDICTS = (READY, NEEDS_DEPLOY, DRY_RUN, SERVING, DEPLOYED, ROLLED_BACK, NEEDS_REBOOT, BLOCKED, FAILED, STOPPED,
            UNREACHABLE, NOT_EXAMINED)
# The verdicts that leave the run's exit status at 0: validate's "needs deploy" is a
# host deploy can bring up (nothing blocks it).
GOOD = (READY, NEEDS_DEPLOY, DRY_RUN, SERVING, DEPLOYED)


def good_verdicts(purpose):
    """The verdicts that leave ``purpose``'s exit status at 0: for rollback.py, a host
    rolled back is what was asked.

    >>> ROLLED_BACK in good_verdicts("rollback"), ROLLED_BACK in good_verdicts("deploy")
    (True, False)
    """
    return GOOD + (ROLLED_BACK,) if purpose == "rollback" else GOOD

CHANGED, UNCHANGED, ERROR, NOT_RUN = "changed", "unchanged", "error", "not run"
NOT_REACHED = "not reached: the run stopped before its first operation; nothing ran on this host"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def step_of(operation_name):
    """The deploy step an operation belongs to, from pyinfra's ``Task | operation`` name.

    >>> step_of("CUDA toolkit | Install CUDA 13.0 compiler")
    'toolkit'
    >>> step_of("Refuse n1: deploy refused")
    'Refuse n1: deploy refused'
    """
    task, separator, _ = operation_name.partition(" | ")
    return STEP_OF_TASK.get(task, task) if separator else operation_name


def error_line(lines):
    """The line that says best why a command failed: apt's first ``E:`` line, else the
    last line that is not blank (colour codes removed), else "".

    >>> error_line(["Reading package lists...", "E: Failed to fetch http://m/a.deb  Connection refused",
    ...             "E: Unable to fetch some archives"])
    'E: Failed to fetch http://m/a.deb  Connection refused'
    >>> error_line(["build-venv: building", "", "error: Failed to download `torch`"])
    'error: Failed to download `torch`'
    >>> error_line([])
    ''
    """
    clean = [ANSI.sub("", line).strip() for line in lines]
    apt_errors = [line for line in clean if line.startswith("E: ")]
    if apt_errors:
        return apt_errors[0]
    filled = [line for line in clean if line]
    return filled[-1] if filled else ""


def _gpus(facts):
    """'8x SM 12.0', '4x SM 10.0 + 4x SM 12.0', or 'none'."""
    counts = {}
    for gpu in facts.get("gpus") or []:
        counts[gpu.get("compute_cap")] = counts.get(gpu.get("compute_cap"), 0) + 1
    return " + ".join(f"{count}x SM {sm}" for sm, count in sorted(counts.items(), key=lambda item: str(item[0]))) \
        or "none"


def _toolkit(facts, plan):
    """What the service resolves now -> the plan's toolkit ('12.8 -> 13.0'; '13.0' when equal)."""
    now = (facts.get("resolution") or {}).get("version") or "none"
    planned = (plan.get("toolkit") or {}).get("version") or "-"
    return planned if now == planned else f"{now} -> {planned}"


def _codes(plan, severity):
    return [finding["code"] for finding in plan.get("findings") or [] if finding["severity"] == severity]


NOT_SERVING = "SERVICE_NOT_SERVING_READY"


def service_cell(plan):
    """What the plan leaves serving: ``enabled`` (deploy enables and starts the unit),
    ``not enabled (service_enable)`` (the operator's choice), or ``not serving-ready
    (service_model)`` (no model: the unit is written, not enabled); "-" without a plan's
    service.

    >>> service_cell({"service": {"enable": False}, "findings": [{"code": NOT_SERVING, "severity": "warning"}]})
    'not serving-ready (service_model)'
    >>> service_cell({"service": {"enable": True}, "findings": []}), service_cell({})
    ('enabled', '-')
    """
    if any(finding["code"] == NOT_SERVING for finding in plan.get("findings") or []):
        return "not serving-ready (service_model)"
    service = plan.get("service")
    if not service:
        return "-"
    return "enabled" if service.get("enable") else "not enabled (service_enable)"


def changed_steps(operations):
    """'repo 3, env 2' (the steps whose operations changed something, with how many), or
    'nothing'.

    >>> changed_steps([{"name": "CUDA toolkit | a", "status": "changed"},
    ...                {"name": "CUDA toolkit | b", "status": "changed"},
    ...                {"name": "CUDA environment | c", "status": "unchanged"}])
    'toolkit 2'
    """
    counts = {}
    for operation in operations:
        if operation["status"] == CHANGED:
            step = step_of(operation["name"])
            counts[step] = counts.get(step, 0) + 1
    return ", ".join(f"{step} {count}" for step, count in counts.items()) or "nothing"


def _first_error(operations):
    return next((op for op in operations if op["status"] == ERROR), None)


def verdict(outcome, executed=True):
    """A host's verdict and the reason behind it (one line, "" when all is well).

    + outcome: the host's outcome (module docstring)
    + executed: whether the run executed operations (False for --dry)
    """
    if not outcome.get("reached", True):
        return UNREACHABLE, outcome.get("connect_error") or "could not connect"
    if outcome.get("settings_error"):
        return FAILED, outcome["settings_error"].splitlines()[0]
    if outcome.get("plan_error"):
        return FAILED, outcome["plan_error"]
    plan = outcome.get("plan")
    if plan is None:
        if outcome.get("probe_failed"):
            return FAILED, "the node probe failed (its output is in the log above)"
        return NOT_EXAMINED, "the run ended before this host was examined"
    blockers = _codes(plan, BLOCKER)
    if outcome.get("purpose") == "rollback":
        # A rollback is refused only by the blockers about the paths it writes.
        blockers = [code for code in blockers if code in release.ROLLBACK_BLOCKERS]
    if blockers:
        return BLOCKED, ", ".join(blockers)
    operations = outcome.get("operations") or []
    reboot = outcome.get("driver_reboot") or {}
    if reboot.get("state") == UNREACHABLE:
        return UNREACHABLE, reboot.get("reason") or "did not come back from its reboot"
    rolled = outcome.get("service_rollback")
    if rolled:
        # Before the failed operation: the rollback's own line says more (both causes).
        rolled_verdict, why = release.rollback_outcome(rolled, outcome.get("service_serving"))
        if rolled_verdict:
            return rolled_verdict, why
    failed = _first_error(operations)
    if failed and reboot.get("state") == NEEDS_REBOOT and step_of(failed["name"]) == "driver":
        # The driver step stopped the host itself, before the steps that need the driver.
        return NEEDS_REBOOT, reboot.get("reason", "")
    if failed and reboot.get("state") == REPLANNED and step_of(failed["name"]) == "driver":
        # Rebooted, and planned again with the driver loaded, it had more to do than this run
        # planned (a bare HGX node's Fabric Manager): healthy, stopped there; the next run converges.
        return STOPPED, reboot.get("reason", "")
    stopped = outcome.get("group_stopped") or {}
    if failed and stopped.get("reason"):
        # Failed for its serving group's sake: the line names the member at fault and its cause.
        return FAILED, f"{failed['name']}: {stopped['reason']}"
    if failed:
        return FAILED, f"{failed['name']}: {failed.get('error') or 'failed (see the log above)'}"
    if outcome.get("purpose") == "rollback":
        return (DRY_RUN, "") if not executed else (FAILED, "no rollback ran (see the log above)")
    if outcome.get("purpose") != "deploy":
        return (NEEDS_DEPLOY if _codes(plan, FIX) else READY), ""
    if not executed:
        return DRY_RUN, ""
    if outcome.get("failed"):
        return FAILED, "pyinfra failed this host (see the log above)"
    pending = [op for op in operations if op["status"] == NOT_RUN]
    if pending and len(pending) == len(operations):
        # --serial: the hosts after the one that stopped the run were planned, never reached.
        return STOPPED, NOT_REACHED
    if pending:
        return STOPPED, f"the run stopped before {pending[0]['name']}"
    if reboot.get("state") == NEEDS_REBOOT:
        return NEEDS_REBOOT, reboot.get("reason", "")
    if serving.serving_of(outcome.get("service_serving"))[0]:
        return SERVING, ""
    return DEPLOYED, ""


def host_row(outcome, executed=True):
    """The table row of one host (a dict of short strings and code lists)."""
    facts, plan = outcome.get("facts") or {}, outcome.get("plan") or {}
    state, reason = verdict(outcome, executed)
    driver = facts.get("driver") or {}
    row = {
        "host": outcome["host"],
        "gpus": _gpus(facts) if facts else "-",
        "driver": driver.get("version") or ("none" if facts else "-"),
        "toolkit": _toolkit(facts, plan) if plan else "-",
        "verdict": state,
        "blockers": _codes(plan, BLOCKER),
        "fixes": _codes(plan, FIX),
        "service": service_cell(plan),
        "reason": reason,
    }
    not_serving = [f["message"] for f in plan.get("findings") or [] if f["code"] == NOT_SERVING]
    if not_serving:
        row["not_serving_ready"] = not_serving[0]
    if outcome.get("purpose") in ("deploy", "rollback"):
        operations = outcome.get("operations") or []
        row["changed"] = changed_steps(operations) if executed and operations else "-"
    if state == BLOCKED:
        row["blocker_details"] = [{"code": f["code"], "message": f["message"], "fix": f["fix"]}
                                  for f in plan.get("findings") or [] if f["severity"] == BLOCKER]
    return row


def summary_document(purpose, outcomes, executed=True, stopped=""):
    """The run's summary: rows grouped by verdict, counts, and ``ok`` (every host good);
    redacted (bringup/redact.py: an operation's error line may quote a URL's credentials),
    for the printed table and reports/summary.json alike.

    + purpose: "validate" or "deploy"
    + outcomes: every targeted host's outcome
    + executed: whether operations ran (False for --dry)
    + stopped: why pyinfra stopped the run early ("" when it did not)
    """
    rows = [host_row(dict(outcome, purpose=outcome.get("purpose") or purpose), executed) for outcome in outcomes]
    rows.sort(key=lambda row: (VERDICTS.index(row["verdict"]), row["host"]))
    good = good_verdicts(purpose)
    counts = {}
    for row in rows:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    return redact.data({
        "purpose": purpose,
        "executed": executed,
        "stopped": stopped,
        "ok": bool(rows) and all(row["verdict"] in good for row in rows) and not stopped,
        "counts": counts,
        "hosts": rows,
    })


COLUMNS = (("host", "host"), ("gpus", "GPUs"), ("driver", "driver"), ("toolkit", "CUDA now -> plan"),
           ("verdict", "verdict"), ("blockers", "blockers"), ("fixes", "fixes"), ("service", "service"),
           ("changed", "deploy changed"))


def _cell(value, most=3):
    """A table cell: a list shows its first ``most`` items and how many more there are
    (reports/summary.json keeps them all).

    >>> _cell(["A", "B", "C", "D", "E"]), _cell([]), _cell("x")
    ('A, B, C +2', '-', 'x')
    """
    if isinstance(value, (list, tuple)):
        shown = ", ".join(value[:most]) or "-"
        return f"{shown} +{len(value) - most}" if len(value) > most else shown
    return str(value)


def render(document):
    """The summary as text: the table, then one line per host that needs a look."""
    rows = document["hosts"]
    columns = [(key, title) for key, title in COLUMNS if any(key in row for row in rows)]
    table = [[title for _, title in columns]] + [[_cell(row.get(key, "-")) for key, _ in columns] for row in rows]
    widths = [max(len(line[index]) for line in table) for index in range(len(columns))]
    lines = [f"== fleet summary: {document['purpose']}.py, {len(rows)} host(s)"]
    for index, line in enumerate(table):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    counts = ", ".join(f"{count} {name}" for name, count in document["counts"].items())
    lines.append(f"-- {counts or 'no host'}: {outcome_line(document)}")
    if document.get("stopped"):
        lines.append(f"-- the run stopped early: {document['stopped']}")
    for row in rows:
        if row["verdict"] == BLOCKED:
            for blocker in row.get("blocker_details", []):
                lines.append(f"{row['host']}: [BLOCKER] {blocker['code']}: {blocker['message']}")
                lines.append(f"{' ' * len(row['host'])}  fix: {blocker['fix']}")
        elif row["verdict"] not in good_verdicts(document["purpose"]) or row["verdict"] == ROLLED_BACK:
            lines.append(f"{row['host']}: {row['verdict']}: {row['reason']}")
        elif row.get("not_serving_ready"):
            # Good for the exit status (deploy can run, or ran), yet nothing will serve.
            lines.append(f"{row['host']}: not serving-ready: {row['not_serving_ready']}")
    return "\n".join(lines)


def outcome_line(document):
    """What the run's exit status says (docs/fleets.md: exit status).

    >>> outcome_line({"ok": True, "purpose": "deploy", "hosts": [{"verdict": "deployed"}]})
    'every host deployed (exit status 0)'
    >>> outcome_line({"ok": False, "purpose": "validate", "hosts": [{"verdict": "ready"}, {"verdict": "blocked"}]})
    '1 of 2 host(s) need a look (exit status 1)'
    >>> outcome_line({"ok": False, "purpose": "deploy", "hosts": []})
    'no host was targeted, nothing ran (pyinfra exits 0)'
    """
    if not document["hosts"]:
        # A --limit that matches no host (pyinfra warns, runs nothing and exits 0).
        return "no host was targeted, nothing ran (pyinfra exits 0)"
    if document["ok"]:
        if document["purpose"] == "rollback":
            return "every host rolled back (exit status 0)" if document.get("executed", True) else \
                "dry run: nothing changed (exit status 0)"
        if document["purpose"] == "deploy":
            return "every host deployed (exit status 0)" if document.get("executed", True) else \
                "dry run: nothing changed (exit status 0)"
        return "no host is blocked, failed or unreachable (exit status 0)"
    bad = sum(row["verdict"] not in good_verdicts(document["purpose"]) for row in document["hosts"])
    return f"{bad} of {len(document['hosts'])} host(s) need a look (exit status 1)"


def purpose_from_argv(argv):
    """"validate", "deploy" or "rollback" when the command line runs validate.py, deploy.py or
    rollback.py, else None.

    >>> purpose_from_argv(["pyinfra", "-y", "inventory/gpu.py", "deploy.py"])
    'deploy'
    >>> purpose_from_argv(["pyinfra", "inventory/gpu.py", "fact", "facts.node.NodeFacts"]) is None
    True
    """
    for argument in argv[1:]:
        name = argument.rsplit("/", 1)[-1]
        if name in ("validate.py", "deploy.py", "rollback.py"):
            return name[:-3]
    return None
