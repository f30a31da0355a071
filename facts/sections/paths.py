"""The ``paths`` section: who may change each place root writes into or runs code from -> ``paths``.

Its shell fragment is files/probe.d/paths.sh (``probe_paths``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import STR, Items, Optional
from facts.probe_framing import Key, ProbeSection, _stat_line


def path_chains(by_name):
    """``path`` sections -> {role: [{"path", "user", "mode", "kind"}, ...]} from the path up to /.

    >>> from facts.probe_framing import Section
    >>> path_chains({"path": [Section("path", 0, ("role", "venv"), ["root 755 directory|/opt", "root 755 directory|/"])]})
    {'venv': [{'path': '/opt', 'user': 'root', 'mode': '755', 'kind': 'directory'}, {'path': '/', 'user': 'root', \
'mode': '755', 'kind': 'directory'}]}
    """
    chains = {}
    for section in by_name.get("path", []):
        role = section.attribute("role")
        if role in chains:
            raise ValueError(f"probe output has two path sections for {role}")
        chain = []
        for line in section.lines:
            if "|" not in line:
                continue
            chain.append(_stat_line(line, f"path line for {role}"))
        chains[role] = chain
    return chains


SECTION = ProbeSection(
    name="paths",
    group=4,
    raw=("path",),
    repeated=("path",),
    keys={
        "paths": Key(
            parse=path_chains,
            schema=Optional({role: Items({"path": STR, "user": STR, "mode": STR, "kind": STR})
                             for role in ("venv", "venv_target", "python", "env_file", "cache_dir")}),
            meaning=("who owns and may write each existing component of the venv path, the env file and the cache "
                     "dir; null only in an older or hand-edited report"),
            partial=True,
        ),
    },
)
