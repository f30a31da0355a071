"""Writing values into systemd unit files so systemd reads back exactly what was meant.

Source: systemd.service(5) "Command lines" and systemd.unit(5) "Specifiers" (systemd
252): an ``ExecStart=`` line is split into words like a shell line (double or single
quotes, C-style backslash escapes), ``%`` starts a specifier and ``$NAME``/``${NAME}``
is replaced by an environment variable, so a literal ``%`` is ``%%`` and a literal
``$`` is ``$$``.
"""

import re

PLAIN_WORD = re.compile(r"^[A-Za-z0-9._/:@+,=%$-]+$")


def exec_word(argument):
    r"""One argv element as an ``ExecStart=`` word.

    >>> exec_word("--port"), exec_word("50%"), exec_word("a b"), exec_word("")
    ('--port', '50%%', '"a b"', '""')
    >>> print(exec_word('say "$HOME" \\x'))
    "say \"$$HOME\" \\x"
    """
    escaped = argument.replace("%", "%%").replace("$", "$$")
    if PLAIN_WORD.match(escaped):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_line(argv):
    """An argv as the value of ``ExecStart=``.

    >>> exec_line(["/opt/sglang/venv/bin/sglang", "serve", "--model-path", "/models/m 1"])
    '/opt/sglang/venv/bin/sglang serve --model-path "/models/m 1"'
    """
    return " ".join(exec_word(argument) for argument in argv)
