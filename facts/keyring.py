"""Fingerprints of the keys in an apt keyring file."""

import shlex

from pyinfra.api import FactBase


class KeyringFingerprints(FactBase):
    """
    Returns the primary-key fingerprints in a keyring file (upper-case hex), or []
    when the file is missing or unreadable, or when someone but root could change it
    (not a regular file: a link; not root's; writable by its group or others): the
    keyring is then written again, whole, by root.

    + path: the keyring file (binary or armored)

    .. code:: python

        host.get_fact(KeyringFingerprints, path="/etc/apt/keyrings/nvidia-cuda.gpg")
        # ["EB693B3035CD5710E231E123A4B469963BF863CC"]
    """

    @staticmethod
    def default():
        return []

    def requires_command(self, path):
        return "gpg"

    def command(self, path):
        # A throwaway GNUPGHOME: reading a keyring must not create ~/.gnupg.
        quoted = shlex.quote(path)
        return (
            f"test -r {quoted} && test -f {quoted} && ! test -L {quoted} || exit 0; "
            f"case $(stat -c '%u %a' {quoted}) in '0 '*[2367]? | '0 '*[2367] | [!0]* | 0?*' '*) exit 0 ;; esac; "
            "d=$(mktemp -d); "
            f"GNUPGHOME=$d gpg --batch --with-colons --show-keys {quoted} 2>/dev/null; rm -rf \"$d\""
        )

    def process(self, output):
        return primary_fingerprints(output)


def primary_fingerprints(lines):
    """Fingerprints of primary keys from ``gpg --with-colons`` output.

    >>> primary_fingerprints(["pub:-:4096:1:A4B469963BF863CC:::::", "fpr:::::::::EB69...63CC:"])
    ['EB69...63CC']
    """
    fingerprints = []
    expect_primary = False
    for line in lines:
        fields = line.split(":")
        if fields[0] == "pub":
            expect_primary = True
        elif fields[0] == "fpr" and expect_primary and len(fields) > 9:
            fingerprints.append(fields[9].upper())
            expect_primary = False
        elif fields[0] == "sub":
            expect_primary = False
    return fingerprints
