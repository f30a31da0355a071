"""Operations of the driver step: the locked packages (the other flavour purged in the
same apt run), their holds, initramfs, and the loaded module checked after the install,
with pyinfra's ``server.reboot`` where the plan allows one.

Each decides from facts read when it runs (pyinfra 3.10 caches no fact: every
``host.get_fact`` runs its command again), so a converged node yields no command.
"""

import shlex
import time

import gevent
from pyinfra import host, logger, state
from pyinfra.api import FunctionCommand, StringCommand, operation
from pyinfra.connectors.util import clear_askpass_cache
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.server import Uptime
from pyinfra.operations import server

from bringup.setting_checks import cut
from bringup.driver_reboot import GO, NEEDS_REBOOT, REPLANNED, driver_step_grown, module_mismatch, reboot_decision
from bringup.layout import ProbeInputs
from bringup.plan.model import DriverPlan
from control import fleet
from facts.apt_holds import AptHolds
from facts.node import DriverLayer
from tasks.operations.lock import deploy_lock_taken
from tasks.operations.packages import lock_timeout_option, not_installed

# apt-get without a question: the installer's, needrestart's (Ubuntu restarts services
# itself, asking nothing) and dpkg's about configuration files (the node's are kept).
NONINTERACTIVE = "DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a"
KEEP_CONFIG = "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
# Hosts (by name) whose loaded module is the plan's once the driver check ran: the
# driver's units start only there (the ``_if`` of their operations).
LOADED = {}


def apt_install_command(install, purge, timeout):
    """One apt-get run that installs ``install`` (``name=version``) and purges ``purge``
    (apt's ``name-``): the flavours swap in one transaction, so no step leaves the
    node with neither kernel module package.

    >>> apt_install_command(["nvidia-kernel-open-dkms=580.95.05-1"], ["nvidia-kernel-dkms"], 300).split(" install ")[1]
    '--no-install-recommends --allow-downgrades --allow-change-held-packages --purge nvidia-kernel-open-dkms=580.95.05-1 nvidia-kernel-dkms-'
    """
    arguments = [*install, *(f"{name}-" for name in purge)]
    return (f"{NONINTERACTIVE} apt-get -y {KEEP_CONFIG} {lock_timeout_option(timeout)} install "
            "--no-install-recommends --allow-downgrades --allow-change-held-packages --purge "
            f"{shlex.join(arguments)}")


def removals_guard(install, purge, timeout, host_name):
    """A command that fails the host, nothing changed, when the apt run of
    apt_install_command would remove a package beyond ``purge`` (one that depends on a
    purged one: apt removes it silently); apt's simulation says what it would remove.

    >>> guard = removals_guard(["a=1"], ["b"], 300, "n1")
    >>> "Remv" in guard and "apt-get -s" in guard and "n1: " in guard
    True
    """
    arguments = [*install, *(f"{name}-" for name in purge)]
    planned = " ".join(f"-e {shlex.quote(name)}" for name in purge) or "-e ''"
    failed = shlex.quote(f"{host_name}: the driver's apt run would also remove")
    fix = shlex.quote("(they depend on the packages it replaces); remove or keep them yourself, or set "
                      "driver_manage: false; nothing was installed")
    return (f"extra=$({NONINTERACTIVE} apt-get -s {lock_timeout_option(timeout)} install --no-install-recommends "
            f"--allow-downgrades --allow-change-held-packages --purge {shlex.join(arguments)} 2>/dev/null "
            "| sed -n 's/^\\(Remv\\|Purg\\) \\([^ :]*\\).*/\\2/p' "
            f"| grep -vxF {planned} | tr '\\n' ' '); "
            f"if [ -n \"$extra\" ]; then echo {failed} \"$extra\"{fix} >&2; exit 1; fi")


def installed_of(names, installed):
    """The names dpkg has installed, in order.

    >>> installed_of(["a", "b"], {"b": ["1"]})
    ['b']
    """
    return [name for name in names if name in installed]


