"""apt sources found on a node: which one serves the CUDA repository, adopted or disabled."""

import base64
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.plan import plan
from bringup.apt_source_edit import disabled
from bringup.apt_sources import key_fingerprints
from facts.probe_output import build_document
from tests.unit.scenarios import converged, varied

URL = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
PINNED = Config().cuda_repo_fingerprint
NVIDIA_LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
NVIDIA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
OURS = "/etc/apt/sources.list.d/nvidia-cuda.sources"
OUR_KEYRING = "/etc/apt/keyrings/nvidia-cuda.gpg"


def one_line(path, keyring, options=""):
    return {"file": path, "format": "one-line", "line": f"deb [signed-by={keyring}{options}] {URL} /",
            "types": ["deb"], "uris": [URL], "suites": ["/"], "signed_by": keyring, "trusted": "trusted" in options}


def ours():
    return {"file": OURS, "format": "deb822", "stanza": 0, "types": ["deb"], "uris": [URL], "suites": ["/"],
            "signed_by": OUR_KEYRING, "trusted": False}


def chain(keyring, user="root", mode="644", kind="regular file", parent_user="root", parent_mode="755"):
    """The keyring's path chain as the probe (files/probe.d/) reports it: the file, then each directory up to /."""
    items = [{"path": keyring, "user": user, "mode": mode, "kind": kind}]
    path = keyring.rsplit("/", 1)[0]
    items.append({"path": path, "user": parent_user, "mode": parent_mode, "kind": "directory"})
    while path.count("/") > 1:
        path = path.rsplit("/", 1)[0]
        items.append({"path": path, "user": "root", "mode": "755", "kind": "directory"})
    return items + [{"path": "/", "user": "root", "mode": "755", "kind": "directory"}]


def nvidia(keys, **stat):
    """NVIDIA's cuda-keyring source, its keyring holding ``keys`` with ``stat`` (chain())."""
    return {"sources": [one_line(NVIDIA_LIST, NVIDIA_KEYRING)], "keyrings": {NVIDIA_KEYRING: keys},
            "keyring_paths": {NVIDIA_KEYRING: chain(NVIDIA_KEYRING, **stat)}}


