"""The ``toolkits`` section: every CUDA toolkit's nvcc and /usr/local/cuda -> ``toolkits``, ``cuda_symlink``.

Its shell fragment is files/probe.d/toolkits.sh (``probe_toolkits``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import BOOL, OPT_STR, OPT_VERSION, STR, Items
from bringup.layout import toolkit_home
from facts.probe_framing import Key, ProbeSection, parse_nvcc_release


def toolkit_entry(section):
    """A ``toolkit``/``resolved-nvcc`` section -> ``{"home", "version", "nvcc_ok", ...}``."""
    home = section.attr[1] if section.attr else None
    version = parse_nvcc_release(section.text) if section.rc == 0 else None
    entry = {"home": home, "version": version, "nvcc_ok": version is not None}
    if section.rc == 127 and not section.lines:
        entry["error"] = "no bin/nvcc"
    elif version is None:
        entry["error"] = (section.text.strip().splitlines() or [f"nvcc exited {section.rc}"])[-1]
    return entry


def _cuda_symlink(by_name):
    link = by_name.get("cuda-link")
    return (link.text.strip() or None) if link else None


SECTION = ProbeSection(
    name="toolkits",
    group=1,
    raw=("toolkit", "cuda-link"),
    repeated=("toolkit",),
    keys={
        "toolkits": Key(
            parse=lambda by_name: [toolkit_entry(s) for s in by_name["toolkit"]],
            schema=Items({"home": STR, "version": OPT_VERSION, "nvcc_ok": BOOL}),
            meaning=f"every CUDA toolkit on disk (`{toolkit_home('*')}`, `/opt/cuda*`, `/usr` for a distro nvcc)",
            partial=True,
        ),
        "cuda_symlink": Key(
            parse=_cuda_symlink,
            schema=OPT_STR,
            meaning="where `/usr/local/cuda` resolves to",
            example=toolkit_home("12.8"),
        ),
    },
)
