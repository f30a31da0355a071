"""pyinfra inventory: the operator's GPU nodes (inventory/hosts.yml), or the running
sandbox nodes when none are listed.

    pyinfra inventory/gpu.py validate.py
    pyinfra inventory/gpu.py deploy.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from control import fleet  # noqa: E402
from inventory.sources import load_hosts  # noqa: E402

# The fleet summary names hosts pyinfra cannot reach: only this file runs early enough
# to see their connection errors (control/fleet.py).
fleet.watch_connections()

gpu_nodes = load_hosts()

if not gpu_nodes:
    print(
        "inventory/gpu.py: no hosts in inventory/hosts.yml and no sandbox node running; "
        "add hosts there, or start the sandbox with `make sandbox-up`",
        file=sys.stderr,
    )
