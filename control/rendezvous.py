"""A serving group's rendezvous port tried before anything changes: the head listens on it while
every other member connects to the head's address there, at once (facts/rendezvous.py). Run by the
member whose arrival completes its group (control/groups.py), over the members' own connections,
each fact in a greenlet of its own (as pyinfra's get_facts does), and never failing a host: a
command that fails is a check that could not run, said as such.

Bounded: a member tries for REACH_SECONDS (each connect CONNECT_SECONDS), the head listens for
LISTEN_SECONDS or until every member came, and the whole check is given up after
GIVE_UP_SECONDS; a group that reaches its head costs about a second. The head does not listen
while its service is active or starting (``head_unit_state``): the port is then the service's
(torch's TCP store), which the members connect to as it is.
"""

import gevent
from pyinfra import logger
from pyinfra.api.facts import get_fact
from pyinfra.context import ctx_host, ctx_state

from facts.rendezvous import CONNECT_SECONDS, RendezvousListen, RendezvousReach

LISTEN_SECONDS = 16
# Longer than the listener's wait, so that a member still tries once a slow head is listening.
REACH_SECONDS = 14
GIVE_UP_SECONDS = LISTEN_SECONDS + 2 * CONNECT_SECONDS + 10
# The head's unit states in which the port is its service's.
SERVICE_HOLDS_PORT = ("active", "activating", "reloading")


def _fact(state, name, cls, **arguments):
    """The fact of host ``name``, or None when it could not be had (no host is failed for it)."""
    target = state.inventory.get_host(name)
    try:
        with ctx_state.use(state), ctx_host.use(target):
            return get_fact(state, target, cls, kwargs=arguments, apply_failed_hosts=False)
    except Exception as error:  # noqa: BLE001 - a check that cannot run says so; it stops no host
        logger.debug(f"{name}: rendezvous check: {type(error).__name__}: {error}")
        return None


def check(state, members, head_unit_state=""):
    """(what the head's listener saw, or None when it could not run; host -> {"reached", "why"}
    of every other member, None for one whose try could not run)."""
    head = members[0]
    # The run's State itself: ``state`` may be pyinfra's context proxy, which cannot be set as context.
    state = ctx_state.get() if ctx_state.isset() else state
    if head_unit_state in SERVICE_HOLDS_PORT:
        listener = None
        listen = {"listening": False, "in_use": True, "service": head_unit_state, "error": ""}
    else:
        listener = gevent.spawn(_fact, state, head.host, RendezvousListen, port=head.port, members=len(members) - 1,
                                seconds=LISTEN_SECONDS)
    reachers = {member.host: gevent.spawn(_fact, state, member.host, RendezvousReach, address=member.head_address,
                                          port=member.port, seconds=REACH_SECONDS) for member in members[1:]}
    spawned = [greenlet for greenlet in (listener, *reachers.values()) if greenlet is not None]
    gevent.joinall(spawned, timeout=GIVE_UP_SECONDS)
    late = [greenlet for greenlet in spawned if not greenlet.ready()]
    # The node's command goes on to its own bound (the listener's LISTEN_SECONDS); only the wait ends.
    gevent.killall(late, block=False)
    given_up = f"given up after {GIVE_UP_SECONDS} s (the check's bound)"
    if late:
        logger.debug(f"rendezvous check: {given_up}: {len(late)} of {len(spawned)} command(s) still running")
    if listener is not None:
        listen = ({"listening": False, "in_use": False, "error": given_up} if listener in late else
                  listener.value if listener.successful() else None)
    return listen, {host: ({"reached": None, "why": given_up} if greenlet in late else
                           greenlet.value if greenlet.successful() else None) for host, greenlet in reachers.items()}
