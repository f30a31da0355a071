"""Pre-deployment validation: facts and findings per host; changes nothing.

    pyinfra inventory/gpu.py validate.py

Prints a report per host and writes reports/<host>.json ({"facts", "settings",
"plan"}). A host with blockers fails (non-zero exit) with the blockers named; the
other hosts carry on.
"""

from control.host_plan import planned_host

planned_host("validate")
