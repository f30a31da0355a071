"""The sandbox repository's signing key (GnuPG, generated once) and signing.

The GNUPGHOME (``build.GNUPGHOME``: one per machine, mode 0700) holds one ed25519 key
without passphrase, made with ``gpg --batch --quick-gen-key``. Every call stops the
gpg-agent it started, so nothing is left running; checkouts sharing the home take
turns (a lock file beside it), so one's stop never ends another's signing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sandbox.fsutil import file_lock

KEY_UID = "gpu-bringup sandbox CUDA repository (local test key) <cuda-sandbox@localhost>"


class GnuPG:
    def __init__(self, home: Path):
        self.home = Path(home)

    def _turn(self):
        """This home to ourselves, until the agent we start is stopped."""
        return file_lock(self.home.with_name(f".{self.home.name}.lock"))

    def _run(self, *args: str, input: bytes | None = None) -> bytes:
        cmd = ["gpg", "--homedir", str(self.home), "--batch", "--quiet", "--no-tty",
               "--pinentry-mode", "loopback", "--passphrase", "", *args]
        proc = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.decode(errors='replace')}")
        return proc.stdout

    def stop_agent(self) -> None:
        subprocess.run(["gpgconf", "--homedir", str(self.home), "--kill", "gpg-agent"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _fingerprint(self) -> str | None:
        """Fingerprint (40 hex, upper case) of the secret key, None without one."""
        if not self.home.is_dir():
            return None
        out = self._run("--with-colons", "--list-secret-keys").decode()
        fprs = _primary_fprs(out)
        return fprs[0] if fprs else None

    def ensure_key(self, uid: str = KEY_UID) -> str:
        """Create the home and the key if missing; return the fingerprint."""
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.home, 0o700)
        with self._turn():
            try:
                fpr = self._fingerprint()
                if fpr is None:
                    self._run("--quick-gen-key", uid, "ed25519", "sign", "never")
                    fpr = self._fingerprint()
                if fpr is None:
                    raise RuntimeError(f"gpg made no key in {self.home}")
                return fpr
            finally:
                self.stop_agent()

    def export(self, fpr: str, armor: bool) -> bytes:
        with self._turn():
            return self._run(*(["--armor"] if armor else []), "--export-options", "export-minimal",
                             "--export", fpr)

    def sign_release(self, repo: Path, fpr: str) -> None:
        """Write InRelease (clear-signed) and Release.gpg (detached) for repo/Release."""
        release = str(Path(repo) / "Release")
        with self._turn():
            try:
                self._run("--yes", "--local-user", fpr, "--digest-algo", "SHA512",
                          "--clearsign", "--output", str(Path(repo) / "InRelease"), release)
                self._run("--yes", "--local-user", fpr, "--digest-algo", "SHA512",
                          "--armor", "--detach-sign", "--output", str(Path(repo) / "Release.gpg"), release)
            finally:
                self.stop_agent()


def show_fingerprints(key_file: Path, scratch_home: Path) -> list[str]:
    """Fingerprints (upper case) of the keys in an armored or binary key file."""
    scratch_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    out = subprocess.run(["gpg", "--homedir", str(scratch_home), "--batch", "--with-colons",
                          "--show-keys", str(key_file)], check=True, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    return _primary_fprs(out)


def _primary_fprs(colons: str) -> list[str]:
    """Primary-key fingerprints from gpg --with-colons output (not subkeys')."""
    fprs, want = [], False
    for line in colons.splitlines():
        kind = line.split(":", 1)[0]
        if kind in ("pub", "sec"):
            want = True
        elif kind in ("sub", "ssb"):
            want = False
        elif kind == "fpr" and want:
            fprs.append(line.split(":")[9].upper())
            want = False
    return fprs
