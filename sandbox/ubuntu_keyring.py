"""Ubuntu's archive keyring for debootstrapping Ubuntu roots from this Debian machine.

Debian 12 has no ``ubuntu-keyring`` package, so the keyring comes from Ubuntu's own
package, fetched once from Ubuntu's archive and trusted only by pins held here: the
.deb's SHA-256 and the fingerprints of the keys its ``ubuntu-archive-keyring.gpg``
must hold. debootstrap then checks every Release file it reads against that keyring
(``--keyring``), as apt on the node does against the same file.

Source of the pins: Ubuntu 24.04's index (archive.ubuntu.com dists/noble/main/
binary-amd64/Packages.gz, read 2026-12-02): ``ubuntu-keyring`` 2023.11.28.1,
``Filename: pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb``, its
SHA256 below; the keys it holds (FINGERPRINTS), of which "Ubuntu Archive Automatic
Signing Key (2018)" is the one debootstrap reports for jammy's and noble's
Release ("Valid Release signature (key id F6ECB3762474EDA9D21B7022871920D1991BC93C)").
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from control.atomic import atomic_write

DEB_URL = ("http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/"
           "ubuntu-keyring_2023.11.28.1_all.deb")
DEB_SHA256 = "36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8"
MEMBER = "usr/share/keyrings/ubuntu-archive-keyring.gpg"
FINGERPRINTS = frozenset({
    "790BC7277767219C42C86F933B4FE6ACC0B21F32",  # Ubuntu Archive Automatic Signing Key (2012)
    "843938DF228D22F7B3742BC0D94AA3F0EFE21092",  # Ubuntu CD Image Automatic Signing Key (2012)
    "F6ECB3762474EDA9D21B7022871920D1991BC93C",  # Ubuntu Archive Automatic Signing Key (2018)
})


def fingerprints(keyring: Path) -> set[str]:
    """The primary key fingerprints a binary keyring holds (gpg --show-keys, no keyring touched)."""
    with tempfile.TemporaryDirectory() as home:
        out = subprocess.run(["gpg", "--batch", "--with-colons", "--show-keys", str(keyring)], capture_output=True,
                             text=True, check=True, env={**os.environ, "GNUPGHOME": home}).stdout
    lines = out.splitlines()
    # A key's fpr line follows its pub line (subkeys' follow sub lines).
    return {lines[i + 1].split(":")[9] for i, line in enumerate(lines[:-1])
            if line.startswith("pub:") and lines[i + 1].startswith("fpr:")}


def check_deb(data: bytes) -> None:
    """ValueError unless *data* is the pinned package.

    >>> check_deb(b"not it")
    Traceback (most recent call last):
    ...
    ValueError: ubuntu-keyring .deb from http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/\
ubuntu-keyring_2023.11.28.1_all.deb has SHA-256 06121725..., not the pinned 36de43b1...
    """
    digest = hashlib.sha256(data).hexdigest()
    if digest != DEB_SHA256:
        raise ValueError(f"ubuntu-keyring .deb from {DEB_URL} has SHA-256 {digest[:8]}..., "
                         f"not the pinned {DEB_SHA256[:8]}...")


def archive_keyring(cache: Path) -> Path:
    """The checked keyring, cached in *cache* (fetched, checked and written whole once)."""
    path = cache / "ubuntu-archive-keyring.gpg"
    if path.is_file() and fingerprints(path) == FINGERPRINTS:
        return path
    with urllib.request.urlopen(DEB_URL, timeout=60) as response:  # noqa: S310 (pinned by hash)
        data = response.read()
    check_deb(data)
    with tempfile.TemporaryDirectory() as tmp:
        deb = Path(tmp) / "ubuntu-keyring.deb"
        deb.write_bytes(data)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(Path(tmp) / "x")], check=True)
        keyring = Path(tmp) / "x" / MEMBER
        found = fingerprints(keyring)
        if found != FINGERPRINTS:
            raise ValueError(f"{MEMBER} in {DEB_URL} holds keys {sorted(found)}, not {sorted(FINGERPRINTS)}")
        cache.mkdir(parents=True, exist_ok=True)
        atomic_write(path, keyring.read_bytes(), 0o644)
    return path
