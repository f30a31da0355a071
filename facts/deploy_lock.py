"""The node's deploy lock (files/deploy_lock.py): take it, read it, let it go.

Not a read-only fact like the others: ``acquire`` and ``release`` change the lock (and
nothing else). They run through pyinfra's fact machinery because that is how a command's
output reaches an operation while it decides (tasks/operations/lock.py): the lock's
operations then count as no change, so a converged node's second deploy still lists
none.

    pyinfra inventory/gpu.py fact facts.deploy_lock.DeployLock action=state lock=/run/gpu-bringup/deploy.lock run_id=x
"""

import json
from pathlib import Path

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from facts.system_python import PYTHON, script_command

SCRIPT = Path(__file__).resolve().parent.parent / "files" / "deploy_lock.py"


def lock_command(action, lock, run_id, timeout=0, control="", stage_mark="", stage_dirs=()):
    """The one shell command that runs files/deploy_lock.py on the node. The script travels
    inside it (facts/system_python.py): the lock is taken before the helpers are installed.

    >>> command = lock_command("state", "/run/gpu-bringup/deploy.lock", "0123456789abcdef")
    >>> command.startswith("if [ -x /usr/bin/python3 ]; then /usr/bin/python3 -I -c ")
    True
    >>> command.split(" -- ")[1].split(" ; ")[0]
    'state --lock /run/gpu-bringup/deploy.lock --run-id 0123456789abcdef --timeout 0'
    """
    arguments = [action, "--lock", lock, "--run-id", run_id, "--timeout", str(int(timeout))]
    if control:
        arguments += ["--control", control]
    if stage_mark:
        arguments += ["--stage-mark", stage_mark]
    for directory in stage_dirs:
        arguments += ["--stage-dir", directory]
    return script_command(SCRIPT, arguments, json.dumps({"error": f"{PYTHON} is missing; install python3"}))


class DeployLock(FactBase):
    """
    Returns what files/deploy_lock.py printed for ``action`` (acquire, state, release):
    ``{"held", "record": {"run_id", "pid", "pid_start", "started", "control", "node_user"}, ...}``
    (``release`` adds ``stale``: the recorded pid was no longer the holder, nothing signalled).

    + action: acquire (waits at most ``timeout`` s), state, or release
    + lock: the lock file on the node
    + run_id: this run's id (control/run.py)
    + timeout, control, stage_mark, stage_dirs (space-separated): for acquire
    """

    def command(self, action, lock, run_id, timeout=0, control="", stage_mark="", stage_dirs=""):
        return lock_command(action, lock, run_id, timeout, control, stage_mark, stage_dirs.split())

    def process(self, output):
        try:
            result = json.loads(output[-1])
        except (ValueError, IndexError) as error:
            raise FactProcessError(f"could not read the deploy lock's answer: {error}") from error
        if not isinstance(result, dict):
            raise FactProcessError("could not read the deploy lock's answer: not an object")
        return result
