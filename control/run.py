"""This control run's identity: one id per ``pyinfra`` process, so that what two runs on
one node write (stage files beside a destination, the node's deploy lock record) never
has the same name, and each run can tell its own from another's.

The id is random (no clock, no pid: two control machines may start in the same second
with the same pid), 16 hex digits.
"""

import secrets

RUN_ID = secrets.token_hex(8)

# Stage files are named ``.<name>.gpu-bringup-new-<run id>``: a run removes the stale
# ones of other runs only while it holds the node's deploy lock (tasks/deploy_lock.py).
STAGE_MARK = "gpu-bringup-new"


def run_id():
    """This run's id (tests pin ``RUN_ID``).

    >>> len(run_id()) == 16 and int(run_id(), 16) >= 0
    True
    """
    return RUN_ID
