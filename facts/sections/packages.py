"""The ``packages`` section: the installed CUDA repository packages -> ``cuda_packages``.

Its shell fragment is files/probe.d/packages.sh (``probe_packages``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import STR, Optional, Values
from facts.probe_framing import Key, ProbeSection


def deb_packages(section):
    """``dpkg-query`` lines (``status|name|version``) -> {name: version} of installed
    packages (``ii``, or ``hi`` when held); None where dpkg-query does not exist.

    >>> from facts.probe_framing import Section
    >>> deb_packages(Section("deb-packages", 0, (), ["ii |cuda-nvcc-13-0|13.0.88-1", "rc |cuda-nvcc-12-8|12.8.93-1"]))
    {'cuda-nvcc-13-0': '13.0.88-1'}
    """
    if section is None or section.rc != 0:
        return None
    packages = {}
    for line in section.lines:
        fields = line.strip().split("|")
        if len(fields) == 3 and fields[0].strip() in ("ii", "hi"):
            packages[fields[1]] = fields[2]
    return packages


SECTION = ProbeSection(
    name="packages",
    group=2,
    raw=("deb-packages",),
    keys={
        "cuda_packages": Key(
            parse=lambda by_name: deb_packages(by_name.get("deb-packages")),
            schema=Optional(Values(STR)),
            meaning=(
                "installed (`ii`, or `hi` when held) packages named `cuda-*`, `libcu*-X-Y`, `libnvvm-X-Y` or "
                "`datacenter-gpu-manager-*` (NVIDIA's repository names), as `{name: Debian version}` from "
                "`dpkg-query`; null without dpkg"
            ),
            example={"cuda-nvcc-13-0": "13.0.88-1", "libcublas-dev-13-0": "13.0.2.14-1"},
        ),
    },
)
