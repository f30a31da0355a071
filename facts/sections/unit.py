"""The ``unit`` section: the service's systemd unit and the end of its journal -> ``service_unit``.

Its shell fragment is files/probe.d/unit.sh (``probe_unit``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import INT, STR, Items, Optional
from facts.probe_framing import Key, ProbeSection, parse_assignments


def service_unit(by_name):
    """The ``unit``/``unit-journal`` sections -> the service unit's state and, when the
    probe read it, the end of its journal; None where systemd does not run or the
    unit is not loaded.

    >>> from facts.probe_framing import Section
    >>> service_unit({"unit": Section("unit", 0, ("name", "sglang.service"), ["LoadState=loaded",
    ...     "ActiveState=failed", "SubState=failed", "Result=exit-code", "NRestarts=0"]),
    ...     "unit-journal": Section("unit-journal", 0, (), ["RuntimeError: x"])})["journal"]
    ['RuntimeError: x']
    """
    section = by_name.get("unit")
    if section is None or section.rc != 0 or not section.attr:
        return None
    values = parse_assignments(section.text)
    if values.get("LoadState") in (None, "not-found"):
        return None
    restarts = values.get("NRestarts") or ""
    journal = by_name.get("unit-journal")
    lines = list(journal.lines) if journal else []
    while lines and not lines[-1]:
        lines.pop()
    return {
        "name": section.attr[1],
        "active_state": values.get("ActiveState") or "",
        "sub_state": values.get("SubState") or "",
        "result": values.get("Result") or "",
        "restarts": int(restarts) if restarts.isdigit() else 0,
        "journal": lines,
    }


SECTION = ProbeSection(
    name="unit",
    group=1,
    raw=("unit", "unit-journal"),
    keys={
        "service_unit": Key(
            parse=service_unit,
            schema=Optional({
                "name": STR,
                "active_state": STR,
                "sub_state": STR,
                "result": STR,
                "restarts": INT,
                "journal": Items(STR),
            }),
            meaning=(
                "the service's systemd unit (`sglang.service`) and, when it failed or keeps restarting, the end of "
                "its journal; null where systemd does not run or the unit is not loaded"
            ),
        ),
    },
)
