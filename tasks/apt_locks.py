"""Wait for apt's and dpkg's locks before any step that installs packages changes anything."""

from pyinfra.api import deploy

from tasks.operations.packages import apt_unlocked


@deploy("apt locks")
def apt_locks(node):
    """
    Wait (at most ``deploy_apt_lock_timeout`` seconds) while another process holds apt's
    or dpkg's locks, then go on; fail the host, nothing changed, if they stay held.

    + node: the NodePlan (``apt_locks``, ``apt_lock_timeout``)
    """
    apt_unlocked(name="Wait for apt's and dpkg's locks", holders=node.apt_locks, timeout=node.apt_lock_timeout)
