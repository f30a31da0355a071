"""pyinfra inventory: the operator's GPU nodes (inventory/hosts.yml), or the hosts
registered in inventory/hosts.d/ when none are listed (inventory/sources.py).

    pyinfra inventory/gpu.py validate.py
    pyinfra inventory/gpu.py deploy.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from control import fleet  # noqa: E402
from inventory.sources import HOSTS_DIR, HOSTS_FILE, load_hosts  # noqa: E402

# The fleet summary names hosts pyinfra cannot reach: only this file runs early enough
# to see their connection errors (control/fleet.py).
fleet.watch_connections()

gpu_nodes = load_hosts()

if not gpu_nodes:
    print(
        f"inventory/gpu.py: no hosts in {HOSTS_FILE} and none registered in {HOSTS_DIR}/; "
        "list your nodes in the first (README \"Running it on your nodes\"), or start the demo's node "
        "with `make sandbox-up`",
        file=sys.stderr,
    )
