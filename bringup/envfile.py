"""The control side's one reader and writer of ``KEY=value`` files the deploy shares
with the operator: the service's EnvironmentFile (systemd.exec(5)) and
``/etc/environment`` (pam_env.conf(5)).

Three programs read these files and must agree on every value: systemd itself
(``parse_env_file_internal`` in systemd's src/basic/env-file.c), this module (the
deploy's merge, the node suite) and files/service-env.sh (the probe, the pre-warm).
The two of ours read one grammar, line by line:

- lines end at ``\\n`` only (never U+0085, U+2028, U+2029, ``\\v``...: systemd does
  not split there, so neither may we);
- blank lines and lines starting with ``#`` or ``;`` (after blanks) are comments;
- ``NAME=value`` with NAME a variable name, blanks around the line trimmed; one pair
  of surrounding quotes removed (``'...'`` or ``"..."``); nothing else unescaped or
  expanded (``$VAR`` stays literal); any other line is ignored.

systemd reads more: backslash escapes and line continuations, quotes that open
anywhere a value starts and run across lines, blanks around ``=``, ``\\r`` as a line
end, a comment ending in ``\\`` that swallows the next line (systemd before 254).
``line_problem`` names every line on which systemd would read something else than
this grammar; ``merge`` refuses a file holding one (naming the line and its key,
never its value), and ``render`` writes every value so that all three read it
back exactly (quoted where needed) or refuses it.

Writing keeps every line the operator wrote, sets the keys the plan manages to the
plan's values in place, and appends the ones missing under a header.
"""

