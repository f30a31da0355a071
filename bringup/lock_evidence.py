"""Public evidence for the NVIDIA locks' lines (``files/locks/evidence.yaml``): which lines of
the toolkit and driver locks a public source shows NVIDIA's real repositories serving, and
docs/locks.md's block that says so per lock.

The shipped locks were resolved against the sandbox's stand-in repository; a row of the
table is a public file that pins (or quotes apt serving) exactly one ``package=version``
from one of NVIDIA's repository directories. A lock's line is **confirmed** by a row from
the lock's own directory (distro and CPU), **seen in another repository** by a row from
another directory of the same release that names the lock's distro, and has **no
evidence** otherwise; ``contradicted`` rows name lines a public source contradicts.

``python -m bringup.lock_evidence --write docs/locks.md`` writes the block between the
page's markers (the page whole); ``--check`` exits 1 when the block is another, both exit 1
naming each stale row (a ``package=version`` no shipped lock of a distro it names holds)
(tests/unit/test_lock_evidence.py fails then too).
"""

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bringup.driver_locks import DRIVER_ROLES, parse_driver_lock
from bringup.generated_block import block_of, check_or_write, read_page
from bringup.locks import LOCKS_DIR, LockError
from bringup.platforms import REPO_ARCH
from bringup.toolkit_locks import parse_toolkit_lock
from bringup.yamlload import load

ROOT = Path(__file__).resolve().parents[1]
TABLE = f"{LOCKS_DIR}/evidence.yaml"
BEGIN = "<!-- lock evidence: generated from files/locks/evidence.yaml by python -m bringup.lock_evidence -->"
END = "<!-- end of the lock evidence -->"
KINDS = ("pin", "served")
LOCK_NAME = re.compile(r"(?P<kind>cuda|driver|dcgm)-(?P<release>[\d.]+)-(?P<distro>[a-z]+\d+)-(?P<machine>x86_64|aarch64)\.txt")
REPO = re.compile(r"(?:debian|ubuntu)\d+/(?:x86_64|sbsa)")


class EvidenceError(ValueError):
    """The table cannot be read; the message names the row and what is wrong."""


@dataclass(frozen=True)
class Row:
    """One piece of public evidence (``kind`` pin or served), or a contradiction (``says``)."""

    package: str
    version: str
    repo: str
    distros: tuple
    source: str
    quote: str
    kind: str = ""
    says: str = ""
    note: str = ""

    @property
    def line(self):
        return f"{self.package}={self.version}"


@dataclass(frozen=True)
class Lock:
    """A shipped NVIDIA lock: its file name, distro, NVIDIA repository directory and lines
    (``package=version``, each once, in lock order)."""

    name: str
    distro: str
    repo: str
    lines: tuple


def _row(entry, where, contradiction):
    if not isinstance(entry, dict):
        raise EvidenceError(f"{where}: expected a mapping, got {entry!r}")
    required = ("package", "version", "repo", "distros", "source", "quote", "says" if contradiction else "kind")
    allowed = {*required, "note"}
    missing = [key for key in required if not entry.get(key)]
    unknown = sorted(set(entry) - allowed)
    if missing or unknown:
        raise EvidenceError(f"{where}: {'missing ' + ', '.join(missing) if missing else ''}"
                            f"{'; ' if missing and unknown else ''}{'unknown ' + ', '.join(unknown) if unknown else ''}")
    fields = {key: entry[key] if key == "distros" else str(entry[key]).strip() for key in entry}
    if not isinstance(fields["distros"], list) or not all(isinstance(d, str) for d in fields["distros"]):
        raise EvidenceError(f"{where}: distros must be a list of distros such as [debian12, ubuntu2404]")
    fields["distros"] = tuple(fields["distros"])
    if not REPO.fullmatch(fields["repo"]):
        raise EvidenceError(f"{where}: repo {fields['repo']!r} is not an NVIDIA repository directory such as "
                            "debian12/x86_64 or ubuntu2204/sbsa")
    if not contradiction and fields["kind"] not in KINDS:
        raise EvidenceError(f"{where}: kind {fields['kind']!r} is not one of {', '.join(KINDS)}")
    if not fields["source"].startswith("https://"):
        raise EvidenceError(f"{where}: source must be the https URL of the file or page read")
    if not contradiction and not (fields["package"] in fields["quote"] and fields["version"] in fields["quote"]):
        raise EvidenceError(f"{where}: its quote does not name {fields['package']} and {fields['version']}")
    return Row(**fields)


