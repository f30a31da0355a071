"""Where validate.py and deploy.py write their reports: ``reports/`` in the directory
pyinfra runs in, or ``$GPU_BRINGUP_REPORTS``, so that runs side by side (two fleets from
one checkout, a CI job beside an operator) each keep their own ``summary.json``."""

import os
from pathlib import Path

REPORTS_VARIABLE = "GPU_BRINGUP_REPORTS"


def reports_dir():
    """The reports directory of this run.

    >>> _ = os.environ.pop(REPORTS_VARIABLE, None); str(reports_dir())
    'reports'
    >>> os.environ[REPORTS_VARIABLE] = "/srv/fleet-a/reports"; str(reports_dir())
    '/srv/fleet-a/reports'
    >>> del os.environ[REPORTS_VARIABLE]
    """
    return Path(os.environ.get(REPORTS_VARIABLE) or "reports")