import re

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What files/service-env.sh trims around a line (the shell's [:space:], bar "\n").
BLANKS = " \t\r\v\f"
QUOTES = "'\""


class EnvFileError(ValueError):
    """A file or value systemd would read differently from what we mean; the message
    names the line or key and the fix, never the value (it may be a secret)."""


def lines_of(text):
    """The lines of ``text``, split at ``\\n`` only (a final newline ends the last line).

    >>> lines_of("A=1\\nNOTE=a\\x85b\\u2028C=2\\n")
    ['A=1', 'NOTE=a\\x85b\\u2028C=2']
    """
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _unquote(value):
    if len(value) >= 2 and value[0] == value[-1] and value[0] in QUOTES:
        return value[1:-1]
    return value


def assignment(line):
    """``(key, value)`` of an assignment line, or None for comments, blanks and noise.

    >>> assignment('PATH="/usr/bin:/bin"'), assignment("# CUDA_HOME=/x"), assignment("; c"), assignment("A =1")
    (('PATH', '/usr/bin:/bin'), None, None, None)
    """
    stripped = line.strip(BLANKS)
    if not stripped or stripped[0] in "#;" or "=" not in stripped:
        return None
    key, _, value = stripped.partition("=")
    return (key, _unquote(value)) if NAME.match(key) else None


def parse_env_file(text):
    """The assignments of an env file (a later line wins).

    >>> parse_env_file('# c\\nA=1\\n; c\\nB="x y"\\nC=$PATH:/bin\\nnot an assignment\\nA=2\\n')
    {'A': '2', 'B': 'x y', 'C': '$PATH:/bin'}
    >>> parse_env_file("X=v\\u2028CUDA_HOME=/opt/evil\\n")
    {'X': 'v\\u2028CUDA_HOME=/opt/evil'}
    """
    values = {}
    for line in lines_of(text):
        found = assignment(line)
        if found:
            values[found[0]] = found[1]
    return values


def _single_quoted(value):
    """Whether ``value`` is one ``'...'`` with no quote inside: systemd takes its
    content literally (backslashes too), as our readers do."""
    return len(value) >= 2 and value[0] == value[-1] == "'" and "'" not in value[1:-1]


def _value_problem(value):
    """Why systemd reads the value part of a line (after its ``=`` and blanks, the line
    trimmed) otherwise than our readers, or ""."""
    if _single_quoted(value):
        return ""
    if "\\" in value:
        return "a backslash (systemd reads it as an escape, or at the end of the line joins the next line)"
    if value[:1] in QUOTES and not (len(value) >= 2 and value[-1] == value[0] and value[0] not in value[1:-1]):
        return "a quote that does not close at the end of the line (systemd reads on, across lines, to the next one)"
    return ""


def line_problem(line):
    """Why systemd would read ``line`` (one line, without its ``\\n``) otherwise than
    our readers, or "" when all three read it alike.

    >>> line_problem("HF_TOKEN=hf_x"), line_problem("NOTE='C:\\\\dir\\\\'"), line_problem("# note \\\\")[:31]
    ('', '', "a comment ending in '\\\\' (system")
    >>> line_problem("NOTE=a\\\\")[:13], line_problem("A = 1")[:21], line_problem("A='x")[:7]
    ('a backslash (', "blanks around '=' (sy", 'a quote')
    """
    if "\x00" in line:
        return "a NUL byte (systemd stops reading the file there)"
    if "\r" in line.rstrip("\r"):
        return "a carriage return inside the line (systemd ends the line there)"
    if "\v" in line or "\f" in line:
        return "a vertical tab or form feed (systemd keeps it, files/service-env.sh trims it)"
    stripped = line.strip(BLANKS)
    if not stripped:
        return ""
    if stripped[0] in "#;":
        return ("a comment ending in '\\' (systemd before 254 reads the next line as part of the comment)"
                if line.rstrip("\r").endswith("\\") else "")
    # systemd takes a line's first character into its key, even "=".
    equals = stripped.find("=", 1)
    if equals < 0:
        return ""
    key, value = stripped[:equals], stripped[equals + 1:]
    if NAME.match(key.rstrip(" \t")) and (key[-1:] in " \t" or value[:1] in " \t"):
        return "blanks around '=' (systemd drops them, our readers keep them or ignore the line)"
    # A line systemd drops for its key still opens quotes and continues lines.
    return _value_problem(value.lstrip(" \t"))


def _key_of(line):
    key = line.strip(BLANKS).partition("=")[0].strip(" \t")
    return key if NAME.match(key) else ""


def problems(text):
    """Every line systemd would read otherwise than our readers, as one message each
    (line number, key, why; never the value).

    >>> problems("A=1\\nHF_TOKEN=hf\\\\\\nB=2\\n")
    ['line 2 (HF_TOKEN): a backslash (systemd reads it as an escape, or at the end of the line joins the next line)']
    """
    found = []
    for number, line in enumerate(lines_of(text), 1):
        why = line_problem(line)
        if why:
            key = _key_of(line)
            found.append(f"line {number}{f' ({key})' if key else ''}: {why}")
    return found


def render(key, value, quoted=False):
    """One assignment line that systemd, this module and files/service-env.sh all read
    back as exactly ``value``: bare when it is plain, else in single quotes (taken
    literally), else in double quotes; EnvFileError when none of them holds it.

    >>> render("PATH", "/a:/b", quoted=True), render("A", "x#y $HOME"), render("A", "C:\\\\dir\\\\")
    ('PATH="/a:/b"', 'A=x#y $HOME', "A='C:\\\\dir\\\\'")
    >>> render("A", " padded "), render("A", "it's a \\"quote"), render("A", "'q'")
    ("A=' padded '", 'A=it\\'s a "quote', 'A="\\'q\\'"')
    """
    if any(c in value for c in "\n\r\v\f\x00"):
        raise EnvFileError(f"{key}'s value holds a line break or control character: remove it")
    plain = value == value.strip(BLANKS) and value[:1] not in QUOTES and "\\" not in value
    if quoted and '"' not in value and "\\" not in value:
        return f'{key}="{value}"'
    if plain:
        return f"{key}={value}"
    if "'" not in value:
        return f"{key}='{value}'"
    if '"' not in value and "\\" not in value:
        return f'{key}="{value}"'
    raise EnvFileError(f"{key}'s value holds a single quote together with a backslash, a double quote, "
                       "or blanks or a quote at its ends: systemd and the node's reader would read it "
                       "differently; drop the single quote or the other")


def writable(key, value):
    """Why ``render`` refuses ``value``, or "" (for the settings check).

    >>> writable("A", "ok"), writable("A", "it's\\\\")[:17]
    ('', "A's value holds a")
    """
    try:
        render(key, value)
    except EnvFileError as error:
        return str(error)
    return ""


def merge(text, managed, header, quoted=(), drop=()):
    """``text`` with every key of ``managed`` set to its value: the first assignment of
    a managed key is rewritten in place, later ones are dropped (they would win), the
    missing ones are appended under ``header``; every other line stays as it was.
    EnvFileError (naming the lines) when ``text`` holds a line systemd reads otherwise
    than our readers, or a value cannot be written.

    + text: the file's current content ("" when absent)
    + managed: key -> value, in the order to append them
    + header: the comment line above appended keys
    + quoted: keys whose value is written in double quotes
    + drop: keys whose every assignment is taken out (what deploy wrote and takes back)

    >>> print(merge("HF_TOKEN=x\\nCUDA_HOME=/old\\n", {"CUDA_HOME": "/new", "CXX": "/usr/bin/g++"}, "# managed"),
    ...       end="")
    HF_TOKEN=x
    CUDA_HOME=/new
    # managed
    CXX=/usr/bin/g++
    """
    found = problems(text)
    if found:
        raise EnvFileError("holds lines systemd reads otherwise than the deploy and the node's reader: "
                           f"{'; '.join(found)}; rewrite them as plain KEY=value lines (a value with "
                           "backslashes, quotes or blanks in single quotes)")
    rendered = {key: render(key, value, key in quoted) for key, value in managed.items()}
    lines, seen = [], set()
    for line in lines_of(text):
        assigned = assignment(line)
        if assigned and assigned[0] in drop and assigned[0] not in managed:
            continue
        if assigned and assigned[0] in managed:
            key = assigned[0]
            if key not in seen:
                lines.append(rendered[key])
                seen.add(key)
            continue
        lines.append(line)
    missing = [key for key in managed if key not in seen]
    if missing:
        if header not in lines:
            lines.append(header)
        lines += [rendered[key] for key in missing]
    return "\n".join(lines) + "\n"


def path_first(current, first, default):
    """A PATH value with ``first`` in front and every entry of ``current`` kept after
    it (``default`` when there is no current PATH).

    >>> path_first("/usr/bin:/snap/bin:/opt/cuda/bin", "/opt/cuda/bin", "/usr/bin")
    '/opt/cuda/bin:/usr/bin:/snap/bin'
    >>> path_first(None, "/c/bin", "/usr/bin:/bin")
    '/c/bin:/usr/bin:/bin'
    """
    entries = (current if current is not None else default).split(":")
    return ":".join([first, *(entry for entry in entries if entry and entry != first)])
