"""What the service user can reach: a shell script run as that user (``runuser``, never
through systemd-run, which would expand its ``${...}``), and the one line a check fails
with, naming the path and the first directory on its way that stops the user (a link
named with its target).

The script takes (label, path) pairs; for each it prints ``ok|label|path`` or
``blocked|label|path|pass or read|component|owner mode``: the component is the first
directory of the path as written (up to its first link), then of the path with its
links followed (as root resolved it, ``readlink -f``), that the user cannot traverse
(``pass``), or the path itself that it cannot read (``read``).
"""

import shlex

REACH_SCRIPT = r"""
blocked_on() {  # path: "pass|<dir>" or "read|<path>" where the user stops, "" when none
    walk=
    rest=$1
    while [ -n "$rest" ]; do
        rest=${rest#/}
        part=${rest%%/*}
        case $rest in */*) rest=/${rest#*/} ;; *) rest= ;; esac
        [ -n "$part" ] || continue
        walk=$walk/$part
        # Beyond a link: the walk of the resolved path (readlink -f) goes on from there.
        [ -L "$walk" ] && return
        if [ -d "$walk" ]; then
            [ -x "$walk" ] || { printf 'pass|%s' "$walk"; return; }
        elif [ ! -e "$walk" ]; then
            printf 'pass|%s' "$walk"; return
        fi
    done
    [ -r "$1" ] || printf 'read|%s' "$1"
}
while [ $# -ge 3 ]; do
    label=$1 path=$2 resolved=$3
    shift 3
    stop=$(blocked_on "$path")
    [ -n "$stop" ] || stop=$(blocked_on "$resolved")
    if [ -z "$stop" ]; then echo "ok|$label|$path"; continue; fi
    echo "blocked|$label|$path|$stop|$(stat -c '%U %a' -- "${stop#*|}" 2>/dev/null || echo missing)"
done
"""


def reach_command(user, paths, resolved):
    """The command (run as root) that runs REACH_SCRIPT as ``user`` over ``paths``
    (label -> path), each with its ``resolved`` path (label -> ``readlink -f``'s).

    >>> reach_command("sglang", {"venv": "/opt/sglang/venv"}, {"venv": "/opt/sglang/venvs/a"}).split()[:5]
    ['runuser', '-u', 'sglang', '--', '/bin/sh']
    """
    words = [word for label, path in paths.items() for word in (label, path, resolved.get(label) or path)]
    return f"runuser -u {shlex.quote(user)} -- /bin/sh -c {shlex.quote(REACH_SCRIPT)} sh {shlex.join(words)}"


def resolve_command(paths):
    """The command (run as root) that prints ``readlink -f`` of each path, one a line
    (the path itself where it cannot be resolved)."""
    return "; ".join(f"readlink -f -- {shlex.quote(path)} || echo {shlex.quote(path)}" for path in paths.values())


def blocked_lines(stdout, user, links):
    """The failure lines of REACH_SCRIPT's output: one per path the user cannot reach,
    naming the path, the component and its owner and mode; ``links`` (path -> target)
    names a link on the way with its target.

    >>> blocked_lines("ok|cache|/var/cache/sglang\\nblocked|venv python|/opt/sglang/venv/bin/python|pass|/opt/sglang|root 700\\n",
    ...               "sglang", {"/opt/sglang/venv": "venvs/0123"})
    ['venv python /opt/sglang/venv/bin/python (via /opt/sglang/venv -> venvs/0123): sglang cannot pass /opt/sglang (owner root, mode 700)']
    """
    lines = []
    for line in stdout.splitlines():
        fields = line.split("|")
        if fields[0] != "blocked" or len(fields) != 6:
            continue
        _, label, path, how, stop, state = fields
        via = ", ".join(f"{link} -> {target}" for link, target in links.items()
                        if path == link or path.startswith(link + "/"))
        owner_mode = state.split(" ")
        described = f"owner {owner_mode[0]}, mode {owner_mode[1]}" if len(owner_mode) == 2 else "missing"
        what = "cannot read" if how == "read" else "cannot pass"
        lines.append(f"{label} {path}{f' (via {via})' if via else ''}: {user} {what} {stop} ({described})")
    return lines
