"""Disabling the entries of an apt source file that serve one repository, keeping the
operator's file recoverable: a file of those entries only is renamed (apt reads only
``*.list`` and ``*.sources`` in sources.list.d), a shared file keeps its other entries
and gets the conflicting ones commented out (one-line) or ``Enabled: no`` (deb822).
"""

from facts.apt_sources import source_entries

DISABLED_SUFFIX = ".disabled-by-gpu-bringup"


def _serves(entry, uri):
    return any(candidate.rstrip("/") == uri.rstrip("/") for candidate in entry["uris"])


def disabled(path, text, uri, reason):
    """``("rename", path + suffix)`` or ``("rewrite", new_text)``, or None when no
    enabled entry of ``path`` serves ``uri``.

    >>> disabled("/etc/apt/sources.list.d/cuda.list", "deb [signed-by=/k] http://r/ /\\n", "http://r/", "x")
    ('rename', '/etc/apt/sources.list.d/cuda.list.disabled-by-gpu-bringup')
    >>> print(disabled("/etc/apt/sources.list", "deb http://deb.debian.org/debian bookworm main\\n"
    ...                "deb http://r/ /\\n", "http://r/", "conflicts with gpu-bringup's")[1], end="")
    deb http://deb.debian.org/debian bookworm main
    # Disabled by gpu-bringup (conflicts with gpu-bringup's): deb http://r/ /
    """
    entries = source_entries({path: text})
    serving = [entry for entry in entries if _serves(entry, uri)]
    if not serving:
        return None
    if len(serving) == len(entries) and not path.endswith("/sources.list"):
        return "rename", path + DISABLED_SUFFIX
    if path.endswith(".sources"):
        stanzas = text.split("\n\n")
        for entry in serving:
            stanzas[entry["stanza"]] = f"# Disabled by gpu-bringup ({reason})\nEnabled: no\n" + stanzas[entry["stanza"]]
        return "rewrite", "\n\n".join(stanzas)
    lines = {entry["line"] for entry in serving}
    rewritten = [f"# Disabled by gpu-bringup ({reason}): {line.strip()}" if line.strip() in lines else line
                 for line in text.splitlines()]
    return "rewrite", "\n".join(rewritten) + "\n"
