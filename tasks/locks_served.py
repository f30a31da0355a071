"""Before the driver, toolkit or DCGM step installs anything: apt's lists fresh, and every
locked version they will install served by the node's repository."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.deb import DebPackages
from pyinfra.operations.util import any_changed

from tasks.operations.packages import apt_lists_refreshed, locked_versions_served, not_installed


@deploy("Locked packages served")
def locked_packages_served(node, repo_changes):
    """
    Refresh the CUDA repository's apt lists when it changed or a locked package is to
    be installed, then fail the host, nothing installed, when they do not serve a
    locked version (the driver and toolkit steps install from these lists).

    + node: the NodePlan (``driver``, ``toolkit``, ``dcgm``, ``repo``)
    + repo_changes: operations whose change makes apt's lists stale
    """
    # Every package these steps install (a toolkit without a lock names bare packages):
    # the lists are refreshed for them; the locked versions among them are checked.
    wanted = [*(node.driver.install if node.runs("driver") and node.driver.manage else ()),
              *(node.toolkit.pins if node.runs("toolkit") else ()),
              *(node.dcgm.pins if node.runs("dcgm") and node.dcgm.install else ())]
    if not wanted:
        return
    stale = any_changed(*repo_changes)
    apt_lists_refreshed(name="Refresh apt lists (repository changed or NVIDIA packages to install)",
                        repo_url=node.repo.url, timeout=node.apt_lock_timeout, source_file=node.repo.source_file,
                        _if=lambda: stale() or bool(not_installed(wanted, host.get_fact(DebPackages))))
    locks = node.locked_pins()
    if locks:
        locked_versions_served(name="Check the repository serves every locked version to install", locks=locks,
                               repo_url=node.repo.url, fix=node.repo.lock_command)
