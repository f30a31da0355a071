"""apt's sources as the node has them, and the keys of the keyrings they name.

Pure parsing of what the probe prints (files/probe.d/, ``apt`` section): every source
file (``/etc/apt/sources.list``, ``sources.list.d/*.list`` one-line entries,
``sources.list.d/*.sources`` deb822 stanzas) and every keyring a ``signed-by`` names,
base64-encoded. Sources: sources.list(5) (apt 2.6) for both formats; RFC 4880
sections 4.2, 5.5 and 12.2 for OpenPGP packets and v4 fingerprints, and RFC 4880
section 6.2 for ASCII armor.
"""

import base64
import binascii
import hashlib
import re

# apt's isspace (C locale): what ends a word and what starts a continuation line.
SPACE = " \t\n\v\f\r"
TYPES = ("deb", "deb-src")
OPTIONS = re.compile(r"^\[(?P<options>[^\]]*)\]")


def apt_bool(text, default=None):
    """apt's StringToBool (apt-pkg/contrib/strutl.cc): True, False, or ``default`` for
    anything else (apt then keeps its default: ``Enabled: bogus`` stays enabled).

    >>> [apt_bool(v) for v in ("no", "Off", "0", "0x0", "yes", "1", "bogus")]
    [False, False, False, False, True, True, None]
    """
    text = text.strip(SPACE)
    number = re.fullmatch(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)  # strtol(text, 0)
    if number:
        digits = number[1]
        value = int(digits, 16) if digits[1:2] in ("x", "X") else int(digits, 8 if digits.startswith("0") else 10)
        if value in (0, 1) and not (value and text.startswith("-")):
            return bool(value)
    if text.lower() in ("no", "false", "without", "off", "disable"):
        return False
    if text.lower() in ("yes", "true", "with", "on", "enable"):
        return True
    return default


def quote_words(text):
    """apt's ParseQuoteWord over ``text``: words split at whitespace, ``"..."`` and
    ``[...]`` kept whole, quotes dropped, ``%xx`` decoded; None when a quote or bracket
    is left open (apt: malformed).

    >>> quote_words('cdrom:[Debian 12 DVD]/ bookworm "ma in" x%2Fy')
    ['cdrom:[Debian 12 DVD]/', 'bookworm', 'ma in', 'x/y']
    """
    words, index, size = [], 0, len(text)
    while True:
        while index < size and text[index] in SPACE:
            index += 1
        if index >= size:
            return words
        start = index
        while index < size and text[index] not in SPACE:
            for opening, closing in (('"', '"'), ("[", "]")):
                if index < size and text[index] == opening:
                    index = text.find(closing, index + 1)
                    if index < 0:
                        return None
            index += 1
        word, position = [], start
        while position < index:
            if text[position] == "%" and re.fullmatch(r"[0-9A-Fa-f]{2}", text[position + 1:position + 3]) \
                    and position + 2 < index:
                word.append(chr(int(text[position + 1:position + 3], 16)))
                position += 3
                continue
            if text[position] != '"':
                word.append(text[position])
            position += 1
        words.append("".join(word))


def _strip_comment(line):
    """A one-line entry without its comment: ``#`` outside ``[...]`` starts one (apt's
    ParseFileOldStyle), and spaces, tabs and carriage returns around it."""
    position = 0
    while (position := line.find("#", position)) >= 0:
        if line.count("[", 0, position) > line.count("]", 0, position):
            position += 1
            continue
        line = line[:position]
        break
    return line.strip(" \t\r")


def _options(text):
    """``a=b c=d`` option list of a one-line entry -> {name: value} (lower-case names)."""
    options = {}
    for word in (text or "").split():
        name, _, value = word.partition("=")
        options[name.lower()] = value
    return options


def one_line_records(text):
    """(line number, entry or None, problem or None) of each line apt reads as an entry
    of a one-line file: lines split at ``\\n`` only, as apt reads them.

    >>> [record[1:] for record in one_line_records("deb http://r/ / # NVIDIA\\n# x\\ndeb http://d/ bookworm\\n")]
    [({'types': ['deb'], 'uris': ['http://r/'], 'suites': ['/'], 'signed_by': None, 'trusted': False}, None), \
(None, 'line 3: a suite without components')]
    """
    records = []
    for number, raw in enumerate(text.split("\n")):
        line = _strip_comment(raw)
        if not line:
            continue
        kind = re.split(r"[ \t\v]", line, maxsplit=1)[0]
        rest = line[len(kind):].lstrip(SPACE)
        problem, entry = None, None
        options = OPTIONS.match(rest)
        if options:
            rest = rest[options.end():].lstrip(SPACE)
        words = quote_words(rest)
        if kind not in TYPES:
            problem = f"type {kind!r} is not known" if kind != line else "no type"
        elif rest.startswith("[") or words is None:
            problem = "an unclosed [option] list or quote"
        elif len(words) < 2:
            problem = "no URI and suite"
        elif ":" not in words[0]:
            problem = f"URI {words[0]!r} does not parse"
        elif words[1].endswith("/") and len(words) > 2:
            problem = "components after a flat suite (ending in /)"
        elif not words[1].endswith("/") and len(words) < 3:
            problem = "a suite without components"
        else:
            values = _options(options["options"] if options else "")
            entry = {"types": [kind], "uris": [words[0]], "suites": [words[1]],
                     "signed_by": values.get("signed-by") or None,
                     "trusted": apt_bool(values.get("trusted", ""), False)}
        records.append((number, entry, problem and f"line {number + 1}: {problem}"))
    return records


