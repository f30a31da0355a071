"""The ``imex`` section: NVIDIA IMEX on a node (files/probe.d/imex.sh ``probe_imex``) ->
the facts document's ``imex`` (docs/facts.md).

NVIDIA IMEX Service for NVLink Networks user's guide
(https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/): the Grace-Blackwell
compute trays of an NVL rack (GB200, GB300) import and export GPU memory across the
NVLink domain through the ``nvidia-imex`` service ("Getting Started with IMEX": its
unit, ``/etc/nvidia-imex/nodes_config.cfg`` with one IP address a line for every node of
the domain) and through IMEX channels ("IMEX Channels": the driver registers the
``nvidia-caps-imex-channels`` character device; ``/dev/nvidia-caps-imex-channels/channelN``
"are not created by default. Failure to do so will result in dependent CUDA APIs
failing with an insufficient permission error": cuMemCreate with a fabric handle
returns CUDA_ERROR_NOT_PERMITTED, NVIDIA/nvbandwidth#39, microsoft/mscclpp#467).

The nodes config's addresses are not reported, only their count: the planner needs
whether the list is empty or lists peers, and a fleet's reports (reports/<host>.json)
need not carry the rack's internal addressing. Whether the GPUs need IMEX is the
planner's (bringup/gpu_archs.py ``needs_imex``), read from the ``gpus`` and ``pci``
sections; this section reports on every node.
"""

from bringup.facts_kinds import BOOL, INT, STR, Items, Optional
from facts.probe_framing import Key, ProbeSection
from facts.sections.driver_layer import driver_packages, unit_states

UNIT = "nvidia-imex"


def imex_unit(section):
    """The ``imex-unit`` section -> the unit's states; None where systemd does not run or
    the probe could not ask it; ``not-found`` where the unit is not installed.

    >>> from facts.probe_framing import Section
    >>> imex_unit(Section("imex-unit", 0, (), ["Id=nvidia-imex.service", "LoadState=loaded",
    ...     "ActiveState=failed", "UnitFileState=enabled"]))["active_state"]
    'failed'
    """
    if section is None or section.rc != 0:
        return None
    return unit_states(section.text, (UNIT,))[UNIT]


def nodes_config(section):
    """The ``imex-nodes`` section -> {"present", "readable", "peers"}.

    >>> from facts.probe_framing import Section
    >>> nodes_config(Section("imex-nodes", 0, (), ["peers=18"]))
    {'present': True, 'readable': True, 'peers': 18}
    >>> nodes_config(Section("imex-nodes", 1, (), []))
    {'present': False, 'readable': False, 'peers': 0}
    """
    if section is None or section.rc not in (0, 2):
        return {"present": False, "readable": False, "peers": 0}
    value = dict(line.partition("=")[::2] for line in section.lines if "=" in line).get("peers", "")
    return {"present": True, "readable": section.rc == 0, "peers": int(value) if value.isdigit() else 0}


def channels(section):
    """The ``imex-channels`` section -> (registered, the channelN names by N).

    >>> from facts.probe_framing import Section
    >>> channels(Section("imex-channels", 0, (), ["registered=yes", "channel=channel1", "channel=channel0"]))
    (True, ['channel0', 'channel1'])
    """
    lines = section.lines if section is not None else []
    names = [line.partition("=")[2] for line in lines if line.startswith("channel=")]
    number = lambda name: int(name[7:]) if name[7:].isdigit() else 1 << 30  # noqa: E731
    return "registered=yes" in lines, sorted(names, key=lambda name: (number(name), name))


def imex(by_name):
    """The ``imex-*`` sections -> ``imex``; None from a probe without them (an older release)."""
    if "imex-channels" not in by_name:
        return None
    packages = by_name.get("imex-packages")
    registered, names = channels(by_name["imex-channels"])
    return {
        "unit": imex_unit(by_name.get("imex-unit")),
        "packages": driver_packages(packages.lines) if packages is not None and packages.rc == 0 else [],
        "nodes_config": nodes_config(by_name.get("imex-nodes")),
        "channels_registered": registered,
        "channels": names,
    }


SECTION = ProbeSection(
    name="imex",
    group=5,
    raw=("imex-unit", "imex-packages", "imex-nodes", "imex-channels"),
    keys={
        "imex": Key(
            parse=imex,
            schema=Optional({
                "unit": Optional({"load_state": STR, "active_state": STR, "unit_file_state": STR}),
                "packages": Items({"name": STR, "version": STR, "held": BOOL}),
                "nodes_config": {"present": BOOL, "readable": BOOL, "peers": INT},
                "channels_registered": BOOL,
                "channels": Items(STR),
            }),
            meaning=(
                "NVIDIA IMEX, which Grace-Blackwell NVL compute trays (GB200, GB300) need instead of Fabric Manager: "
                "the `nvidia-imex` unit (null where systemd does not run), its installed packages, how many peers "
                "`/etc/nvidia-imex/nodes_config.cfg` lists (not the addresses), whether the driver registered "
                "`nvidia-caps-imex-channels` and which `/dev/nvidia-caps-imex-channels/channelN` exist; null (or "
                "absent) from an older probe"
            ),
            example={"unit": {"load_state": "loaded", "active_state": "active", "unit_file_state": "enabled"},
                     "packages": [{"name": "nvidia-imex", "version": "580.95.05-1", "held": True}],
                     "nodes_config": {"present": True, "readable": True, "peers": 18},
                     "channels_registered": True, "channels": ["channel0"]},
        ),
    },
)
