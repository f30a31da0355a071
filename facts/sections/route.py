"""The ``route`` section: the interface and source address this node reaches an address through
(files/probe.d/route.sh ``probe_route``) -> the facts document's ``route`` (docs/facts.md); null
when no address was asked about (the ``PROBE_ROUTE_TO`` input, bringup/layout.py
``ProbeInputs.route_to``: a serving group's head).

The probe resolves a host name as the node does (``getent ahosts``: its first address) and asks
the kernel for its route with iproute2, ``ip -j route get <address>``: a JSON list of one route
(``dst``, ``gateway`` where it goes through one, ``dev``, ``prefsrc``, ``type`` ``local`` for an
address of the node itself), or, from an iproute2 without JSON for routes, the text form
(``<dst> via <gateway> dev <dev> src <prefsrc> uid 0``, ``local <dst> dev lo src ...``). Both
shapes are those iproute2 6.1.0 printed on Debian 12 (tests/fixtures/route/README.md).
"""

import json

from bringup.facts_kinds import BOOL, OPT_STR, STR, Optional
from facts.probe_framing import Key, ProbeSection

# Text of iproute2's a fact quotes at most (an error such as "RTNETLINK answers: Network is
# unreachable").
ERROR_LIMIT = 200
# The words of the text form that take a value (iproute2 ip/iproute.c print_route).
VALUED = {"via": "gateway", "dev": "dev", "src": "prefsrc"}
# Route types of an address that is no host's (rtnetlink's RTN_BROADCAST, RTN_MULTICAST,
# RTN_ANYCAST as iproute2 names them): `ip route get` answers them with rc 0 and an interface.
NO_HOST = ("broadcast", "multicast", "anycast")


def route_json(text):
    """``ip -j route get``'s answer -> ``{"dst", "gateway", "dev", "prefsrc", "type"}`` of its
    first route, or None.

    >>> route_json('[{"dst":"8.8.8.8","gateway":"192.0.2.1","dev":"eth0","prefsrc":"192.0.2.2","flags":[]}]')["dev"]
    'eth0'
    >>> route_json("[]"), route_json("[oops"), route_json('{"dev": "eth0"}')
    (None, None, None)
    """
    try:
        routes = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(routes, list) or not routes or not isinstance(routes[0], dict):
        return None
    return {key: str(routes[0][key]) if routes[0].get(key) is not None else None
            for key in ("dst", "gateway", "dev", "prefsrc", "type")}


def route_text(text):
    """``ip route get``'s text answer -> the same fields as ``route_json``, or None.

    >>> route_text("8.8.8.8 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0 \\n    cache ")["gateway"]
    '192.0.2.1'
    >>> route_text("local 127.0.0.1 dev lo src 127.0.0.1 uid 0 \\n    cache <local> ")["type"]
    'local'
    >>> route_text("RTNETLINK answers: Network is unreachable") is None
    True
    """
    words = (text.splitlines() or [""])[0].split()
    route = dict.fromkeys(("dst", "gateway", "dev", "prefsrc", "type"))
    if words and words[0] in ("local", "broadcast", "unreachable", "multicast"):
        route["type"], words = words[0], words[1:]
    if not words or "dev" not in words:
        return None
    route["dst"] = words[0]
    for word, value in zip(words, words[1:]):
        if word in VALUED:
            route[VALUED[word]] = value
    return route


def route(by_name):
    """The ``route-address`` and ``route`` sections -> ``route``; None when no address was asked
    about (neither section).

    >>> from facts.probe_framing import Section
    >>> route({"route-address": Section("route-address", 0, ("to", "head-0"), ["10.0.0.1"]),
    ...        "route": Section("route", 0, ("format", "json"),
    ...                         ['[{"dst":"10.0.0.1","dev":"ib0","prefsrc":"10.0.0.2","flags":[]}]'])})
    {'to': 'head-0', 'address': '10.0.0.1', 'interface': 'ib0', 'source': '10.0.0.2', 'gateway': None, 'local': False, 'error': None}
    >>> route({}) is None
    True
    """
    asked, answer = by_name.get("route-address"), by_name.get("route")
    if asked is None:
        return None
    to = asked.attr[1] if asked.attr and asked.attr[0] == "to" else ""
    fact = {"to": to, "address": None, "interface": None, "source": None, "gateway": None, "local": False,
            "error": None}
    if asked.rc != 0 or not asked.text.strip():
        fact["error"] = ("the probe refused the address" if asked.rc == 64 else
                         "getent is not on the node" if asked.rc == 127 else
                         f"the node does not resolve {to}")
        return fact
    fact["address"] = asked.lines[0].strip()
    if answer is None:
        fact["error"] = "no route was asked for (an address the probe would not pass to ip)"
        return fact
    found = None
    if answer.rc == 0:
        found = route_json(answer.text) if answer.attr == ("format", "json") else route_text(answer.text)
    if found is None:
        said = " ".join(answer.text.split())[:ERROR_LIMIT]
        fact["error"] = ("ip is not on the node" if answer.rc == 127 else
                         f"ip route get {fact['address']} exited {answer.rc}" + (f": {said}" if said else ""))
        return fact
    if found["type"] in NO_HOST:
        # The kernel answers these with a route (rc 0) through an interface: the address is a
        # network's broadcast or a multicast group, no member's.
        fact["error"] = f"{fact['address']} is a {found['type']} address, not a host's"
        return fact
    fact.update(interface=found["dev"], source=found["prefsrc"], gateway=found["gateway"],
                local=found["type"] == "local")
    return fact


SECTION = ProbeSection(
    name="route",
    # One or two short processes, beside the file reads of group 1.
    group=1,
    raw=("route-address", "route"),
    keys={
        "route": Key(
            parse=route,
            schema=Optional({"to": STR, "address": OPT_STR, "interface": OPT_STR, "source": OPT_STR,
                             "gateway": OPT_STR, "local": BOOL, "error": OPT_STR}),
            meaning=(
                "the route this node takes to the address asked about (a serving group's head): the name or "
                "address asked, the address the node resolves it to, the interface (`dev`) and source address "
                "(`src`) of `ip route get`, the gateway where there is one, whether the address is the node's own, "
                "or why it could not be said (`error`: not resolved, unreachable); null (or absent) when no address "
                "was asked about"
            ),
            example={"to": "gpu-head-01", "address": "10.20.0.11", "interface": "ens1f0np0", "source": "10.20.0.12",
                     "gateway": None, "local": False, "error": None},
        ),
    },
)
