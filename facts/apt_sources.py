"""apt's sources as the node has them, and the keys of the keyrings they name.

Pure parsing of what the probe prints (files/probe.sh, ``apt`` section): every source
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

ONE_LINE = re.compile(r"^(?P<type>deb|deb-src)\s+(?:\[(?P<options>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)"
                      r"(?P<components>(?:\s+\S+)*)\s*$")


def _options(text):
    """``[a=b c=d]`` option list of a one-line entry -> {name: value} (lower-case names)."""
    options = {}
    for word in (text or "").split():
        name, _, value = word.partition("=")
        options[name.lower()] = value
    return options


def one_line_entries(path, text):
    """Entries of a one-line format file; commented lines are not entries.

    >>> one_line_entries("/etc/apt/sources.list.d/cuda.list",
    ...     "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://r/debian12/x86_64/ /\\n# deb x y")
    [{'file': '/etc/apt/sources.list.d/cuda.list', 'format': 'one-line', 'line': 'deb \
[signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://r/debian12/x86_64/ /', 'types': ['deb'], \
'uris': ['https://r/debian12/x86_64/'], 'suites': ['/'], 'signed_by': '/usr/share/keyrings/cuda-archive-keyring.gpg', \
'trusted': False}]
    """
    entries = []
    for line in text.splitlines():
        match = ONE_LINE.match(line.strip())
        if not match:
            continue
        options = _options(match["options"])
        entries.append({"file": path, "format": "one-line", "line": line.strip(), "types": [match["type"]],
                        "uris": [match["uri"]], "suites": [match["suite"]],
                        "signed_by": options.get("signed-by") or None, "trusted": options.get("trusted") == "yes"})
    return entries


def deb822_entries(path, text):
    """Enabled stanzas of a deb822 ``.sources`` file; each keeps its index in the file.

    >>> deb822_entries("/x.sources", "Types: deb\\nURIs: http://m/r/\\nSuites: /\\nSigned-By: /k.gpg\\n\\n"
    ...                "Types: deb\\nURIs: http://o/\\nSuites: s\\nEnabled: no\\n")[0]["signed_by"]
    '/k.gpg'
    """
    entries = []
    for index, stanza in enumerate(re.split(r"\n\s*\n", text)):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1].isspace() and key:
                fields[key] += "\n" + line.strip()
                continue
            key, sep, value = line.partition(":")
            if sep:
                key = key.strip().lower()
                fields[key] = value.strip()
        if not fields.get("uris") or fields.get("enabled", "yes").lower() == "no":
            continue
        signed_by = fields.get("signed-by") or None
        entries.append({"file": path, "format": "deb822", "stanza": index, "types": fields.get("types", "").split(),
                        "uris": fields["uris"].split(), "suites": fields.get("suites", "").split(),
                        # An inline key block (deb822 allows one) is not a path.
                        "signed_by": signed_by if signed_by and signed_by.startswith("/") else signed_by and "inline",
                        "trusted": fields.get("trusted", "no").lower() == "yes"})
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
