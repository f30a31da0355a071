"""A script of files/ run on the node by the system's interpreter, the script inside the command.

The script travels compressed and base64-encoded in the one remote command (nothing is installed
first: the deploy lock is taken before the helpers are, a rendezvous check changes nothing on the
node). Root runs it with ``/usr/bin/python3``, isolated (-I: no user site, no PYTHON* variables);
a node without it answers ``missing`` (one JSON line of the caller's) instead.
"""

import base64
import shlex
import zlib

PYTHON = "/usr/bin/python3"


def script_command(script, arguments, missing):
    """The shell command that runs ``script`` (a Path) with ``arguments`` on the node, or echoes
    ``missing`` where there is no ``PYTHON``.

    >>> from pathlib import Path
    >>> command = script_command(Path(__file__), ["state", "--lock", "/run/x"], '{"error": "no python"}')
    >>> command.startswith("if [ -x /usr/bin/python3 ]; then /usr/bin/python3 -I -c "), command.split(" -- ")[1]
    (True, 'state --lock /run/x ; else echo \\'{"error": "no python"}\\'; fi')
    """
    encoded = base64.b64encode(zlib.compress(script.read_bytes(), 9)).decode("ascii")
    loader = (f"import base64, sys, zlib; sys.argv[1:2] = []; "
              f"exec(compile(zlib.decompress(base64.b64decode({encoded!r})), {script.name!r}, 'exec'))")
    return (f"if [ -x {PYTHON} ]; then {PYTHON} -I -c {shlex.quote(loader)} -- {shlex.join(arguments)} ; "
            f"else echo {shlex.quote(missing)}; fi")