def one_line_entries(path, text):
    """Entries of a one-line format file; commented lines are not entries.

    >>> one_line_entries("/etc/apt/sources.list.d/cuda.list",
    ...     "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://r/debian12/x86_64/ /\\n# deb x y")
    [{'file': '/etc/apt/sources.list.d/cuda.list', 'format': 'one-line', 'line': 'deb \
[signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://r/debian12/x86_64/ /', 'types': ['deb'], \
'uris': ['https://r/debian12/x86_64/'], 'suites': ['/'], 'signed_by': '/usr/share/keyrings/cuda-archive-keyring.gpg', \
'trusted': False}]
    """
    lines = text.split("\n")
    return [{"file": path, "format": "one-line", "line": lines[number].strip(SPACE), **entry}
            for number, entry, _ in one_line_records(text) if entry]


def deb822_stanzas(text):
    """The stanzas apt reads in a deb822 file (apt-pkg/tagfile.cc with comments on):
    lines split at ``\\n``; a line starting with ``#`` is dropped before anything else
    (it neither ends a stanza nor breaks a field); an empty line, or one of carriage
    returns only, ends a stanza (one or more of them); a line starting with whitespace
    continues the field above (so a line of spaces is no separator); a field's name runs
    to its colon; a stanza of continuation lines only is no stanza. Each stanza:
    ``fields``, a list of {"name" (lower case), "value", "first", "last"} (line numbers,
    0-based), and ``values``, {name: value} with the last of a repeated field winning,
    as in apt.

    >>> [s["values"] for s in deb822_stanzas("A: 1\\n#c\\nB: 2\\n   \\n x\\n\\n\\n\\nC:\\n 3\\n")]
    [{'a': '1', 'b': '2\\n\\nx'}, {'c': '3'}]
    """
    stanzas, current, pending = [], None, None
    for number, line in enumerate(text.split("\n")):
        if line.startswith("#"):
            continue
        if pending is not None:  # a name without its colon yet: apt looks on for one
            name, sep, value = line.partition(":")
            pending["name"] += "\n" + name
            pending["last"] = number
            if sep:
                pending.update(name=pending["name"].strip(SPACE).lower(), value=value)
                pending = None
            continue
        if line.strip("\r") == "":
            if current and current["fields"]:
                stanzas.append(current)
            current = None
            continue
        if current is None:
            current = {"first": number, "last": number, "fields": []}
        current["last"] = number
        if line[0] in SPACE:
            if current["fields"]:
                current["fields"][-1]["value"] += "\n" + line.strip(SPACE)
                current["fields"][-1]["last"] = number
            continue
        name, sep, value = line.partition(":")
        field = {"name": name.strip(SPACE).lower(), "value": value, "first": number, "last": number}
        current["fields"].append(field)
        if not sep:
            pending = field
    if current and current["fields"]:
        stanzas.append(current)
    for stanza in stanzas:
        for field in stanza["fields"]:
            field["value"] = field["value"].strip(SPACE)
        stanza["values"] = {field["name"]: field["value"] for field in stanza["fields"]}
    return stanzas


def stanza_enabled(values):
    """apt skips a stanza whose ``Enabled`` is false (StringToBool; others count as yes)."""
    return apt_bool(values.get("enabled", "")) is not False


