"""The keyring fact pinned_keyring trusts (facts/keyring.py), its real command run here:
a keyring counts only as a regular file that root alone can change."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from facts.keyring import KeyringFingerprints

DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


def fact(path):
    command = KeyringFingerprints().command(str(path))
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
    return KeyringFingerprints().process(run.stdout.splitlines())


@pytest.mark.parametrize("mode,link", [(0o644, False), (0o664, False), (0o646, False), (0o2644, False),
                                       (0o644, True)])
def test_only_a_keyring_root_alone_can_change_counts(tmp_path, mode, link):
    keyring = tmp_path / "k.gpg"
    shutil.copyfile(DEBIAN_KEYRING, keyring)
    keyring.chmod(mode)
    path = keyring
    if link:
        path = tmp_path / "link.gpg"
        path.symlink_to(keyring)
    found = fact(path)
    counts = mode & 0o022 == 0 and not link and os.geteuid() == 0  # not root's: never counts
    assert ("1F89983E0081FDE018F3CC9673A4F27B8DD47936" in found) is counts, found
    assert counts or found == []
