"""Operations around apt itself: wait for its locks before anything is changed, and
refresh its lists failing loudly when the CUDA repository does not answer."""

import shlex
from pathlib import Path

from pyinfra import host
from pyinfra.api import operation
from pyinfra.facts.deb import DebPackages

from facts.dpkg import AptUnserved
from tasks.operations.progress import StreamedCommand

APT_LOCKS_SH = (Path(__file__).resolve().parents[2] / "files" / "apt-locks.sh").read_text()

# The environment of every apt-get the tasks run (pyinfra's apt operations get it as
# ``_env``). needrestart, which Ubuntu's server and cloud images install, runs from
# apt's DPkg::Post-Invoke hook after every install and asks which services to restart
# (a dialog on 22.04 and later). NEEDRESTART_SUSPEND makes the hook return at once
# (/usr/lib/needrestart/apt-pinvoke: "packages have been installed but needrestart is
# suspended", then exit 0); should
# it run anyway, NEEDRESTART_MODE=a answers for it without a prompt (needrestart(1),
# "-r a"). Source: needrestart 3.5-5ubuntu2 (jammy) and 3.6-7ubuntu4 (noble), their
# apt-pinvoke and README.md (github.com/liske/needrestart).
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "NEEDRESTART_MODE": "a", "NEEDRESTART_SUSPEND": "1"}


def apt_env_prefix(env=None):
    """APT_ENV as a shell command's assignments.

    >>> apt_env_prefix()
    'DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a NEEDRESTART_SUSPEND=1'
    """
    return " ".join(f"{name}={shlex.quote(value)}" for name, value in (env or APT_ENV).items())


def lock_timeout_option(seconds):
    """apt-get's own wait for dpkg's lock, as an argument.

    >>> lock_timeout_option(300)
    '-o DPkg::Lock::Timeout=300'
    """
    return f"-o DPkg::Lock::Timeout={int(seconds)}"


def holders_text(holders):
    """'pid 812 (/usr/bin/unattended-upgrade) on /var/lib/dpkg/lock-frontend', one per holder.

    >>> holders_text([{"lock": "/var/lib/dpkg/lock", "pid": 9, "command": "apt-get install x"}])
    'pid 9 (apt-get install x) on /var/lib/dpkg/lock'
    """
    return "; ".join(f"pid {h['pid']} ({h['command'] or '?'}) on {h['lock']}" for h in holders)


@operation()
def apt_unlocked(holders, timeout):
    """
    Wait until nobody holds apt's or dpkg's locks (unattended-upgrades does for minutes on
    a node's first boot), at most ``timeout`` seconds, saying so while it waits; then fail
    the host. It runs before anything is written, so a host that times out is left as it
    was.

    + holders: the lock holders the node probe saw (the facts' ``apt_locks``); none: no wait
    + timeout: seconds to wait (``deploy_apt_lock_timeout``)

    **Example**:

    .. code:: python

        apt_unlocked(holders=facts["apt_locks"], timeout=300)
    """
    if not holders:
        host.noop("apt's and dpkg's locks are free")
        return
    timeout = int(timeout)
    give_up = shlex.quote(
        f"{host.name}: apt is still locked after {timeout} s; nothing was changed on this host. Let the holder "
        "finish (unattended-upgrades runs for minutes after a first boot) and run deploy again, or raise "
        "deploy_apt_lock_timeout")
    yield StreamedCommand(
        f"{APT_LOCKS_SH}\n"
        "describe() { apt_lock_holders | awk '{ lock = $1; pid = $2; $1 = \"\"; $2 = \"\"; sub(/^ +/, \"\"); "
        "sub(/ +$/, \"\"); printf \"%spid %s (%s) on %s\", (NR > 1 ? \"; \" : \"\"), pid, $0, lock }'; }\n"
        f"timeout={timeout} waited=0 said=\n"
        "while held=$(describe) && [ -n \"$held\" ]; do\n"
        "  if [ \"$waited\" -ge \"$timeout\" ]; then\n"
        f"    echo {give_up}: \"$held\" >&2; exit 1\n"
        "  fi\n"
        "  if [ -z \"$said\" ] || [ $((waited % 30)) -eq 0 ]; then\n"
        "    echo \"apt-locks: held by $held; waiting ($waited of $timeout s, deploy_apt_lock_timeout)\"; said=1\n"
        "  fi\n"
        "  sleep 1; waited=$((waited + 1))\n"
        "done\n"
        "echo \"apt-locks: free after $waited s\"")


def only_source(source_file):
    """apt-get options that read ``source_file`` alone and keep every other list as it is.

    >>> only_source("/etc/apt/sources.list.d/nvidia-cuda.sources")
    '-o Dir::Etc::sourcelist=/etc/apt/sources.list.d/nvidia-cuda.sources -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0'
    """
    return (f"-o Dir::Etc::sourcelist={shlex.quote(source_file)} -o Dir::Etc::sourceparts=- "
            "-o APT::Get::List-Cleanup=0")


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


