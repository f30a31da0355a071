"""Operations for the CUDA repository (key, conflicting sources), dpkg recovery,
toolkit checks and the /usr/local/cuda alternative."""

import shlex
from io import StringIO

from pyinfra import host
from pyinfra.api import operation
from pyinfra.facts.files import FileContents

from bringup import apt_source_edit
from bringup.layout import CUDA_LINK

from facts.dpkg import DpkgUnfinished
from facts.keyring import KeyringFingerprints
from facts.toolkit import CudaLink, NvccRelease
from tasks.operations.files import whole_file


@operation()
def pinned_keyring(key_url, fingerprint, path):
    """
    Install a repository signing key, only if its fingerprint is the pinned one.

    + key_url: where the key is published (armored or binary)
    + fingerprint: the pinned 40-hex-digit fingerprint
    + path: the keyring file apt's ``Signed-By`` names

    The key is fetched into a temporary directory, checked, reduced to the pinned
    key and moved into place (write, then rename); a mismatch fails the host and
    leaves the old keyring untouched.

    **Example**:

    .. code:: python

        pinned_keyring(
            key_url="https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub",
            fingerprint="EB693B3035CD5710E231E123A4B469963BF863CC",
            path="/etc/apt/keyrings/nvidia-cuda.gpg",
        )
    """
    fingerprint = fingerprint.replace(" ", "").upper()
    if host.get_fact(KeyringFingerprints, path=path) == [fingerprint]:
        host.noop(f"keyring {path} already holds {fingerprint}")
        return
    url, target = shlex.quote(key_url), shlex.quote(path)
    mismatch = shlex.quote(
        f"{host.name}: the key at {key_url} is not {fingerprint}; check cuda_repo_key_url "
        "and cuda_repo_fingerprint (a mirror must publish the key it signs with)"
    )
    yield (
        "set -e; umask 022; d=$(mktemp -d); trap 'rm -rf \"$d\"' EXIT; "
        f"curl -fsSL --retry 3 -o \"$d/key\" {url}; "
        f"GNUPGHOME=\"$d\" gpg --batch --quiet --import \"$d/key\" 2>/dev/null; "
        f"if ! GNUPGHOME=\"$d\" gpg --batch --list-keys {fingerprint} >/dev/null 2>&1; then "
        f"echo {mismatch} >&2; exit 1; fi; "
        f"mkdir -p -m 0755 \"$(dirname {target})\"; "
        f"GNUPGHOME=\"$d\" gpg --batch --export {fingerprint} > \"$d/keyring.gpg\"; "
        f"install -m 0644 -o root -g root \"$d/keyring.gpg\" {target}.new; "
        f"mv -f {target}.new {target}"
    )


@operation()
def finish_interrupted_dpkg(packages=()):
    """
    Finish what an interrupted dpkg/apt run left behind: ``packages`` (the toolkit's)
    that a killed unpack left reinstall-required are removed, so that apt installs
    them whole again, then ``dpkg --configure -a`` configures what was unpacked.

    + packages: names this deploy installs; a reinstall-required package not among
      them is left to the operator (apt names it)

    **Example**:

    .. code:: python

        finish_interrupted_dpkg(packages=["cuda-nvcc-13-0", "cuda-cccl-13-0"])
    """
    unfinished = host.get_fact(DpkgUnfinished)
    broken = [name for name in unfinished["reinstall_required"] if name in packages]
    if not unfinished["audit"] and not broken:
        host.noop("dpkg has no unfinished work")
        return
    if broken:
        # Their files are half-written: removed whatever depends on them (--force-depends),
        # they come back whole from the apt install that follows.
        yield ("DEBIAN_FRONTEND=noninteractive dpkg --remove --force-remove-reinstreq --force-depends "
               + " ".join(shlex.quote(name) for name in broken))
        # Packages unpacked beside them wait for them: apt configures those once it has
        # reinstalled them, so this step cannot finish them yet.
        yield ("DEBIAN_FRONTEND=noninteractive dpkg --configure -a || echo 'dpkg: what depends on "
               + " ".join(broken) + " is configured by the apt install that follows' >&2")
        return
    yield "DEBIAN_FRONTEND=noninteractive dpkg --configure -a"


@operation()
def nvcc_reports(home, release):
    """
    Fail the host unless ``<home>/bin/nvcc --version`` reports ``release``.

    + home: the toolkit's home
    + release: the ``X.Y`` it must report

    **Example**:

    .. code:: python

        nvcc_reports(home=toolkit_home("13.0"), release="13.0")
    """
    found = host.get_fact(NvccRelease, home=home)
    if found == release:
        host.noop(f"{home}/bin/nvcc reports release {release}")
        return
    message = shlex.quote(
        f"{host.name}: {home}/bin/nvcc reports release {found or 'nothing (missing or broken)'}, "
        f"expected {release}; check the packages the CUDA repository served"
    )
    yield f"echo {message} >&2; exit 1"


@operation()
def cuda_alternative(home, priority=100):
    """
    Point ``/usr/local/cuda`` at ``home`` through the ``cuda`` alternative.

    + home: the toolkit's home
    + priority: priority when registering ``home`` as an alternative

    **Example**:

    .. code:: python

        cuda_alternative(home=toolkit_home("13.0"))
    """
    link = host.get_fact(CudaLink)
    if link["target"] == home and home in link["alternatives"]:
        host.noop(f"{CUDA_LINK} already points at {home}")
        return
    quoted = shlex.quote(home)
    if home not in link["alternatives"]:
        yield f"update-alternatives --install {CUDA_LINK} cuda {quoted} {int(priority)}"
    yield f"update-alternatives --set cuda {quoted}"


@operation()
def apt_source_disabled(path, uri, reason):
    """
    Disable the entries of ``path`` that serve ``uri`` (bringup/apt_source_edit.py): the file
    is renamed when they are all it holds, else rewritten whole with them disabled;
    nothing else of the operator's file changes, and a result apt could not read (or
    a file apt cannot read now) fails the host with one line, the file untouched.

    + path: an apt source file
    + uri: the repository URI
    + reason: why, written beside a disabled entry

    **Example**:

    .. code:: python

        apt_source_disabled(path="/etc/apt/sources.list.d/cuda-debian12-x86_64.list",
                            uri="https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/",
                            reason="its key is not the pinned one")
    """
    lines = host.get_fact(FileContents, path=path)
    try:
        change = apt_source_edit.disabled(path, "".join(f"{line}\n" for line in lines or []), uri, reason)
    except apt_source_edit.SourceEditError as error:
        # The file stays as it is: one line for this host, the others carry on.
        yield f"echo {shlex.quote(f'{host.name}: {error}')} >&2; exit 1"
        return
    if change is None:
        host.noop(f"no entry of {path} serves {uri}")
        return
    action, value = change
    if action == "rename":
        yield shlex.join(["mv", "-fT", path, value])
    else:
        yield from whole_file._inner(src=StringIO(value), dest=path)
