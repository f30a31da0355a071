"""The toolkit matching torch's CUDA build, at its lock's versions, beside any other toolkit, verified."""

from pyinfra.api import deploy
from pyinfra.operations import apt

from tasks.operations.cuda import finish_interrupted_dpkg, nvcc_reports
from tasks.operations.packages import APT_ENV, lock_timeout_option


@deploy("CUDA toolkit")
def cuda_toolkit(node):
    """
    Install the plan's toolkit packages at their locked versions (moving them up or
    down to the lock) and check its nvcc.

    + node: the NodePlan (``toolkit``); apt's lists are fresh (tasks/locks_served.py)
    """
    toolkit = node.toolkit
    finish_interrupted_dpkg(name="Finish an interrupted dpkg run",
                            packages=[pin.partition("=")[0] for pin in toolkit.pins])
    locked = f" at {toolkit.lock}'s versions" if toolkit.lock else ""
    apt.packages(name=f"Install CUDA {toolkit.version} compiler and JIT headers{locked}",
                 packages=list(toolkit.pins), no_recommends=True, allow_downgrades=True,
                 # The .debs (about 500 MB) are not kept once installed: apt-get would keep them.
                 extra_install_args=f"{lock_timeout_option(node.apt_lock_timeout)} -o APT::Keep-Downloaded-Packages=false",
                 _env=APT_ENV)
    nvcc_reports(name=f"Check {toolkit.home}/bin/nvcc reports {toolkit.version}",
                 home=toolkit.home, release=toolkit.version)
