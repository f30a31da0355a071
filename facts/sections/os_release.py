"""The ``os`` section: ``/etc/os-release`` and ``uname -m`` -> the document's ``os``.

Its shell fragment is files/probe.d/os.sh (``probe_os``); docs/facts.md
documents what it parses into.
"""

import shlex

from bringup.facts_kinds import OPT_STR
from facts.probe_framing import Key, ProbeSection, Section


def parse_os_release(text, machine):
    """``/etc/os-release`` and ``uname -m`` -> ``{"id", "version_id", "arch"}``.

    >>> parse_os_release('ID=debian\\nVERSION_ID="12"', "x86_64")
    {'id': 'debian', 'version_id': '12', 'arch': 'x86_64'}
    """
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            parsed = shlex.split(value) if value else [""]
            values[key.strip()] = parsed[0] if parsed else ""
    return {"id": values.get("ID"), "version_id": values.get("VERSION_ID"), "arch": machine.strip() or None}


def _os(by_name):
    if "os-release" not in by_name:
        raise ValueError("probe output has no os-release section")
    return parse_os_release(by_name["os-release"].text, by_name.get("uname", Section("uname", 0)).text)


SECTION = ProbeSection(
    name="os",
    group=1,
    raw=("os-release", "uname"),
    keys={
        "os": Key(
            parse=_os,
            schema={"id": OPT_STR, "version_id": OPT_STR, "arch": OPT_STR},
            meaning="`/etc/os-release` and `uname -m`",
            example={"id": "debian", "version_id": "12", "arch": "x86_64"},
            required=True,
        ),
    },
)
