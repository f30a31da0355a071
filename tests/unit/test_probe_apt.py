"""The probe's apt part (files/probe.d/apt.sh), the real script with its /etc/apt moved to a scratch
directory: every source file, and for each keyring a signed-by names who may change it
(the keyring and each directory up to /, not following a link) and its keys."""

import os
import pwd
import stat
import subprocess
from pathlib import Path

from facts.probe_output import build_document
from facts.probe_script import probe_script

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
URL = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"


def probe_apt(etc_apt):
    """The apt part of the facts document, from the probe reading ``etc_apt`` as /etc/apt."""
    script = probe_script().replace("/etc/apt/", f"{etc_apt}/")
    run = subprocess.run(["sh", "-c", script], env={"PATH": "/usr/bin:/bin", "PROBE_SECTIONS": "apt"},
                         capture_output=True, text=True, timeout=60, check=True)
    return build_document(run.stdout.splitlines(), ["apt"])["apt"]


def stat_chain(path):
    """What the probe must report for ``path``: it and each directory above it, by lstat."""
    chain = []
    while True:
        info = os.lstat(path)
        kind = {stat.S_IFREG: "regular file", stat.S_IFDIR: "directory", stat.S_IFLNK: "symbolic link"}[
            stat.S_IFMT(info.st_mode)]
        chain.append({"path": str(path), "user": pwd.getpwuid(info.st_uid).pw_name,
                      "mode": format(stat.S_IMODE(info.st_mode), "o"), "kind": kind})
        if str(path) == "/":
            return chain
        path = path.parent


def scratch(tmp_path, keyring_line):
    etc = tmp_path / "etc" / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "cuda-debian12-x86_64.list").write_text(keyring_line)
    return etc


def test_a_keyring_is_reported_with_its_owner_mode_kind_and_keys(tmp_path):
    keyrings = tmp_path / "keyrings"
    keyrings.mkdir(mode=0o755)
    keyring = keyrings / "cuda-archive-keyring.gpg"
    keyring.write_bytes(DEBIAN_KEYRING.read_bytes())
    keyring.chmod(0o664)
    apt = probe_apt(scratch(tmp_path, f"deb [signed-by={keyring}] {URL} /\n"))
    assert apt["keyring_paths"][str(keyring)] == stat_chain(keyring)
    assert apt["keyring_paths"][str(keyring)][0]["mode"] == "664"
    assert "1F89983E0081FDE018F3CC9673A4F27B8DD47936" in apt["keyrings"][str(keyring)]
    assert apt["sources"][0]["signed_by"] == str(keyring)


def test_a_linked_keyring_is_reported_as_a_link_and_not_read(tmp_path):
    link = tmp_path / "cuda.gpg"
    link.symlink_to(DEBIAN_KEYRING)
    etc = scratch(tmp_path, "")
    (etc / "sources.list.d" / "cuda.sources").write_text(
        f"Types: deb\nURIs: {URL}\nSuites: /\nSIGNED-BY: {link}\n")
    apt = probe_apt(etc)
    assert apt["keyring_paths"][str(link)][0] == {"path": str(link), "user": stat_chain(link)[0]["user"],
                                                  "mode": "777", "kind": "symbolic link"}
    assert apt["keyrings"][str(link)] is None


def test_a_fingerprint_or_a_pattern_is_no_path(tmp_path):
    apt = probe_apt(scratch(tmp_path, f"deb [signed-by=EB693B3035CD5710E231E123A4B469963BF863CC] {URL} /\n"
                                      f"deb [signed-by=/usr/share/keyrings/*] {URL} /\n"))
    assert apt["keyrings"] == {"EB693B3035CD5710E231E123A4B469963BF863CC": None, "/usr/share/keyrings/*": None}
    assert apt["keyring_paths"]["EB693B3035CD5710E231E123A4B469963BF863CC"] == []
    # Not expanded: the (missing) file itself is not in its chain, its directories are.
    assert apt["keyring_paths"]["/usr/share/keyrings/*"] == stat_chain(Path("/usr/share/keyrings"))
