"""Readiness where fleets look: one node_exporter textfile per host.

With ``metrics_textfile_dir`` set (a directory on the control machine, the one
node_exporter reads with ``--collector.textfile.directory``), validate.py, deploy.py and
rollback.py write ``gpu_bringup_<host>.prom`` there when the run ends, beside the fleet
summary: the host's verdict, its findings by severity and code, its stack's versions
(as the probe found them and as the plan has them) and the time of the run. Each file is
written whole (a temp file in the same directory, then a rename: node_exporter never
reads half of one), mode 0644. The text is made by ``prometheus_client`` (its exposition
format, escaping and all) and holds no secret: codes, verdicts and versions only.
"""

import os
import re
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

from bringup.setting_checks import Invalid
from bringup.config import SCHEMA
from bringup.findings import BLOCKER, FIX, INFO, WARNING
from bringup.summary import VERDICTS, good_verdicts
from control.atomic import atomic_write

METRICS_MODE = 0o644
DIRECTORY_MODE = 0o755  # a directory this tool makes: node_exporter runs as its own user
SEVERITIES = (BLOCKER, FIX, WARNING, INFO)
STACK_KEYS = ("driver", "cuda", "torch", "sglang", "flashinfer")


def textfile_name(host):
    """The file of ``host`` in the textfile directory: node_exporter reads ``*.prom``;
    characters a file name should not hold become ``_``.

    >>> textfile_name("gpu-node-01"), textfile_name("@local"), textfile_name("ubuntu@10.0.0.5")
    ('gpu_bringup_gpu-node-01.prom', 'gpu_bringup__local.prom', 'gpu_bringup_ubuntu_10.0.0.5.prom')
    """
    return f"gpu_bringup_{re.sub(r'[^A-Za-z0-9._-]', '_', host)}.prom"


def found_stack(facts):
    """The stack's versions as the probe found them ("" for a layer not there).

    >>> found_stack({"driver": {"version": "580.95.05"}, "resolution": {"version": "12.8"},
    ...              "torch": {"version": "2.14.1+cu130"}, "sglang": None})["cuda"]
    '12.8'
    """
    facts = facts or {}

    def version(key):
        return str((facts.get(key) or {}).get("version") or "")

    return {"driver": version("driver"), "cuda": version("resolution"), "torch": version("torch"),
            "sglang": version("sglang"), "flashinfer": version("flashinfer")}


class HostCollector:
    """The metric families of one host's outcome (prometheus_client's collector protocol)."""

    def __init__(self, host, purpose, verdict, findings, stacks, when):
        self.host, self.purpose, self.verdict = host, purpose, verdict
        self.findings, self.stacks, self.when = findings, stacks, when

    def collect(self):
        labels = [self.host, self.purpose]
        verdict = GaugeMetricFamily("gpu_bringup_verdict", "The host's verdict in the last run (1: this verdict)",
                                    labels=["host", "purpose", "verdict"])
        for name in VERDICTS:
            verdict.add_metric([*labels, name], 1 if name == self.verdict else 0)
        yield verdict
        good = GaugeMetricFamily("gpu_bringup_good", "1 when the host's verdict leaves the run's exit status at 0",
                                 labels=["host", "purpose"])
        good.add_metric(labels, 1 if self.verdict in good_verdicts(self.purpose) else 0)
        yield good
        severities = GaugeMetricFamily("gpu_bringup_findings_by_severity",
                                       "Findings of the host's plan with this severity",
                                       labels=["host", "purpose", "severity"])
        counts = {}
        for finding in self.findings:
            key = (finding.get("severity", ""), finding.get("code", ""))
            counts[key] = counts.get(key, 0) + 1
        for severity in SEVERITIES:
            severities.add_metric([*labels, severity], sum(n for (s, _), n in counts.items() if s == severity))
        yield severities
        codes = GaugeMetricFamily("gpu_bringup_findings", "Findings of the host's plan with this severity and code",
                                  labels=["host", "purpose", "severity", "code"])
        for (severity, code), count in sorted(counts.items()):
            codes.add_metric([*labels, severity, code], count)
        yield codes
        stack = InfoMetricFamily("gpu_bringup_stack", "The stack's versions: found (the probe, before this run's "
                                 "changes) and planned (what deploy installs or keeps)", labels=["host", "source"])
        for source, versions in self.stacks.items():
            stack.add_metric([self.host, source], {key: str(versions.get(key) or "") for key in STACK_KEYS})
        yield stack
        when = GaugeMetricFamily("gpu_bringup_last_run_timestamp_seconds",
                                 "When the run that wrote this file ended (Unix time)", labels=["host", "purpose"])
        when.add_metric(labels, self.when)
        yield when