def deb822_problems(text):
    """What makes apt refuse a deb822 file (apt-pkg/sourcelist.cc ParseFileDeb822 and
    ParseStanza), one line each; [] when apt reads it.

    >>> deb822_problems("Types: deb\\nURIs: http://r/\\nSuites: /\\n\\n\\nEnabled: no\\n")
    ['stanza 2 (line 6): no Types']
    """
    problems = []
    for index, stanza in enumerate(deb822_stanzas(text), 1):
        values, where = stanza["values"], f"stanza {index} (line {stanza['first'] + 1})"
        types = values.get("types", "").split()
        if "types" not in values:
            problems.append(f"{where}: no Types")
            continue
        unknown = [kind for kind in types if kind not in TYPES]
        if unknown:
            problems.append(f"{where}: type {unknown[0]!r} is not known")
            continue
        if not stanza_enabled(values):
            continue
        uris, suites, components = (values.get(key, "").split() for key in ("uris", "suites", "components"))
        if not uris:
            problems.append(f"{where}: no URIs")
        elif not suites:
            problems.append(f"{where}: no Suites")
        elif any(":" not in uri for uri in uris):
            problems.append(f"{where}: a URI that does not parse")
        elif any(suite.endswith("/") for suite in suites) and components:
            problems.append(f"{where}: Components with a flat suite (ending in /)")
        elif any(not suite.endswith("/") for suite in suites) and not components:
            problems.append(f"{where}: a suite without Components")
    return problems


def source_problems(path, text):
    """What makes apt refuse the source file ``path`` holding ``text``; [] when it reads it."""
    if path.endswith(".sources"):
        return deb822_problems(text)
    return [problem for _, _, problem in one_line_records(text) if problem]


def deb822_entries(path, text):
    """Enabled stanzas of a deb822 ``.sources`` file; each keeps its index in the file.

    >>> deb822_entries("/x.sources", "Types: deb\\nURIs: http://m/r/\\nSuites: /\\nSigned-By: /k.gpg\\n\\n"
    ...                "Types: deb\\nURIs: http://o/\\nSuites: s\\nEnabled: no\\n")[0]["signed_by"]
    '/k.gpg'
    """
    entries = []
    for index, stanza in enumerate(deb822_stanzas(text)):
        fields = stanza["values"]
        if not fields.get("uris") or not stanza_enabled(fields):
            continue
        signed_by = fields.get("signed-by") or None
        entries.append({"file": path, "format": "deb822", "stanza": index, "types": fields.get("types", "").split(),
                        "uris": fields["uris"].split(), "suites": fields.get("suites", "").split(),
                        # An inline key block (deb822 allows one) is not a path.
                        "signed_by": signed_by if signed_by and signed_by.startswith("/") else signed_by and "inline",
                        "trusted": apt_bool(fields.get("trusted", ""), False)})
    return entries


def source_entries(files):
    """{path: text} of the node's source files -> every enabled entry.

    >>> len(source_entries({"/etc/apt/sources.list": "deb http://deb.debian.org/debian bookworm main\\n"}))
    1
    """
    entries = []
    for path, text in files.items():
        entries += deb822_entries(path, text) if path.endswith(".sources") else one_line_entries(path, text)
    return entries


def _dearmor(data):
    """The binary packets of an ASCII-armored key block, or ``data`` as it is."""
    text = data.decode("ascii", "replace")
    if "-----BEGIN PGP" not in text:
        return data
    body = text.split("-----BEGIN PGP", 1)[1].split("\n\n", 1)[-1].split("-----END PGP", 1)[0]
    lines = [line for line in body.strip().splitlines() if line and not line.startswith("=")]
    return base64.b64decode("".join(lines))


def _packets(data):
    """(tag, body) of each OpenPGP packet (old and new header formats)."""
    offset = 0
    while offset < len(data):
        header = data[offset]
        if not header & 0x80:
            raise ValueError("not an OpenPGP packet stream")
        if header & 0x40:  # new format
            tag, offset = header & 0x3F, offset + 1
            first = data[offset]
            if first < 192:
                length, offset = first, offset + 1
            elif first < 224:
                length, offset = ((first - 192) << 8) + data[offset + 1] + 192, offset + 2
            elif first == 255:
                length, offset = int.from_bytes(data[offset + 1:offset + 5], "big"), offset + 5
            else:
                raise ValueError("partial body lengths are not used by key packets")
        else:  # old format
            tag, kind = (header >> 2) & 0x0F, header & 0x03
            size = {0: 1, 1: 2, 2: 4}.get(kind)
            if size is None:
                raise ValueError("indeterminate packet length")
            length, offset = int.from_bytes(data[offset + 1:offset + 1 + size], "big"), offset + 1 + size
        yield tag, data[offset:offset + length]
        offset += length


def key_fingerprints(data):
    """Primary-key (tag 6) v4 fingerprints of a keyring, upper-case hex.

    >>> key_fingerprints(b"")
    []
    """
    fingerprints = []
    for tag, body in _packets(_dearmor(data)):
        if tag == 6 and body[:1] == b"\x04":
            digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest()
            fingerprints.append(digest.upper())
    return fingerprints


def keyring_fingerprints(encoded):
    """Fingerprints of a base64-encoded keyring the probe read, or None when unreadable."""
    try:
        return key_fingerprints(base64.b64decode(encoded))
    except (ValueError, IndexError, binascii.Error):
        return None
