"""A repository directory's ``Packages`` index, read only through its signed ``Release``
(what apt does before it trusts an index; ``make lock``, control/locks.py).

``InRelease`` (else ``Release`` with ``Release.gpg``) is verified with ``gpgv`` against
a keyring that holds the pinned key alone (fetched from ``key_url``, checked and reduced
by ``gpg`` in a scratch home); the ``Packages`` file read must then have the size and
sha256 the signed text lists for it. Only the text gpgv says was signed is parsed,
never the bytes around a clear signature. Every failure is a LockError, one line.
Sources: apt's acquire-item.cc and gpgv.cc (InRelease first, no fallback from a bad
one; SHA1/MD5 signatures refused), gpg's doc/DETAILS (``VALIDSIG`` status line).
"""

import gzip
import hashlib
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from bringup.locks import LockError

# OpenPGP hash algorithms (RFC 4880 9.4) apt refuses in a signature: MD5, SHA1, RIPEMD160.
WEAK_HASHES = {"1", "2", "3"}
INDEXES = ("Packages.gz", "Packages")


def read_url(url):
    """The bytes at ``url`` (http(s) or file), or None when it is not there."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except (urllib.error.URLError, OSError, ValueError):
        return None


def release_sha256(text):
    """{file name: (size, sha256)} of a Release file's ``SHA256`` field.

    >>> release_sha256("Origin: NVIDIA\\nSHA256:\\n 9f86d0 120 Packages\\n ab12 60 Packages.gz\\nSHA512:\\n x 1 y\\n")
    {'Packages': (120, '9f86d0'), 'Packages.gz': (60, 'ab12')}
    """
    listed, inside = {}, False
    for line in text.splitlines():
        if not line[:1].isspace():
            inside = line.split(":", 1)[0].strip().lower() == "sha256"
            continue
        words = line.split()
        if inside and len(words) == 3 and words[1].isdigit():
            listed[words[2]] = (int(words[1]), words[0].lower())
    return listed


def _pinned_keyring(key, fingerprint, key_url, work):
    """A keyring file of the pinned key alone, from the key file published at ``key_url``."""
    home = work / "gnupg"
    home.mkdir(mode=0o700)
    gpg = ["gpg", "--homedir", str(home), "--batch", "--quiet", "--no-autostart"]
    (work / "key").write_bytes(key)
    subprocess.run(gpg + ["--import", str(work / "key")], capture_output=True)
    exported = subprocess.run(gpg + ["--export", fingerprint], capture_output=True).stdout
    if not exported:
        raise LockError(f"the key at {key_url} is not {fingerprint}; check the repository's signing key and "
                        "its pinned fingerprint (cuda_repo_fingerprint)")
    (work / "keyring.gpg").write_bytes(exported)
    return work / "keyring.gpg"


def _gpgv(keyring, fingerprint, args, where):
    """Run gpgv; the signer must be the pinned key, with a hash apt accepts."""
    if shutil.which("gpgv") is None:
        raise LockError("gpgv is not installed (Debian/Ubuntu: apt-get install gpgv); make lock checks the "
                        "repository's signature with it")
    run = subprocess.run(["gpgv", "--keyring", str(keyring), "--status-fd", "1", *args], capture_output=True,
                         text=True)
    signers = [line.split() for line in run.stdout.splitlines() if line.startswith("[GNUPG:] VALIDSIG ")]
    if run.returncode != 0 or not signers:
        detail = (run.stderr.strip().splitlines() or [f"gpgv exited {run.returncode}"])[-1]
        raise LockError(f"{where} is not signed by the pinned key {fingerprint} ({detail}); the index is not read")
    for fields in signers:
        primary = fields[11] if len(fields) > 11 else fields[2]
        if primary.upper() != fingerprint:
            raise LockError(f"{where} is signed by {primary}, not the pinned key {fingerprint}")
        if fields[9] in WEAK_HASHES:
            raise LockError(f"{where} is signed with a weak hash (OpenPGP algorithm {fields[9]}); apt refuses it")


def signed_release(url, fingerprint, key_url="", read=read_url):
    """The signed text of ``<url>InRelease`` (else ``Release`` + ``Release.gpg``) and
    the file it came from, verified against the pinned key."""
    fingerprint = fingerprint.replace(" ", "").upper()
    inrelease = read(url + "InRelease")
    release, signature = (None, None) if inrelease is not None else (read(url + "Release"),
                                                                       read(url + "Release.gpg"))
    if inrelease is None and (release is None or signature is None):
        missing = "Release" if release is None else "Release.gpg"
        raise LockError(f"cannot read {url}InRelease or {url}{missing}: the repository's index cannot be checked "
                        "(apt would refuse it); set CUDA_REPO_URL to a reachable mirror with NVIDIA's layout, "
                        "or limit CUDA_PLATFORMS to the directories it serves")
    key_url = key_url or f"{url}{fingerprint[-8:].lower()}.pub"
    key = read(key_url)
    if key is None:
        raise LockError(f"cannot read the repository's key {key_url}; set the key's URL (cuda_repo_key_url)")
    with tempfile.TemporaryDirectory(prefix="lock-release-") as work:
        work = Path(work)
        keyring = _pinned_keyring(key, fingerprint, key_url, work)
        if inrelease is not None:
            (work / "InRelease").write_bytes(inrelease)
            _gpgv(keyring, fingerprint, ["--output", str(work / "signed"), str(work / "InRelease")],
                  url + "InRelease")
            return (work / "signed").read_bytes().decode("utf-8", "replace"), url + "InRelease"
        (work / "Release").write_bytes(release)
        (work / "Release.gpg").write_bytes(signature)
        _gpgv(keyring, fingerprint, [str(work / "Release.gpg"), str(work / "Release")], url + "Release")
        return release.decode("utf-8", "replace"), url + "Release"


def signed_index(url, fingerprint, key_url="", read=read_url):
    """The text of ``<url>Packages.gz`` (else ``Packages``) and its URL, when the
    repository's signed Release lists it with that size and sha256."""
    release, where = signed_release(url, fingerprint, key_url, read)
    listed = release_sha256(release)
    names = [name for name in INDEXES if name in listed]
    if not names:
        raise LockError(f"{where} lists no SHA256 for Packages or Packages.gz; the index cannot be checked")
    for name in names:
        data = read(url + name)
        if data is None:
            continue
        size, digest = listed[name]
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise LockError(f"{url}{name} does not match the sha256 its signed {where.rsplit('/', 1)[1]} lists "
                            "(changed or corrupt); the index is not read")
        try:
            text = (gzip.decompress(data) if name.endswith(".gz") else data).decode("utf-8")
        except (OSError, EOFError, UnicodeDecodeError) as error:
            raise LockError(f"{url}{name}: {error}") from None
        return text, url + name
    raise LockError(f"cannot read {url}{names[0]} (listed in {where}); set CUDA_REPO_URL to a reachable mirror")

