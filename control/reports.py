"""Where validate.py and deploy.py write their reports: ``reports/`` in the directory
pyinfra runs in, or ``$GPU_BRINGUP_REPORTS``, so that runs side by side (two fleets from
one checkout, a CI job beside an operator) each keep their own ``summary.json``.

Reports are the operator's alone: each is written whole, mode 0600, in a directory made
0700 when we create it (one the operator made keeps its mode), and what they hold passes
through bringup/redact.py first (no env value but the plan's own, no URL credentials).
"""

import json
import os
from pathlib import Path

from bringup import redact
from control.atomic import atomic_write

REPORTS_VARIABLE = "GPU_BRINGUP_REPORTS"
REPORT_MODE, REPORTS_DIR_MODE = 0o600, 0o700


def reports_dir():
    """The reports directory of this run.

    >>> _ = os.environ.pop(REPORTS_VARIABLE, None); str(reports_dir())
    'reports'
    >>> os.environ[REPORTS_VARIABLE] = "/srv/fleet-a/reports"; str(reports_dir())
    '/srv/fleet-a/reports'
    >>> del os.environ[REPORTS_VARIABLE]
    """
    return Path(os.environ.get(REPORTS_VARIABLE) or "reports")


def save(path, document):
    """Write ``document`` (plain data) as JSON to ``path`` whole, 0600, URL credentials
    redacted; the directory is made 0700 when missing.

    >>> import tempfile; from pathlib import Path
    >>> target = Path(tempfile.mkdtemp()) / "reports" / "summary.json"
    >>> save(target, {"url": "https://u:pw@m/x"}); target.read_text()
    '{\\n  "url": "https://<redacted>@m/x"\\n}\\n'
    >>> oct(target.stat().st_mode & 0o777), oct(target.parent.stat().st_mode & 0o777)
    ('0o600', '0o700')
    """
    path = Path(path)
    path.parent.mkdir(mode=REPORTS_DIR_MODE, parents=True, exist_ok=True)
    atomic_write(path, json.dumps(redact.data(document), indent=2) + "\n", mode=REPORT_MODE)


def host_report_path(host):
    """reports/<host>.json of ``host`` in this run's reports directory."""
    return reports_dir() / f"{host}.json"


def drop_host_reports(hosts):
    """Remove the reports/<host>.json of ``hosts`` (those this run planned no report for:
    unreachable, settings refused, planning failed): an earlier run's report would show
    them as they were then, its exit status too. Returns the paths removed.

    >>> import tempfile; from pathlib import Path
    >>> os.environ[REPORTS_VARIABLE] = tempfile.mkdtemp(); _ = host_report_path("n1").write_text("{}")
    >>> [path.name for path in drop_host_reports(["n1", "n2"])], host_report_path("n1").exists()
    (['n1.json'], False)
    >>> del os.environ[REPORTS_VARIABLE]
    """
    removed = []
    for host in hosts:
        target = host_report_path(host)
        try:
            target.unlink()
        except FileNotFoundError:
            continue
        removed.append(target)
    return removed


def save_host_report(host, facts, settings, plan):
    """Write reports/<host>.json: the host's facts (``service_env``'s values redacted),
    its settings (``Config.as_dict()``) and plan (``NodePlan.as_dict()``), both redacted
    by their own ``as_dict``. Returns the path."""
    target = host_report_path(host)
    save(target, {"host": host, "facts": redact.facts(facts), "settings": settings, "plan": plan})
    return target
