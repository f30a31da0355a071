"""The ``apt`` section: apt's sources and the keyrings they name -> ``apt``.

Its shell fragment is files/probe.d/apt.sh (``probe_apt``); docs/facts.md
documents what it parses into.
"""

from bringup.apt_sources import keyring_fingerprints, source_entries
from bringup.facts_kinds import BOOL, OPT_STR, STR, Items, Optional, Values
from facts.probe_framing import Key, ProbeSection, _stat_line


def apt_keyring(section):
    """An ``apt-keyring`` section -> (its primary-key fingerprints, None when unreadable;
    its path chain from the keyring up to /, [] from a probe that did not read it).

    >>> from facts.probe_framing import Section
    >>> apt_keyring(Section("apt-keyring", 1, ("file", "/k.gpg"), ["alice 644 regular file|/k.gpg",
    ...                                                             "root 755 directory|/"]))
    (None, [{'path': '/k.gpg', 'user': 'alice', 'mode': '644', 'kind': 'regular file'}, \
{'path': '/', 'user': 'root', 'mode': '755', 'kind': 'directory'}])
    """
    chain = [_stat_line(line, f"keyring path line for {section.attribute('file')}") for line in section.lines
             if "|" in line]
    keys = [line.strip() for line in section.lines if line.strip() and "|" not in line]
    fingerprints = keyring_fingerprints(keys[-1]) if section.rc == 0 and keys else None
    return fingerprints, chain


def apt_state(by_name):
    """The node's apt sources (every enabled entry), the fingerprints of the keyrings
    they name (None for one that could not be read) and who may change each keyring."""
    files = {section.attribute("file"): section.text for section in by_name.get("apt-source", [])}
    keyrings = {section.attribute("file"): apt_keyring(section) for section in by_name.get("apt-keyring", [])}
    return {"sources": source_entries(files), "keyrings": {path: keys for path, (keys, _) in keyrings.items()},
            "keyring_paths": {path: chain for path, (_, chain) in keyrings.items()}}


SECTION = ProbeSection(
    name="apt",
    group=4,
    raw=("apt-source", "apt-keyring"),
    repeated=("apt-source", "apt-keyring"),
    keys={
        "apt": Key(
            parse=apt_state,
            schema=Optional({
                "sources": Items({
                    "file": STR,
                    "format": STR,
                    "uris": Items(STR),
                    "suites": Items(STR),
                    "signed_by": OPT_STR,
                    "trusted": BOOL,
                }),
                # keyring_paths (keyring -> its path chain, as in paths) is not listed: an older
                # report has none; bringup/plan/repository.py reads it as "not probed" unless it
                # has the documented shape, and then adopts no source.
                "keyrings": Values(Optional(Items(STR))),
            }),
            meaning="apt's sources (every enabled entry of every source file) and the keys of the keyrings they name; null only in an older or hand-edited report",
        ),
    },
)
