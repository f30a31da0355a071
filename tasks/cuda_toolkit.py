"""The toolkit matching torch's CUDA build, beside any other toolkit, verified."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import apt
from pyinfra.operations.util import any_changed

from tasks.operations.cuda import finish_interrupted_dpkg, nvcc_reports


def _missing(packages):
    """A check, run at execution time, for packages dpkg does not have."""
    return lambda: any(name not in host.get_fact(DebPackages) for name in packages)


@deploy("CUDA toolkit")
def cuda_toolkit(node, repo_changes):
    """
    Install the plan's toolkit packages and check its nvcc.

    + node: the NodePlan (``toolkit``)
    + repo_changes: operations whose change makes apt's lists stale
    """
    toolkit = node.toolkit
    finish_interrupted_dpkg(name="Finish an interrupted dpkg run")
    stale = any_changed(*repo_changes)
    missing = _missing(toolkit.packages)
    apt.update(name="Refresh apt lists (repository changed or packages to install)",
               _if=lambda: stale() or missing())
    apt.packages(name=f"Install CUDA {toolkit.version} compiler and JIT headers",
                 packages=list(toolkit.packages), no_recommends=True)
    nvcc_reports(name=f"Check {toolkit.home}/bin/nvcc reports {toolkit.version}",
                 home=toolkit.home, release=toolkit.version)
