"""A serving group's rendezvous port tried before anything changes: the head listens on it while
every other member connects to the head's address there, at once (facts/rendezvous.py). Run by the
member whose arrival completes its group (control/groups.py), over the members' own connections,
each fact in a greenlet of its own with its host as pyinfra's context (as pyinfra's get_facts does).

Bounded: a member tries for REACH_SECONDS (each connect CONNECT_SECONDS), the head listens for
LISTEN_SECONDS or until every member came; a group that reaches its head costs about a second.
"""

import gevent
from pyinfra import logger
from pyinfra.context import ctx_host, ctx_state

from facts.rendezvous import RendezvousListen, RendezvousReach

LISTEN_SECONDS = 12
REACH_SECONDS = 10


def _fact(state, name, cls, **arguments):
    target = state.inventory.get_host(name)
    with ctx_state.use(state), ctx_host.use(target):
        return target.get_fact(cls, **arguments)


def check(state, members):
    """(what the head's listener saw, host -> {"reached", "why"} of every other member)."""
    head = members[0]
    # The run's State itself: ``state`` may be pyinfra's context proxy, which cannot be set as context.
    state = ctx_state.get() if ctx_state.isset() else state
    listener = gevent.spawn(_fact, state, head.host, RendezvousListen, port=head.port, members=len(members) - 1,
                            seconds=LISTEN_SECONDS)
    reachers = {member.host: gevent.spawn(_fact, state, member.host, RendezvousReach, address=member.head_address,
                                          port=member.port, seconds=REACH_SECONDS) for member in members[1:]}
    gevent.joinall([listener, *reachers.values()])
    for greenlet in (listener, *reachers.values()):
        if greenlet.exception is not None:
            logger.debug(f"rendezvous check: {type(greenlet.exception).__name__}: {greenlet.exception}")
    failed = {"reached": False, "why": "the check could not run on it"}
    return (listener.value or {"listening": False, "in_use": False, "error": "the check could not run on the head"},
            {host: greenlet.value or failed for host, greenlet in reachers.items()})