def parse_table(text):
    """``(evidence rows, contradicted rows)`` of the table's YAML text; EvidenceError names a bad row.

    >>> rows, _ = parse_table('''evidence:
    ...   - {package: a, version: 1-1, repo: debian12/x86_64, kind: pin, distros: [debian12],
    ...      source: "https://x", quote: "a=1-1"}''')
    >>> rows[0].line, rows[0].distros
    ('a=1-1', ('debian12',))
    >>> parse_table("evidence: [{package: a}]")
    Traceback (most recent call last):
    ...
    bringup.lock_evidence.EvidenceError: evidence row 1: missing version, repo, distros, source, quote, kind
    """
    data = load(text) or {}
    if not isinstance(data, dict) or set(data) - {"evidence", "contradicted"}:
        raise EvidenceError("expected the keys evidence and contradicted")
    parts = []
    for key in ("evidence", "contradicted"):
        entries = data.get(key) or []
        if not isinstance(entries, list):
            raise EvidenceError(f"{key}: expected a list of rows")
        parts.append([_row(entry, f"{key} row {number}", key == "contradicted")
                      for number, entry in enumerate(entries, 1)])
    return tuple(parts)


def read_locks(root=ROOT):
    """Every shipped toolkit, driver and DCGM lock under ``root``'s files/locks, by name.

    >>> read_locks()["cuda-13.0-debian12-aarch64.txt"].repo
    'debian12/sbsa'
    """
    found = {}
    for path in sorted((Path(root) / LOCKS_DIR).glob("*.txt")):
        match = LOCK_NAME.fullmatch(path.name)
        if not match:
            continue
        text = path.read_text(encoding="utf-8")
        pins = parse_toolkit_lock(text) if match["kind"] in ("cuda", "dcgm") else parse_driver_lock(text).pins(*DRIVER_ROLES)
        found[path.name] = Lock(path.name, match["distro"], f"{match['distro']}/{REPO_ARCH[match['machine']][0]}",
                                tuple(f"{name}={version}" for name, version in pins.items()))
    return found


def stale(rows, locks):
    """One message per row and distro it names whose ``package=version`` no lock of that distro holds.

    >>> row = Row("a", "1-1", "debian12/x86_64", ("debian12", "debian13"), "https://x", "a=1-1", "pin")
    >>> stale([row], {"l": Lock("l", "debian12", "debian12/x86_64", ("a=1-1",))})
    ['a=1-1 (https://x): no shipped lock of debian13 holds it']
    """
    messages = []
    for row in rows:
        for distro in row.distros:
            if not any(lock.distro == distro and row.line in lock.lines for lock in locks.values()):
                messages.append(f"{row.line} ({row.source}): no shipped lock of {distro} holds it")
    return messages


def coverage(rows, locks):
    """{lock name: [(line, status, rows)]}: status ``confirmed`` (rows from the lock's own
    repository), ``elsewhere`` (rows from another repository naming the lock's distro) or
    ``none``.

    >>> lock = Lock("l", "debian12", "debian12/sbsa", ("a=1-1", "b=2-1"))
    >>> row = Row("a", "1-1", "debian12/x86_64", ("debian12",), "https://x", "a=1-1", "pin")
    >>> [(line, status) for line, status, _ in coverage([row], {"l": lock})["l"]]
    [('a=1-1', 'elsewhere'), ('b=2-1', 'none')]
    """
    result = {}
    for name, lock in locks.items():
        entries = []
        for line in lock.lines:
            named = [row for row in rows if row.line == line and lock.distro in row.distros]
            here = [row for row in named if row.repo == lock.repo]
            entries.append((line, "confirmed", here) if here else (line, "elsewhere", named) if named
                           else (line, "none", []))
        result[name] = entries
    return result


def _label(source, numbers):
    return f"S{numbers[source]}"


def _title(url):
    """A source's link text: ``owner/repo path`` of a GitHub blob URL, else the URL.

    >>> _title("https://github.com/o/r/blob/0123456789abcdef/docker/Dockerfile")
    'o/r docker/Dockerfile @ 0123456'
    >>> _title("https://github.com/o/r/pull/8")
    'o/r pull/8'
    """
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)/blob/([0-9a-f]+)/(.+)", url)
    if match:
        return f"{match[1]} {match[3]} @ {match[2][:7]}"
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)/(.+)", url)
    return f"{match[1]} {match[2]}" if match else url