def host_metrics(host, purpose, verdict, findings=(), stacks=None, when=None):
    """The textfile of one host (prometheus_client's text exposition format).

    + host: the inventory name
    + purpose: "validate", "deploy" or "rollback"
    + verdict: the summary's verdict (bringup/summary.py VERDICTS)
    + findings: the plan's findings (dicts with ``severity`` and ``code``)
    + stacks: {"found": {...}, "planned": {...}} of STACK_KEYS (absent for a host never probed)

    >>> text = host_metrics("n1", "validate", "blocked", [{"severity": "blocker", "code": "NO_GPU"}], when=1.0)
    >>> [line for line in text.splitlines() if line.startswith("gpu_bringup_findings{")]
    ['gpu_bringup_findings{code="NO_GPU",host="n1",purpose="validate",severity="blocker"} 1.0']
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HostCollector(host, purpose, verdict, list(findings or ()), dict(stacks or {}),
                                    time.time() if when is None else when))
    return generate_latest(registry).decode()


def make_directory(directory):
    """Make ``directory`` and its missing parents, each 0755 whatever the umask (under
    root's 077 a plain ``mkdir -p`` makes them 0700 and node_exporter reads nothing);
    directories that exist are left as they are."""
    directory = Path(directory)
    missing = [path for path in (directory, *directory.parents) if not path.exists()]
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        handle = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)  # never chmod through a link
        try:
            os.fchmod(handle, DIRECTORY_MODE)
        finally:
            os.close(handle)


def write_host_metrics(directory, host, text):
    """Write ``text`` as ``<directory>/gpu_bringup_<host>.prom``, whole, 0644 (a missing
    directory made 0755). Returns the path."""
    make_directory(directory)
    target = Path(directory) / textfile_name(host)
    atomic_write(target, text, mode=METRICS_MODE)
    return target


def planned_stack(config, plan, found):
    """The stack's versions as the plan has them: the driver deploy installs
    (``driver_manage``) else the one found, the toolkit of the plan, the venv's release
    settings for a managed venv, else what the external venv holds.

    >>> from bringup.config import Config
    >>> planned_stack(Config(), {"driver": {"manage": False}, "toolkit": {"version": "13.0"},
    ...                          "venv": {"managed": True}}, {"driver": "580.95.05"})["sglang"]
    '0.5.23'
    """
    driver, venv = plan.get("driver") or {}, plan.get("venv") or {}
    managed = venv.get("managed")
    return {"driver": str(driver.get("version") or "") if driver.get("manage") else found.get("driver", ""),
            "cuda": str((plan.get("toolkit") or {}).get("version") or ""),
            "torch": config.stack_torch if managed else found.get("torch", ""),
            "sglang": config.stack_sglang if managed else found.get("sglang", ""),
            "flashinfer": config.stack_flashinfer if managed else found.get("flashinfer", "")}


def stacks(facts, config, plan):
    """{"found": ..., "planned": ...} for the fleet's record of a planned host."""
    found = found_stack(facts)
    return {"found": found, "planned": planned_stack(config, plan, found)}


def textfile_dir(data):
    """The host's ``metrics_textfile_dir`` from its raw host data ("" when unset or
    invalid: an invalid value is the host's settings error already).

    >>> textfile_dir({"metrics_textfile_dir": "/srv/textfile"}), textfile_dir({})
    ('/srv/textfile', '')
    """
    try:
        return SCHEMA["metrics_textfile_dir"](data.get("metrics_textfile_dir") or "")
    except Invalid:
        return ""


def write_run_metrics(purpose, outcomes, rows, when=None):
    """Write the textfile of every host whose ``metrics_textfile_dir`` is set; returns
    one line per file that could not be written (the run's summary says them)."""
    verdicts = {row["host"]: row["verdict"] for row in rows}
    problems = []
    for outcome in outcomes:
        directory = outcome.get("metrics_dir")
        if not directory or outcome["host"] not in verdicts:
            continue
        plan = outcome.get("plan") or {}
        text = host_metrics(outcome["host"], outcome.get("purpose") or purpose, verdicts[outcome["host"]],
                            plan.get("findings") or (), outcome.get("stacks"), when)
        try:
            write_host_metrics(directory, outcome["host"], text)
        except OSError as error:
            problems.append(f"{outcome['host']}: metrics_textfile_dir={directory!r}: {textfile_name(outcome['host'])} "
                            f"could not be written: {error.strerror}; make it a directory this user can write")
    return problems
