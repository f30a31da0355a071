"""pyinfra's floor for N operations: N no-change ``files.directory`` operations (one
fact round trip each, nothing to do). bench/deploy_cost.py and bench/fleet_scale.py run
it beside a converged deploy.py with the same number of operations.

    pyinfra -y INVENTORY bench/floor_deploy.py --data floor_operations=25
"""

from pyinfra import host
from pyinfra.operations import files

for number in range(int(host.data.get("floor_operations") or 25)):
    files.directory(name=f"Floor operation {number + 1}", path="/tmp")