def markdown(rows, contradicted, locks):
    """docs/locks.md's block: per lock, its lines by evidence, then the sources."""
    numbers = {}
    for row in [*rows, *contradicted]:
        numbers.setdefault(row.source, len(numbers) + 1)
    covered = coverage(rows, locks)
    out = ["| lock (NVIDIA's repository) | confirmed there | seen in another repository only | no public evidence |",
           "| --- | --- | --- | --- |"]
    for name, lock in locks.items():
        cells = {"confirmed": [], "elsewhere": [], "none": []}
        for line, status, found in covered[name]:
            against = [row for row in contradicted if row.line == line and lock.distro in row.distros]
            if status == "confirmed":
                text = f"`{line}` ({', '.join(sorted({_label(r.source, numbers) for r in found}))})"
            elif status == "elsewhere":
                seen = sorted({f"{r.repo} {_label(r.source, numbers)}" for r in found})
                text = f"`{line}` ({', '.join(seen)})"
            else:
                text = f"`{line}`"
            if against:
                text += f" **contradicted** ({', '.join(_label(r.source, numbers) for r in against)})"
            cells[status].append(text)
        out.append(f"| `{name}` (`{lock.repo}`) | " + " | ".join("<br>".join(cells[key]) or "-" for key in cells) + " |")
    out += ["", "Contradicted:", ""] if contradicted else []
    for row in contradicted:
        out.append(f"- `{row.line}` ({', '.join(row.distros)}): {row.says} ({_label(row.source, numbers)}: "
                   f"`{row.quote}`)")
    out += ["", "| source | file or page | NVIDIA's repository | lines it shows (pin: installs it; served: apt shows it) |",
            "| --- | --- | --- | --- |"]
    for source, number in numbers.items():
        shown = [row for row in [*rows, *contradicted] if row.source == source]
        repos = ", ".join(sorted({row.repo for row in shown}))
        lines = ", ".join(f"`{row.line}` ({row.kind})" if row.kind else f"contradicts `{row.line}`" for row in shown)
        out.append(f"| S{number} | [{_title(source)}]({source}) | `{repos}` | {lines} |")
    return "\n".join(out)


def docs_block(text):
    """The text between the page's markers, or None when it has not both, in order.

    >>> docs_block(f"a\\n{BEGIN}\\n| t |\\n{END}\\nb")
    '| t |'
    """
    return block_of(text, BEGIN, END)


def read_table(root=ROOT):
    """The table under ``root`` parsed; EvidenceError when it cannot be read."""
    try:
        text = (Path(root) / TABLE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise EvidenceError(f"{TABLE}: cannot read it ({error})") from None
    try:
        return parse_table(text)
    except EvidenceError as error:
        raise EvidenceError(f"{TABLE}: {error}") from None
    except Exception as error:  # noqa: BLE001 - YAML's errors: one line, not a traceback
        raise EvidenceError(f"{TABLE}: not YAML the table can use ({str(error).splitlines()[0]})") from None


def main(argv=None, root=ROOT):
    """``--check PAGE``: exit 1 when the page's evidence block is not the table's and the
    locks'; ``--write PAGE``: write it (the page whole). Both exit 1 naming each stale row."""
    parser = argparse.ArgumentParser(prog="python -m bringup.lock_evidence", description=main.__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", metavar="PAGE")
    action.add_argument("--write", metavar="PAGE")
    args = parser.parse_args(argv)
    page = args.check or args.write
    try:
        rows, contradicted = read_table(root)
        locks = read_locks(root)
    except (EvidenceError, LockError) as error:
        print(error, file=sys.stderr)
        return 2
    text = read_page(page, "the locks page, docs/locks.md")
    if text is None:
        return 2
    if docs_block(text) is None:
        print(f"{page}: no lock evidence markers ({BEGIN} ... {END}): put them where the block goes", file=sys.stderr)
        return 2
    problems = stale([*rows, *contradicted], locks)
    for problem in problems:
        print(f"{TABLE}: stale row: {problem}: drop the row or the distro", file=sys.stderr)
    if problems:
        return 1
    return check_or_write(page, text, BEGIN, END, markdown(rows, contradicted, locks), args.check,
                          f"its lock evidence block is not {TABLE}'s: python -m bringup.lock_evidence --write {page}")


if __name__ == "__main__":
    sys.exit(main())