# name, apt facts, adopt, source file, keyring, files disabled, findings (code, severity)
CASES = [
    ("clean node", {"sources": [], "keyrings": {}}, False, OURS, OUR_KEYRING, (), []),
    ("our own source only", {"sources": [ours()], "keyrings": {OUR_KEYRING: [PINNED]}}, False, OURS, OUR_KEYRING,
     (), []),
    ("NVIDIA's cuda-keyring with only the pinned key, root's, is adopted", nvidia([PINNED]),
     True, NVIDIA_LIST, NVIDIA_KEYRING, (), [("APT_SOURCE_CONFLICT", "info")]),
    ("the pinned key twice (a subkey is not a key) is still only the pinned key", nvidia([PINNED, PINNED]),
     True, NVIDIA_LIST, NVIDIA_KEYRING, (), [("APT_SOURCE_CONFLICT", "info")]),
    ("a keyring with a second key is not adopted", nvidia([PINNED, "A" * 40]),
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("a keyring another user owns is not adopted", nvidia([PINNED], user="alice"),
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("a group-writable keyring is not adopted", nvidia([PINNED], mode="664"),
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("a keyring in a directory others may write is not adopted", nvidia([PINNED], parent_mode="1777"),
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("a keyring in a user's directory is not adopted", nvidia([PINNED], parent_user="alice", parent_mode="700"),
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("a keyring that is a link is not adopted", nvidia(None, mode="777", kind="symbolic link"),
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("a keyring whose owner was not probed (an older report) is not adopted",
     {"sources": [one_line(NVIDIA_LIST, NVIDIA_KEYRING)], "keyrings": {NVIDIA_KEYRING: [PINNED]}},
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    # (keyrings of another shape are refused by the facts schema: test_bad_input)
    ("keyring path facts of another shape adopt nothing and raise nothing",
     dict(nvidia([PINNED]), keyring_paths={NVIDIA_KEYRING: "root 644"}),
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("NVIDIA's source beside ours (apt broken): ours goes",
     dict(nvidia([PINNED]), sources=[ours(), one_line(NVIDIA_LIST, NVIDIA_KEYRING)],
          keyrings={NVIDIA_KEYRING: [PINNED], OUR_KEYRING: [PINNED]}),
     True, NVIDIA_LIST, NVIDIA_KEYRING, (OURS,), [("APT_SOURCE_CONFLICT", "info"), ("APT_SOURCE_CONFLICT", "fix")]),
    ("a source whose keyring holds another key is disabled",
     {"sources": [one_line(NVIDIA_LIST, NVIDIA_KEYRING)], "keyrings": {NVIDIA_KEYRING: ["A" * 40]}},
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("trusted=yes is never adopted",
     {"sources": [one_line(NVIDIA_LIST, NVIDIA_KEYRING, " trusted=yes")], "keyrings": {NVIDIA_KEYRING: [PINNED]}},
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("an unreadable keyring is not adopted",
     {"sources": [one_line(NVIDIA_LIST, NVIDIA_KEYRING)], "keyrings": {NVIDIA_KEYRING: None}},
     False, OURS, OUR_KEYRING, (NVIDIA_LIST,), [("APT_SOURCE_CONFLICT", "fix")]),
    ("another repository is left alone",
     {"sources": [dict(one_line("/etc/apt/sources.list", "/k"), uris=["http://deb.debian.org/debian"])],
      "keyrings": {}}, False, OURS, OUR_KEYRING, (), []),
]


@pytest.mark.parametrize("name,apt,adopt,source,keyring,disable,findings", CASES, ids=[c[0] for c in CASES])
def test_sources_of_the_repository(name, apt, adopt, source, keyring, disable, findings):
    node = plan(varied(converged(), apt=apt), Config())
    assert (node.repo.adopt, node.repo.source_file, node.repo.keyring, node.repo.disable) == \
        (adopt, source, keyring, disable)
    assert [(f.code, f.severity) for f in node.findings if f.code == "APT_SOURCE_CONFLICT"] == findings


@pytest.mark.parametrize("apt,why", [
    (nvidia(["A" * 40]), f"holds {'A' * 40}, not {PINNED}"),
    (nvidia([PINNED, "B" * 40]), f"holds the pinned key and also {'B' * 40}"),
    (nvidia([PINNED], user="alice"), f"{NVIDIA_KEYRING} is owned by alice, not root"),
    (nvidia([PINNED], mode="666"), f"{NVIDIA_KEYRING} is writable by others (mode 666)"),
    (nvidia([PINNED], parent_mode="775"), "/usr/share/keyrings is writable by its group (mode 775)"),
    (nvidia(None, kind="symbolic link"), "it is a symbolic link, not a regular file"),
])
def test_conflict_message_names_the_file_and_why(apt, why):
    node = plan(varied(converged(), apt=apt), Config())
    finding = next(f for f in node.findings if f.code == "APT_SOURCE_CONFLICT")
    assert NVIDIA_LIST in finding.message and why in finding.message, finding.message


@pytest.mark.parametrize("path,text,expected", [
    (NVIDIA_LIST, f"deb [signed-by={NVIDIA_KEYRING}] {URL} /\n", ("rename", NVIDIA_LIST + ".disabled-by-gpu-bringup")),
    ("/etc/apt/sources.list", f"deb http://deb.debian.org/debian bookworm main\ndeb {URL} /\n",
     ("rewrite", f"deb http://deb.debian.org/debian bookworm main\n# Disabled by gpu-bringup (r): deb {URL} /\n")),
    ("/etc/apt/sources.list.d/mixed.sources",
     f"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n\n"
     f"Types: deb\nURIs: {URL}\nSuites: /\n",
     ("rewrite", f"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n\n"
                 f"# Disabled by gpu-bringup (r)\n"
                 f"Enabled: no\nTypes: deb\nURIs: {URL}\nSuites: /\n")),
    ("/etc/apt/sources.list.d/other.list", "deb http://deb.debian.org/debian bookworm main\n", None),
])
def test_disabling_keeps_the_operators_other_entries(path, text, expected):
    assert disabled(path, text, URL, "r") == expected


def test_keyring_fingerprints_match_gpg():
    """The probe's keyrings are fingerprinted on the control side; Debian's archive keyring
    (in this machine's debian-archive-keyring) has a key gpg lists first."""
    data = Path("/usr/share/keyrings/debian-archive-keyring.gpg").read_bytes()
    assert "1F89983E0081FDE018F3CC9673A4F27B8DD47936" in key_fingerprints(data)
    armored = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n" + base64.encodebytes(data) + \
        b"=abcd\n-----END PGP PUBLIC KEY BLOCK-----\n"
    assert key_fingerprints(armored) == key_fingerprints(data)


def test_probe_output_to_apt_facts():
    key = base64.b64encode(Path("/usr/share/keyrings/debian-archive-keyring.gpg").read_bytes()).decode()
    lines = ["@@ os-release rc=0", "|ID=debian", f"@@ apt-source rc=0 file={NVIDIA_LIST}",
             f"|deb [signed-by={NVIDIA_KEYRING}] {URL} /", f"@@ apt-keyring rc=0 file={NVIDIA_KEYRING}", f"|{key}"]
    apt = build_document(lines, ["apt"])["apt"]
    assert apt["sources"][0]["signed_by"] == NVIDIA_KEYRING and apt["sources"][0]["uris"] == [URL]
    assert "1F89983E0081FDE018F3CC9673A4F27B8DD47936" in apt["keyrings"][NVIDIA_KEYRING]
