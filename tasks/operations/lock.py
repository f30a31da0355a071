"""Operations around the node's deploy lock (files/deploy_lock.py, facts/deploy_lock.py):
take it first, check before each step that it is still this run's, let it go last.

Each decides from the lock's answer and yields a command only to fail the host, so a
converged node's deploy still lists no change. pyinfra runs an operation's body twice
without ``-y`` (once to list changes, once to run): the lock is taken the first time,
and recognised as this run's own the second; a wait that timed out is not waited again.
"""

import shlex

from pyinfra import host, state
from pyinfra.api import operation

from facts.deploy_lock import DeployLock

# (host, run id) -> the answer of this run's acquire, when it did not get the lock.
_REFUSED = {}


def holder_text(record):
    """Who holds the lock, from its record.

    >>> holder_text({"run_id": "ab12", "pid": 812, "started": "2026-12-01T19:00:00Z", "control": "ops@laptop",
    ...              "node_user": "root"})
    'run ab12 (pid 812, started 2026-12-01T19:00:00Z, from ops@laptop as root)'
    >>> holder_text(None)
    'an unknown process (no record beside the lock)'
    """
    if not record:
        return "an unknown process (no record beside the lock)"
    origin = f", from {record.get('control') or 'an unknown control machine'}"
    as_user = f" as {record['node_user']}" if record.get("node_user") else ""
    return f"run {record.get('run_id', '?')} (pid {record.get('pid', '?')}, started {record.get('started', '?')}" \
           f"{origin}{as_user})"


def fail(message):
    """The command that fails the host with ``message`` (one line on stderr)."""
    return f"echo {shlex.quote(message)} >&2; exit 1"


@operation()
def deploy_lock_taken(lock, run_id, timeout, control="", stage_mark="", stage_dirs=()):
    """
    Take the node's deploy lock for this run, waiting at most ``timeout`` seconds while
    another deploy holds it; then fail the host, nothing changed, naming the holder.
    Once it is held, stage files that killed runs left in ``stage_dirs`` are removed.

    + lock: the lock file on the node (bringup.layout.DEPLOY_LOCK)
    + run_id: this run's id (control/run.py)
    + timeout: seconds to wait (``deploy_lock_timeout``)
    + control: who runs the deploy, for the record (``user@control-host``)
    + stage_mark, stage_dirs: the stage files' mark and the directories they land in

    **Example**:

    .. code:: python

        deploy_lock_taken(lock="/run/gpu-bringup/deploy.lock", run_id=run.run_id(), timeout=600)
    """
    answer = _REFUSED.get((host.name, run_id))
    if answer is None:
        answer = host.get_fact(DeployLock, action="acquire", lock=lock, run_id=run_id, timeout=int(timeout),
                               control=control, stage_mark=stage_mark, stage_dirs=" ".join(stage_dirs)) or {}
    if answer.get("held"):
        record = answer.get("record") or {}
        host.noop(f"deploy lock {lock} held by this run ({run_id}, holder pid {record.get('pid')})")
        return
    _REFUSED[(host.name, run_id)] = answer
    if answer.get("error"):
        yield fail(f"{host.name}: the deploy lock {lock} could not be taken: {answer['error']}; nothing was "
                   "changed on this host")
        return
    yield fail(f"{host.name}: another deploy holds this node's deploy lock {lock}: {holder_text(answer.get('holder'))}; "
               f"waited {answer.get('waited', int(timeout))} s (deploy_lock_timeout); nothing was changed on this "
               "host. Let that deploy finish (a deploy whose control machine died lets go of the lock with its SSH "
               "connection), then run deploy again")


@operation()
def deploy_lock_held(lock, run_id, before=""):
    """
    Go on only while the node's deploy lock is this run's (its record names this run and
    its holder is alive); else fail the host before ``before``.

    + lock, run_id: as for ``deploy_lock_taken``
    + before: the step about to start (for the message)

    **Example**:

    .. code:: python

        deploy_lock_held(lock="/run/gpu-bringup/deploy.lock", run_id=run.run_id(), before="env")
    """
    if (host.name, run_id) in _REFUSED:
        host.noop("the deploy lock was not taken: the host fails at it")
        return
    answer = host.get_fact(DeployLock, action="state", lock=lock, run_id=run_id) or {}
    if answer.get("held"):
        host.noop(f"deploy lock {lock} still held by this run")
        return
    yield fail(f"{host.name}: this deploy no longer holds the node's deploy lock {lock} (now: "
               f"{holder_text(answer.get('record')) if answer.get('locked') else 'nobody'}); stopped before the "
               f"{before or 'next'} step, nothing more is changed; run deploy again")


@operation()
def deploy_lock_released(lock, run_id):
    """
    Let go of the node's deploy lock at the end of this run (only when it is this run's;
    its holder also goes with the run's SSH connection). Nothing is released while
    pyinfra only lists what would change.

    + lock, run_id: as for ``deploy_lock_taken``

    **Example**:

    .. code:: python

        deploy_lock_released(lock="/run/gpu-bringup/deploy.lock", run_id=run.run_id())
    """
    if not getattr(state, "is_executing", False):
        host.noop(f"deploy lock {lock} is let go at the end of the run")
        return
    answer = host.get_fact(DeployLock, action="release", lock=lock, run_id=run_id) or {}
    outcome = "released" if answer.get("released") else "was not this run's: left alone"
    host.noop(f"deploy lock {lock} {outcome}")
    yield from ()  # an operation is a generator, even one that never runs a command
