"""One deploy at a time per node: the node-wide deploy lock, taken before anything else
and held for the whole run (files/deploy_lock.py: a holder process that lives as long as
the run's SSH connection), checked before each step, let go at the end."""

import getpass
import socket

from pyinfra.api import deploy

from bringup.layout import DEPLOY_LOCK
from control import run
from tasks.operations.lock import deploy_lock_held, deploy_lock_released, deploy_lock_taken


def control_identity():
    """Who runs this deploy, for the lock's record: ``user@control-host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"{user}@{socket.gethostname()}"


@deploy("Deploy lock")
def deploy_lock(node):
    """
    Take the node's deploy lock for this run (wait at most ``deploy_lock_timeout`` s
    for another deploy's, then fail the host, nothing changed, naming the holder).

    + node: the NodePlan (``layout``, ``deploy_lock_timeout``)
    """
    deploy_lock_taken(name="Take the node's deploy lock", lock=DEPLOY_LOCK, run_id=run.run_id(),
                      timeout=node.deploy_lock_timeout, control=control_identity(), stage_mark=run.STAGE_MARK,
                      stage_dirs=node.layout.stage_dirs)


def deploy_lock_check(step):
    """Before ``step``: the lock is still this run's, or the host stops here."""
    deploy_lock_held(name=f"Deploy lock still this run's ({step})", lock=DEPLOY_LOCK, run_id=run.run_id(),
                     before=step)


@deploy("Deploy lock released")
def deploy_lock_release():
    """Let go of the node's deploy lock at the end of the run."""
    deploy_lock_released(name="Let go of the node's deploy lock", lock=DEPLOY_LOCK, run_id=run.run_id())
