"""The toolkit matching torch's CUDA build, at its lock's versions, beside any other toolkit, verified."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import apt
from pyinfra.operations.util import any_changed

from tasks.operations.cuda import finish_interrupted_dpkg, nvcc_reports
from tasks.operations.packages import APT_ENV, apt_lists_refreshed, lock_timeout_option


def not_installed(pins, installed):
    """The pins (``name`` or ``name=version``) dpkg does not have, at that version.

    >>> not_installed(["a=1-1", "b=2-1", "c"], {"a": {"1-1"}, "b": {"1-1"}})
    ['b=2-1', 'c']
    """
    missing = []
    for pin in pins:
        name, _, version = pin.partition("=")
        if name not in installed or (version and version not in installed[name]):
            missing.append(pin)
    return missing


@deploy("CUDA toolkit")
def cuda_toolkit(node, repo_changes):
    """
    Install the plan's toolkit packages at their locked versions (moving them up or
    down to the lock) and check its nvcc.

    + node: the NodePlan (``toolkit``)
    + repo_changes: operations whose change makes apt's lists stale
    """
    toolkit = node.toolkit
    finish_interrupted_dpkg(name="Finish an interrupted dpkg run",
                            packages=[pin.partition("=")[0] for pin in toolkit.pins])
    stale = any_changed(*repo_changes)
    # What the probe saw installed decides (no second dpkg round trip); dpkg is asked only
    # when the probe could not list packages.
    missing = (lambda: toolkit.missing) if toolkit.missing is not None else \
        (lambda: not_installed(toolkit.pins, host.get_fact(DebPackages)))
    apt_lists_refreshed(name="Refresh apt lists (repository changed or packages to install)",
                        repo_url=node.repo.url, timeout=node.apt_lock_timeout, source_file=node.repo.source_file,
                        _if=lambda: stale() or bool(missing()))
    locked = f" at {toolkit.lock}'s versions" if toolkit.lock else ""
    apt.packages(name=f"Install CUDA {toolkit.version} compiler and JIT headers{locked}",
                 packages=list(toolkit.pins), no_recommends=True, allow_downgrades=True,
                 # The .debs (about 500 MB) are not kept once installed: apt-get would keep them.
                 extra_install_args=f"{lock_timeout_option(node.apt_lock_timeout)} -o APT::Keep-Downloaded-Packages=false",
                 _env=APT_ENV)
    nvcc_reports(name=f"Check {toolkit.home}/bin/nvcc reports {toolkit.version}",
                 home=toolkit.home, release=toolkit.version)
