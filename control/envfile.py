"""The control side's one reader and writer of ``KEY=value`` files the deploy shares
with the operator: the service's EnvironmentFile (systemd.exec(5)) and
``/etc/environment`` (pam_env.conf(5)). Both take ``KEY=value`` lines, ``#`` comments
and blank lines; neither expands ``$VAR``; one pair of surrounding quotes is removed.

Writing keeps every line the operator wrote, sets the keys the plan manages to the
plan's values in place, and appends the ones missing under a header.
"""

import re

ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*?)\s*$")


def _unquote(value):
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if value[0] == '"':
            inner = inner.replace('\\"', '"').replace("\\\\", "\\")
        return inner
    return value


def assignment(line):
    """``(key, value)`` of an assignment line, or None for comments, blanks and noise.

    >>> assignment('PATH="/usr/bin:/bin"'), assignment("# CUDA_HOME=/x"), assignment("; c")
    (('PATH', '/usr/bin:/bin'), None, None)
    """
    stripped = line.strip()
    if not stripped or stripped[0] in "#;":
        return None
    match = ASSIGNMENT.match(line)
    return (match["key"], _unquote(match["value"])) if match else None


def parse_env_file(text):
    """The assignments of an env file as systemd reads them (a later line wins).

    >>> parse_env_file('# c\\nA=1\\n; c\\nB="x y"\\nC=$PATH:/bin\\nnot an assignment\\nA=2\\n')
    {'A': '2', 'B': 'x y', 'C': '$PATH:/bin'}
    """
    values = {}
    for line in text.splitlines():
        found = assignment(line)
        if found:
            values[found[0]] = found[1]
    return values


def render(key, value, quoted=False):
    """One assignment line.

    >>> render("PATH", "/a:/b", quoted=True)
    'PATH="/a:/b"'
    """
    return f'{key}="{value}"' if quoted else f"{key}={value}"


def merge(text, managed, header, quoted=()):
    """``text`` with every key of ``managed`` set to its value: the first assignment of
    a managed key is rewritten in place, later ones are dropped (they would win), the
    missing ones are appended under ``header``; every other line stays as it was.

    + text: the file's current content ("" when absent)
    + managed: key -> value, in the order to append them
    + header: the comment line above appended keys
    + quoted: keys whose value is written in double quotes

    >>> print(merge("HF_TOKEN=x\\nCUDA_HOME=/old\\n", {"CUDA_HOME": "/new", "CXX": "/usr/bin/g++"}, "# managed"),
    ...       end="")
    HF_TOKEN=x
    CUDA_HOME=/new
    # managed
    CXX=/usr/bin/g++
    """
    lines, seen = [], set()
    for line in text.splitlines():
        found = assignment(line)
        if found and found[0] in managed:
            key = found[0]
            if key not in seen:
                lines.append(render(key, managed[key], key in quoted))
                seen.add(key)
            continue
        lines.append(line)
    missing = [key for key in managed if key not in seen]
    if missing:
        if header not in lines:
            lines.append(header)
        lines += [render(key, managed[key], key in quoted) for key in missing]
    return "\n".join(lines) + "\n"


def path_first(current, first, default):
    """A PATH value with ``first`` in front and every entry of ``current`` kept after
    it (``default`` when there is no current PATH).

    >>> path_first("/usr/bin:/snap/bin:/usr/local/cuda-13.0/bin", "/usr/local/cuda-13.0/bin", "/usr/bin")
    '/usr/local/cuda-13.0/bin:/usr/bin:/snap/bin'
    >>> path_first(None, "/c/bin", "/usr/bin:/bin")
    '/c/bin:/usr/bin:/bin'
    """
    entries = (current if current is not None else default).split(":")
    return ":".join([first, *(entry for entry in entries if entry and entry != first)])