@operation()
def driver_packages(install, remove=(), timeout=300):
    """
    Install the driver's packages at the lock's versions (moving them up or down, held
    or not) and purge the other flavour's, in one apt run; nothing when dpkg has them
    all at those versions and none of the others.

    + install: ``name=version`` for every package of the flavour (DriverPlan.install)
    + remove: the other flavour's packages (DriverPlan.remove)
    + timeout: seconds apt waits for dpkg's lock (``deploy_apt_lock_timeout``)

    **Example**:

    .. code:: python

        driver_packages(install=["nvidia-driver-cuda=580.95.05-1", "nvidia-kernel-open-dkms=580.95.05-1"],
                        remove=["nvidia-kernel-dkms"])
    """
    installed = host.get_fact(DebPackages)
    missing, purge = not_installed(install, installed), installed_of(remove, installed)
    if not missing and not purge:
        host.noop(f"{len(install)} driver package(s) installed at the lock's versions")
        return
    if purge:
        yield removals_guard(install, purge, timeout, host.name)
    yield apt_install_command(install, purge, timeout)


@operation()
def packages_held(packages):
    """
    ``apt-mark hold`` the packages apt does not hold yet (installed at the lock's
    versions by ``driver_packages`` just before), so that no ``apt-get upgrade`` nor
    unattended-upgrades moves them.

    + packages: names (DriverPlan.hold)

    **Example**:

    .. code:: python

        packages_held(packages=["nvidia-driver-cuda", "nvidia-kernel-open-dkms"])
    """
    held = set(host.get_fact(AptHolds))
    unheld = [name for name in packages if name not in held]
    if not unheld:
        host.noop(f"{len(packages)} package(s) held")
        return
    yield shlex.join(["apt-mark", "hold", *unheld])


def initramfs_command(kernels=()):
    """``update-initramfs`` for each kernel named (the newest one's, ``-u`` alone, when none
    is), where the node has it (Debian's and Ubuntu's initramfs-tools).

    >>> initramfs_command(["6.1.0-26-amd64", "6.1.0-28-amd64"]).split("; then ")[1].split("; else")[0]
    'update-initramfs -u -k 6.1.0-26-amd64 && update-initramfs -u -k 6.1.0-28-amd64'
    """
    update = " && ".join(shlex.join(["update-initramfs", "-u", "-k", kernel]) for kernel in kernels) or \
        "update-initramfs -u"
    return (f"if command -v update-initramfs >/dev/null 2>&1; then {update}; "
            "else echo 'update-initramfs: not on this node; the modprobe.d blacklist holds from the next boot'; fi")


@operation(is_idempotent=False)
def initramfs_updated(kernels=()):
    """
    ``update-initramfs -u`` where the node has it (Debian's and Ubuntu's initramfs-tools),
    so that a blacklist written to modprobe.d holds from the initramfs on; a node
    without it (a container, dracut) says so and goes on. Run where the blacklist was
    written now or the probe found an initramfs without it (DriverPlan.initramfs: the
    node's state decides, not whether this run wrote the file).

    + kernels: the kernels whose initramfs to update (DriverPlan.initramfs); none: the newest

    **Example**:

    .. code:: python

        initramfs_updated(kernels=["6.1.0-26-amd64"], _if=lambda: blacklist.did_change() or stale)
    """
    yield initramfs_command(kernels)


def _record(status, reason="", name=None, **fields):
    """Record for the fleet summary (bringup/summary.py) what the driver step found."""
    fleet.record(name or host.name, "deploy", driver_reboot={"state": status, "reason": reason, **fields})


def _timed_reconnect(wait, timeout):
    """pyinfra's reconnect-after-reboot (``wait``), recording the host ``unreachable``
    with the time waited when it does not come back: one line, not pyinfra's traceback
    of a callback that raised."""

    def reconnect(state, host):
        started = time.monotonic()
        try:
            return wait(state, host)
        except Exception as error:  # noqa: BLE001 - the wait's TimeoutError, or a connect's own error
            waited = int(time.monotonic() - started)
            reason = (f"did not come back within {waited} s of its reboot (driver_reboot_timeout {timeout} s: "
                      f"{' '.join(str(error).split())}); nothing after the driver step ran")
            _record("unreachable", reason, name=host.name, waited=waited)
            host.log_styled(f"{host.name}: {reason}", fg="red", log_func=logger.error)
            return False

    return reconnect


