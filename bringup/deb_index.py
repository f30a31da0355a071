"""A Debian ``Packages`` index (the CUDA repository's, for one distro and CPU), parsed, and
a set of packages picked from it whole: the one resolver of the toolkit's and the
driver's locks (bringup/toolkit_locks.py, bringup/driver_locks.py).
"""

import re

from bringup.locks import LockError


def parse_index(text):
    """A Debian ``Packages`` index -> one dict of fields per stanza (continuation lines
    joined; only the fields a lock needs are kept).

    >>> parse_index("Package: a\\nVersion: 1-1\\nDepends: b (>= 1),\\n c\\n\\nPackage: b\\n")[0]["Depends"]
    'b (>= 1), c'
    """
    stanzas, current, key = [], {}, None
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current, key = {}, None
        elif line[0] in " \t":
            if key:
                current[key] += " " + line.strip()
        else:
            key, _, value = line.partition(":")
            current[key] = value.strip()
    if current:
        stanzas.append(current)
    keep = ("Package", "Version", "Architecture", "Depends", "Pre-Depends")
    return [{k: v for k, v in stanza.items() if k in keep} for stanza in stanzas if "Package" in stanza]


def upstream_version(version):
    """The upstream part of a Debian version: no epoch, no revision.

    >>> upstream_version("1:13.0.88-1"), upstream_version("10.4.0.35-1")
    ('13.0.88', '10.4.0.35')
    """
    version = version.split(":", 1)[1] if ":" in version else version
    return version.rsplit("-", 1)[0] if "-" in version else version


DEPENDENCY = re.compile(r"^(?P<name>[a-z0-9][a-z0-9.+-]*)(?::[a-z0-9-]+)?"
                        r"\s*(?:\((?P<op><<|<=|=|>=|>>)\s*(?P<version>[^)\s]+)\))?")


def parse_depends(text):
    """``Depends`` -> [[(name, op, version), ...alternatives], ...].

    >>> parse_depends("a (>= 1.0), b | c")
    [[('a', '>=', '1.0')], [('b', None, None), ('c', None, None)]]
    """
    groups = []
    for group in (text or "").split(","):
        alternatives = []
        for term in group.split("|"):
            match = DEPENDENCY.match(term.strip())
            if match:
                alternatives.append((match["name"], match["op"], match["version"]))
        if alternatives:
            groups.append(alternatives)
    return groups


def satisfies(version, op, wanted, compare):
    """Whether ``version`` meets ``op wanted`` under ``compare`` (Debian ordering: -1/0/1)."""
    if op is None:
        return True
    order = compare(version, wanted)
    return {"<<": order < 0, "<=": order <= 0, "=": order == 0, ">=": order >= 0, ">>": order > 0}[op]


def served_packages(stanzas, arch):
    """{package: [stanza, ...]} of an index's packages for ``arch`` (``all`` counts too).

    >>> sorted(served_packages(parse_index("Package: a\\nArchitecture: arm64\\n\\n"
    ...                                    "Package: b\\nArchitecture: all\\n"), "amd64"))
    ['b']
    """
    served = {}
    for stanza in stanzas:
        if stanza.get("Architecture") in (arch, "all"):
            served.setdefault(stanza["Package"], []).append(stanza)
    return served


def _highest(candidates, compare, prefer=None):
    """The candidate of the highest Debian version, among those of upstream version
    ``prefer`` when there are any."""
    preferred = [c for c in candidates if prefer and upstream_version(c["Version"]) == prefer] or candidates
    best = preferred[0]
    for candidate in preferred[1:]:
        if compare(candidate["Version"], best["Version"]) > 0:
            best = candidate
    return best


def resolve_packages(wanted, stanzas, arch, compare, where="the index", closure=False, prefer=None):
    """Pick each wanted package's Debian version from an index, and make the set whole:
    every dependency that the index itself serves is met by a version in the set.

    + wanted: {package: upstream version, or None for the index's highest}
    + stanzas: ``parse_index`` of the repository's Packages
    + arch: the dpkg architecture (``Architecture: all`` also counts)
    + compare: Debian version ordering (``dpkg --compare-versions``), ``(a, b) -> -1/0/1``
    + where: the index's URL, for messages
    + closure: False (a toolkit release): a served dependency outside ``wanted`` is an
      error; True (a driver lock): it joins the set, at the first alternative the index
      can meet, its version of upstream ``prefer`` when it has one that meets the
      constraint, else its highest that does
    + prefer: the upstream version a closure prefers (the driver's)

    Among versions with the wanted upstream part the highest Debian revision wins.
    Returns {package: Debian version} sorted by name; raises LockError naming the
    package, the index and the fix.

    >>> index = parse_index("Package: a\\nVersion: 2-1\\nArchitecture: all\\nDepends: b (>= 2), dkms\\n\\n"
    ...                     "Package: b\\nVersion: 2-1\\nArchitecture: all\\n\\n"
    ...                     "Package: b\\nVersion: 3-1\\nArchitecture: all\\n")
    >>> order = lambda x, y: (x > y) - (x < y)
    >>> resolve_packages({"a": "2"}, index, "amd64", order, closure=True, prefer="2")
    {'a': '2-1', 'b': '2-1'}
    """
    served = served_packages(stanzas, arch)
    chosen, picked = {}, {}
    for name, upstream in sorted(wanted.items()):
        candidates = [s for s in served.get(name, []) if upstream is None or upstream_version(s["Version"]) == upstream]
        if not candidates:
            have = sorted({upstream_version(s["Version"]) for s in served.get(name, [])})
            raise LockError(f"{name} {upstream or ''} is not in {where} for {arch} (it has: {', '.join(have) or 'none'}); "
                            "name a version the index serves in the .in, or point CUDA_REPO_URL at a mirror that "
                            "carries it")
        best = _highest(candidates, compare, prefer)
        chosen[name], picked[name] = best["Version"], best
    queue = sorted(picked)
    while queue:
        name = queue.pop(0)
        stanza = picked[name]
        for group in parse_depends(stanza.get("Pre-Depends")) + parse_depends(stanza.get("Depends")):
            ours = [alt for alt in group if alt[0] in served]
            if not ours:
                continue  # a distribution package: apt resolves it
            if any(alt[0] in chosen and satisfies(chosen[alt[0]], alt[1], alt[2], compare) for alt in ours):
                continue
            need = " | ".join(f"{n}{f' ({op} {v})' if op else ''}" for n, op, v in ours)
            added = closure and _join(ours, served, chosen, picked, compare, prefer)
            if not added:
                fix = ("which no version in the index meets together with the rest" if closure else
                       "which the release does not hold; add it (or the version that meets it) to the .in")
                raise LockError(f"{name} {chosen[name]} depends on {need}, {fix}")
            queue.append(added)
    return dict(sorted(chosen.items()))


def _join(alternatives, served, chosen, picked, compare, prefer):
    """Add the first alternative the index can meet to the set; its name, or None."""
    for name, op, version in alternatives:
        if name in chosen:
            continue
        candidates = [s for s in served[name] if satisfies(s["Version"], op, version, compare)]
        if candidates:
            best = _highest(candidates, compare, prefer)
            chosen[name], picked[name] = best["Version"], best
            return name
    return None
