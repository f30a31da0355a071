"""The ``prewarm`` section: the pre-warm manifest and the modules ninja would rebuild (read into ``jit_cache``, facts/sections/jit_cache.py).

Its shell fragment is files/probe.d/prewarm.sh (``probe_prewarm``); docs/facts.md
documents what it parses into.
"""

import json

from facts.probe_framing import ProbeSection, _quoted


def prewarm_state(section):
    """The pre-warm manifest and the modules ninja would rebuild, or None without one."""
    if section is None or section.rc != 0:
        return None
    try:
        state = json.loads(section.lines[-1])
    except (IndexError, json.JSONDecodeError) as error:
        raise ValueError(f"prewarm probe printed no JSON: {_quoted(section.text)}") from error
    if not isinstance(state, dict) or not isinstance(state.get("manifest"), dict) or \
            not isinstance(state.get("stale"), list):
        raise ValueError(f"prewarm probe printed no manifest and stale list: {_quoted(section.lines[-1])}")
    return state


SECTION = ProbeSection(
    name="prewarm",
    group=3,
    raw=("prewarm",),
    keys={},
)