def uptime_read(host, timeout):
    """The host's uptime in whole seconds, read over its connection now, or None where the
    read fails or takes over ``timeout`` seconds (a connection that dropped, a node going
    down). A plain command, not pyinfra's Uptime fact: a fact whose command fails fails the
    host for the rest of the run (state.fail_hosts), though the next read may confirm the boot.
    """
    try:
        with gevent.Timeout(timeout, TimeoutError):
            ok, output = host.run_shell_command(StringCommand("cut", "-d.", "-f1", "/proc/uptime"), _timeout=timeout)
        return int(output.stdout_lines[0]) if ok and output.stdout_lines else None
    except Exception:  # noqa: BLE001 - a connection that drops again, an answer that is no number: the next try
        return None


def wait_for_reboot(host, uptime_before, timeout, delay=10, interval=2):
    """Reconnect to ``host`` after its reboot until its uptime says it booted again, for
    at most ``timeout`` seconds of a monotonic clock counted from the reboot (pyinfra's
    own wait counts ``timeout / interval`` retries, each also spending the SSH connect
    time: 5432 s for 900 with a 10 s connect). A try started before the deadline may end
    one connect timeout and a 5 s read after it. Raises TimeoutError when the host is not back.
    """
    deadline = time.monotonic() + timeout
    time.sleep(min(delay, timeout))
    clear_askpass_cache(host)  # the host's askpass files died with its session
    host.disconnect()
    while True:
        host.connect(show_errors=False)
        if host.connected:
            uptime = uptime_read(host, max(5, deadline - time.monotonic()))
            if uptime is not None and uptime < uptime_before + delay:
                return
            logger.debug("Host reachable but its uptime says no boot yet, or not readable; trying again")
            # The system still going down, or a connection that dropped: pyinfra's connect
            # does nothing while the host counts as connected, so the next try starts afresh.
            clear_askpass_cache(host)
            host.disconnect()
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"not back after {timeout} s")
        time.sleep(min(interval, left))


def rebooted(timeout, delay=10, interval=2):
    """pyinfra's ``server.reboot`` commands, its uptime read kept for our wait, and its
    wait replaced by ``wait_for_reboot`` (bounded by the clock), the host recorded when
    it does not come back."""
    uptime_before = []

    def capture_uptime(state, host):
        uptime_before.append(host.get_fact(Uptime))

    def wait_and_reconnect(state, host):
        wait_for_reboot(host, uptime_before[0], timeout, delay, interval)

    for command in server.reboot._inner(delay=delay, interval=interval, reboot_timeout=timeout):
        name = command.function.__name__ if isinstance(command, FunctionCommand) else None
        if name == "capture_uptime":
            command = FunctionCommand(capture_uptime, (), {})
        elif name == "wait_and_reconnect":
            command = FunctionCommand(_timed_reconnect(wait_and_reconnect, timeout), (), {})
        yield command


def replanning_failed_line(name, error):
    """The one line that fails host ``name`` when probing or planning it again after its
    reboot raised ``error`` (a facts document the planner refuses, a bug): the error's
    class and message on one line, cut to checks.SHOWN_CHARS.

    >>> replanning_failed_line("n1", RuntimeError("facts.gpus:   expected a list"))
    'n1: rebooted, but planning it again failed: RuntimeError: facts.gpus: expected a list; nothing after the driver step ran; fix: pyinfra n1 fact facts.node.NodeFacts shows the facts, pyinfra --debug the traceback'
    """
    message = cut(" ".join(str(error).split()) or "(no message)")
    return (f"{name}: rebooted, but planning it again failed: {type(error).__name__}: {message}; nothing after the "
            f"driver step ran; fix: pyinfra {name} fact facts.node.NodeFacts shows the facts, pyinfra --debug the "
            "traceback")


def fail(message):
    return f"echo {shlex.quote(message)} >&2; exit 1"


