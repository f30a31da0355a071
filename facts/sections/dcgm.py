"""The ``dcgm`` section: NVIDIA DCGM's host engine (files/probe.d/dcgm.sh ``probe_dcgm``) ->
the facts document's ``dcgm`` (docs/facts.md).

The ``nvidia-dcgm`` unit NVIDIA's ``datacenter-gpu-manager-4-core`` ships (DCGM's installation
guide, docs.nvidia.com/datacenter/dcgm/latest/installation.html: ``systemctl --now enable
nvidia-dcgm``), and whether the host engine it runs started before DCGM's packages were last
unpacked: NVIDIA's postinst restarts nothing, so an engine started before an upgrade or a
downgrade keeps running the replaced binaries until it is restarted. The DCGM step
(bringup/plan/dcgm.py) reads it: validate names the start or restart deploy makes.
"""

from bringup.facts_kinds import BOOL, STR, Optional
from facts.probe_framing import Key, ProbeSection
from facts.sections.driver_layer import unit_states

UNIT = "nvidia-dcgm"
# Seconds of doubt: the boot time the kernel gives is whole seconds and a file's time is
# read in whole seconds, so an engine started this close before the last unpack is not
# called stale (an engine deploy restarted right after apt would be, at every run).
SLACK = 2


def dcgm_unit(section):
    """The ``dcgm-unit`` section -> the unit's states; None where systemd does not run or
    the probe could not ask it; ``not-found`` where DCGM is not installed.

    >>> from facts.probe_framing import Section
    >>> dcgm_unit(Section("dcgm-unit", 0, (), ["Id=nvidia-dcgm.service", "LoadState=loaded",
    ...     "ActiveState=active", "UnitFileState=disabled", "MainPID=42"]))["unit_file_state"]
    'disabled'
    """
    if section is None or section.rc != 0:
        return None
    return unit_states(section.text, (UNIT,))[UNIT]


def number(text):
    """A whole number of the probe's, or None.

    >>> number("12"), number(""), number("1e3")
    (12, None, None)
    """
    return int(text) if text.isdigit() else None


def engine_predates_packages(section):
    """The ``dcgm-engine`` section -> whether the running host engine started more than
    ``SLACK`` seconds before DCGM's newest package unpack (False where it does not run or a
    time is missing).

    >>> from facts.probe_framing import Section
    >>> old = ["started_ticks=1000", "btime=1700000000", "hz=100", "unpacked=1700000100"]
    >>> engine_predates_packages(Section("dcgm-engine", 0, (), old))
    True
    >>> engine_predates_packages(Section("dcgm-engine", 0, (), [*old[:3], "unpacked=1700000011"]))
    False
    """
    if section is None or section.rc != 0:
        return False
    values = {}
    for line in section.lines:
        key, _, value = line.partition("=")
        if key == "unpacked":
            values[key] = max(values.get(key) or 0, number(value) or 0) or None
        else:
            values[key] = number(value)
    ticks, boot, hz, unpacked = (values.get(key) for key in ("started_ticks", "btime", "hz", "unpacked"))
    if None in (ticks, boot, unpacked):
        return False
    return boot + ticks / (hz or 100) + SLACK < unpacked


def dcgm(by_name):
    """The ``dcgm-*`` sections -> ``dcgm``; None from a probe without them (an older release)."""
    if "dcgm-engine" not in by_name:
        return None
    return {"unit": dcgm_unit(by_name.get("dcgm-unit")),
            "engine_predates_packages": engine_predates_packages(by_name["dcgm-engine"])}


SECTION = ProbeSection(
    name="dcgm",
    group=5,
    raw=("dcgm-unit", "dcgm-engine"),
    keys={
        "dcgm": Key(
            parse=dcgm,
            schema=Optional({
                "unit": Optional({"load_state": STR, "active_state": STR, "unit_file_state": STR}),
                "engine_predates_packages": BOOL,
            }),
            meaning=(
                "NVIDIA DCGM's host engine: the `nvidia-dcgm` unit (null where systemd does not run; `load_state` "
                "`not-found` without DCGM) and whether the engine it runs started before DCGM's packages "
                "(`datacenter-gpu-manager-*`) were last unpacked, so runs the replaced binaries; null (or absent) "
                "from an older probe"
            ),
            example={"unit": {"load_state": "loaded", "active_state": "active", "unit_file_state": "enabled"},
                     "engine_predates_packages": False},
        ),
    },
)
