"""Disabling the entries of an apt source file that serve one repository, keeping the
operator's file recoverable: a file of those entries only is renamed (apt reads only
``*.list`` and ``*.sources`` in sources.list.d), a shared file keeps its other entries
and gets the conflicting ones commented out (one-line) or ``Enabled: no`` (deb822).

The edit works on the lines and stanza spans of bringup/apt_sources.py's parser (the one
that reads the node's sources for the plan, modelled on apt's own), and the result is
parsed again before it is returned: apt must read it, and its entries must be the old
ones less those disabled. Anything else is a SourceEditError, never a file apt cannot read.
"""

from bringup.apt_sources import deb822_stanzas, one_line_records, source_entries, source_problems

DISABLED_SUFFIX = ".disabled-by-gpu-bringup"


class SourceEditError(ValueError):
    """The file cannot be edited safely (apt would not read it, before or after)."""


def _serves(entry, uri):
    return any(candidate.rstrip("/") == uri.rstrip("/") for candidate in entry["uris"])


def _note(reason):
    # One line whatever the reason holds: a newline would end the comment.
    return "# Disabled by gpu-bringup (" + " ".join(str(reason).split()) + ")"


def _disabled_stanzas(lines, indexes, reason):
    """``lines`` with each stanza of ``indexes`` disabled: its ``Enabled`` fields (the
    last wins in apt, so an ``Enabled: yes`` below ours would undo it) replaced by one
    ``Enabled: no`` before its first field, with a note."""
    stanzas = deb822_stanzas("\n".join(lines))
    insert, drop = {}, set()
    for index in indexes:
        stanza = stanzas[index]
        first = stanza["fields"][0]["first"]
        end = "\r" if lines[first].endswith("\r") else ""
        insert[first] = [_note(reason) + end, "Enabled: no" + end]
        for field in stanza["fields"]:
            if field["name"] == "enabled":
                drop.update(range(field["first"], field["last"] + 1))
    result = []
    for number, line in enumerate(lines):
        result += insert.get(number, [])
        if number not in drop:
            result.append(line)
    return result


def _commented_lines(lines, numbers, reason):
    """``lines`` with those of ``numbers`` commented out, each whole (apt reads no part of it)."""
    result = list(lines)
    for number in numbers:
        end = "\r" if lines[number].endswith("\r") else ""
        result[number] = f"{_note(reason)}: {lines[number].strip()}{end}"
    return result


def disabled(path, text, uri, reason):
    """``("rename", path + suffix)`` or ``("rewrite", new_text)``, or None when no
    enabled entry of ``path`` serves ``uri``; SourceEditError when apt would not read
    the result.

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
    lines = text.split("\n")
    if path.endswith(".sources"):
        result = _disabled_stanzas(lines, sorted({entry["stanza"] for entry in serving}), reason)
    else:
        numbers = [number for number, entry, _ in one_line_records(text)
                   if entry and _serves(entry, uri)]
        result = _commented_lines(lines, numbers, reason)
    new_text = "\n".join(result)
    if not new_text.endswith("\n"):
        new_text += "\n"
    _check(path, text, new_text, [entry for entry in entries if not _serves(entry, uri)])
    return "rewrite", new_text


def _check(path, old_text, new_text, kept):
    """apt reads ``new_text`` and finds there exactly the ``kept`` entries, unchanged."""
    problems = source_problems(path, new_text)
    if problems:
        before = source_problems(path, old_text)
        detail = ("apt cannot read it now either (" + before[0] + ")") if before else \
            "the edit would leave " + problems[0]
        raise SourceEditError(f"{path}: cannot disable its entries for the CUDA repository safely: {detail}; "
                              "fix the file by hand (sources.list(5)), or move it away, and deploy again")

    if source_entries({path: new_text}) != kept:
        raise SourceEditError(f"{path}: disabling its entries for the CUDA repository would change its other "
                              "entries; disable them by hand (sources.list(5)) and deploy again")