@operation()
def driver_module_loaded(driver: DriverPlan, inputs: ProbeInputs, revalidate, relock, later_steps=True):
    """
    Read the loaded module again after the install (the driver_layer fact) and act on
    ``reboot_decision``: nothing when it is the plan's (the host planned again first when
    the plan was made with none loaded: see the reboot); ``needs reboot`` recorded for
    the fleet summary (``driver_reboot: never``, or the service serving); else reboot
    the host (pyinfra's ``server.reboot``, ``driver_reboot_timeout``), take the deploy
    lock again, probe and plan it again (``revalidate``) and go on only when its module
    is the plan's and nothing blocks it.

    + driver: the DriverPlan
    + inputs: the host's ProbeInputs
    + revalidate: run after the reboot: ``control.host_plan.replanned_host``'s ``() ->
      (facts, NodePlan, error)``, the host planned again under planned_host's guard
    + relock: ``deploy_lock_taken``'s arguments, to take the lock again after the reboot
    + later_steps: whether deploy queued the steps that need the driver (then a
      ``needs reboot`` found only now stops the host before them)

    **Example**:

    .. code:: python

        driver_module_loaded(driver=node.driver, inputs=inputs, revalidate=partial(replanned_host, "deploy"),
                             relock={...})
    """
    layer = host.get_fact(DriverLayer, inputs=inputs)
    if layer is None:
        # A read that failed (pyinfra has failed the host) says nothing of the module: no
        # reboot, nor "needs reboot", is decided on it.
        LOADED[host.name] = False
        yield fail(f"{host.name}: could not read the loaded module again after the install; nothing rebooted "
                   "(the error is above)")
        return
    action, reason = reboot_decision(driver, module_mismatch(layer.get("module"), driver))
    LOADED[host.name] = action == GO
    if action == GO:
        _record("loaded")
        if driver.reboot_for.startswith("loaded: none"):
            # Planned with no module loaded, loaded now without a boot (a package's postinst that
            # started nvidia-persistenced, which loads it through nvidia-modprobe): the node shows
            # what it hid, as after a reboot; planned again the same way.
            loaded = f"loaded {driver.version} {driver.flavour} without a reboot"
            LOADED[host.name] = yield from _planned_again(driver, revalidate, loaded, loaded)
            if not LOADED[host.name]:
                return
        host.noop(f"the loaded module is {driver.version} {driver.flavour}")
        return
    if action == NEEDS_REBOOT:
        _record(NEEDS_REBOOT, reason)
        if later_steps and state.is_executing:
            # Only now known: the service's steps are queued behind this one.
            yield fail(f"{host.name}: needs reboot: {reason}; the steps that need the driver are not run")
            return
        host.noop(f"needs reboot: {reason}")
        return
    _record("rebooting", reason)
    yield from rebooted(driver.reboot_timeout)
    # Runs after the host came back: /run (the deploy lock with it) did not survive the boot.
    yield from deploy_lock_taken._inner(**relock)
    _record("rebooted", reason)
    LOADED[host.name] = yield from _planned_again(driver, revalidate, "rebooted",
                                                  f"rebooted into {driver.version} {driver.flavour}")


def _planned_again(driver, revalidate, event, into):
    """Probe and plan the host again once its module changed (``event``: "rebooted"): True
    when the module is the plan's, nothing blocks and the new plan asks no more of the driver
    step than this run did (driver_step_grown); otherwise the host fails in one line (a
    command), nothing after the driver step runs, and False."""
    facts, fresh, error = revalidate()  # guarded: an exception comes back as ``error``
    if error is not None:
        yield fail(replanning_failed_line(host.name, error))
        return False
    again = module_mismatch(((facts or {}).get("driver_layer") or {}).get("module"), driver) if facts else \
        "the node probe failed"
    if again or not fresh.ok:
        why = again or f"blocked: {', '.join(finding.code for finding in fresh.blockers)}"
        yield fail(f"{host.name}: {event}, but {why}; nothing after the driver step ran")
        return False
    grown = driver_step_grown(driver, fresh.driver)
    if grown:
        # The loaded driver shows what a node without one hid (its NVSwitches: Fabric Manager).
        line = f"{into}; planned again, the driver step now also {grown}; nothing after the driver step ran: run " \
               "deploy again"
        _record(REPLANNED, line)
        yield fail(f"{host.name}: {line}")
        return False
    return True


@operation()
def needs_reboot_failed():
    """
    Last of a deploy: fail the host (exit status 1, the fleet summary's ``needs reboot``)
    when the driver step left it needing a reboot; every step that did not need the
    driver ran before.

    **Example**:

    .. code:: python

        needs_reboot_failed(name="Needs reboot?")
    """
    found = fleet.recorded(host.name, "driver_reboot")
    if found.get("state") != NEEDS_REBOOT:
        host.noop("the loaded module is the installed driver")
        return
    yield fail(f"{host.name}: needs reboot: {found.get('reason', '')}")
