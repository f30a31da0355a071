"""The ``jit_cache`` section: FlashInfer's compiled JIT modules and the JIT toolchain's digest -> ``jit_cache`` (with the ``prewarm`` section).

Its shell fragment is files/probe.d/jit_cache.sh (``probe_jit_cache``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import ANY, OPT_STR, STR, Items, Optional
from facts.probe_framing import Key, ProbeSection
from facts.sections.prewarm import prewarm_state


def jit_cache(section, prewarm=None, toolchain=None):
    """Compiled JIT modules under the service's FlashInfer workspace, the pre-warm state
    and the digest of the service's JIT toolchain (files/probe.d/jit_cache.sh probe_jit_cache)."""
    cache_dir = section.attr[1] if section is not None and section.attr else None
    modules = []
    if section is not None and section.rc == 0:
        for line in section.lines:
            parts = line.strip().lstrip("./").split("/")
            if len(parts) == 5 and parts[2] == "cached_ops":
                modules.append({"flashinfer": parts[0], "arch": parts[1], "module": parts[3]})
    digest = toolchain.lines[0].strip() if toolchain is not None and toolchain.rc == 0 and toolchain.lines else None
    return {"base": cache_dir, "modules": modules, "prewarm": prewarm, "toolchain": digest}


SECTION = ProbeSection(
    name="jit_cache",
    group=4,
    raw=("toolchain", "jit-cache"),
    keys={
        "jit_cache": Key(
            parse=lambda by_name: jit_cache(by_name.get("jit-cache"), prewarm_state(by_name.get("prewarm")),
                                            by_name.get("toolchain")),
            schema=Optional({
                "base": OPT_STR,
                "modules": Items({"flashinfer": STR, "arch": STR, "module": STR}),
                # The manifest is the service user's file: its shape is the planner's to judge
                # (bringup/prewarm.py), a gap, not a refusal.
                "prewarm": Optional({"manifest": ANY, "stale": ANY}),
                "toolchain": OPT_STR,
            }),
            meaning="FlashInfer's JIT cache under the service's workspace, and the pre-warm's state; null only in an older or hand-edited report",
            partial=True,
        ),
    },
    reads={"jit_cache": ("prewarm", "jit_cache")},
)