@operation(is_idempotent=False)
def apt_lists_refreshed(repo_url, timeout=300, source_file=""):
    """
    ``apt-get update``, failing the host with one clear line when the CUDA repository
    (``repo_url``) did not answer: apt itself only warns and exits 0 then, and the
    install after it would fail with a misleading "version not found". With
    ``source_file``, only that source's lists are refreshed: every node of a fleet does
    not fetch the distribution's indexes again for a toolkit install.

    + repo_url: the CUDA repository's URL as its source names it
    + timeout: seconds apt waits for dpkg's lock (``deploy_apt_lock_timeout``)
    + source_file: the apt source file of the CUDA repository ("" for every source)

    **Example**:

    .. code:: python

        apt_lists_refreshed(repo_url="https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/",
                            source_file="/etc/apt/sources.list.d/nvidia-cuda.sources")
    """
    url = repo_url.rstrip("/")
    failed = shlex.quote(f"{host.name}: the CUDA repository {repo_url} did not answer apt-get update")
    fix = shlex.quote("check that it (or the mirror cuda_repo_url names) answers from the node, then run deploy "
                      "again; nothing was installed")
    only = f"{only_source(source_file)} " if source_file else ""
    yield (f"out=$({apt_env_prefix()} apt-get {lock_timeout_option(timeout)} {only}update 2>&1); rc=$?; "
           "printf '%s\\n' \"$out\"; "
           f"why=$(printf '%s\\n' \"$out\" | grep -E '^(W|E): Failed to fetch ' | grep -F {shlex.quote(url)} | head -n 1); "
           f"if [ -n \"$why\" ]; then echo {failed}: \"$why\"\\; {fix} >&2; exit 1; fi; "
           "exit $rc")


@operation()
def system_packages(packages, timeout=300):
    """
    Install the distribution's packages a step needs, refreshing every apt list first
    when one is missing (the toolkit step refreshes only the CUDA repository's), nothing
    when all are installed.

    + packages: package names
    + timeout: seconds apt waits for dpkg's lock (``deploy_apt_lock_timeout``)

    **Example**:

    .. code:: python

        system_packages(packages=["python3-venv", "g++"])
    """
    installed = host.get_fact(DebPackages)
    missing = [name for name in packages if name not in installed]
    if not missing:
        host.noop(f"{', '.join(packages)} installed")
        return
    wait = lock_timeout_option(timeout)
    yield f"{apt_env_prefix()} apt-get {wait} update"
    yield (f"{apt_env_prefix()} apt-get -y {wait} install --no-install-recommends "
           f"{shlex.join(missing)}")


@operation()
def locked_versions_served(locks, repo_url, fix):
    """
    Fail the host, before anything is installed, when apt's lists do not serve a
    locked ``name=version`` this deploy is about to install (dpkg already holds the
    others): a lock resolved against another index than the node's repository would
    otherwise fail half-way, the driver installed and the toolkit not.

    + locks: ``{lock file: [name=version, ...]}``, the pins each lock makes deploy install
    + repo_url: the CUDA repository (or mirror) the node's source names
    + fix: the command that resolves the locks against it

    **Example**:

    .. code:: python

        locked_versions_served(locks={"files/locks/cuda-13.0-debian12-x86_64.txt": ["cuda-nvcc-13-0=13.0.88-1"]},
                               repo_url="https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/",
                               fix="make lock-cuda lock-driver")
    """
    installed = host.get_fact(DebPackages)
    wanted = {lock: not_installed(pins, installed) for lock, pins in locks.items()}
    pins = [pin for lock_pins in wanted.values() for pin in lock_pins]
    if not pins:
        host.noop("every locked version is installed")
        return
    unserved = host.get_fact(AptUnserved, pins=pins, repo_url=repo_url)
    if unserved is None:
        message = (f"{host.name}: apt's lists hold nothing of {repo_url} (its source is missing or was never "
                   "fetched): run deploy with the repo step (deploy_steps); no package was installed")
        yield f"echo {shlex.quote(message)} >&2; exit 1"
        return
    unserved = set(unserved)
    if not unserved:
        host.noop(f"apt serves the {len(pins)} locked version(s) to install")
        return
    named = "; ".join(f"{lock}: {' '.join(pin for pin in lock_pins if pin in unserved)}"
                      for lock, lock_pins in wanted.items() if unserved & set(lock_pins))
    message = (f"{host.name}: {repo_url} does not serve what the locks pin ({named}); resolve the locks against "
               f"it ({fix}, docs/locks.md) and deploy again; no package was installed")
    yield f"echo {shlex.quote(message)} >&2; exit 1"
