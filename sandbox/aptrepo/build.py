"""Build the flat, signed apt repository under .sandbox/aptrepo/.

Layout (the same as NVIDIA's ``https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/``)::

    .sandbox/aptrepo/                       served over HTTP
        compute/cuda/repos/debian12/x86_64/
            *.deb  Packages  Packages.gz  Release  InRelease  Release.gpg
            <last 8 hex of the fingerprint>.pub       armored public key
        compute/cuda/repos/debian13/x86_64/ the same packages (hard links) but
            cuda-keyring, whose source names debian13; its own signed indexes
            (ubuntu2204/x86_64 and ubuntu2404/x86_64 likewise, but for the stand-in
            driver packages: Ubuntu's names and versions, driver_debs.FAMILIES)
        compute/cuda/repos/debian12/sbsa/   the Arm servers' packages (Architecture:
            arm64, targets/sbsa-linux) from the aarch64 wheels (wheels-aarch64.lock)
            (ubuntu2204/sbsa and ubuntu2404/sbsa likewise, with Ubuntu's driver names)
        fingerprint                         40 hex, upper case
        server.json                         while a server runs
    ~/.cache/gpu-bringup/aptrepo-gnupg/     GNUPGHOME with the signing key (0700), one
                                            per machine: every checkout signs alike

A build looks at the directories it is asked for (a node's platform: ``build(dirs=...)``)
and those already built, nothing else: a first run builds only what its nodes need.
It is idempotent per directory: when the lock, the key, the keyring URL and this code
are unchanged a directory is not touched. A stale or missing one is assembled whole in
a temp dir next to it (reusing unchanged .debs by hard link), its signed indexes
written there, and swapped in with one atomic exchange (renameat2), so a node reading
another directory, or this one, never sees a half-written index.
"""

from __future__ import annotations

import gzip
import dataclasses
import hashlib
import io
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from control.atomic import atomic_write
from sandbox.aptrepo import dcgm_debs, debs, driver_debs
from sandbox.aptrepo.sign import GnuPG
from sandbox.aptrepo.wheels import LOCKS, ensure_wheels, read_lock
from sandbox.fsutil import file_lock, link_or_copy, swap_in
from sandbox.statedir import APTREPO_ROOT, APTREPO_SERVER_JSON, DEFAULT_STATE_DIR

SANDBOX = DEFAULT_STATE_DIR
SERVE_ROOT = APTREPO_ROOT
REPO_REL = "compute/cuda/repos/debian12/x86_64"
REPO_DIR = SERVE_ROOT / REPO_REL
FINGERPRINT_FILE = SERVE_ROOT / "fingerprint"
SERVER_JSON = APTREPO_SERVER_JSON
LOCK_FILE = SANDBOX / "aptrepo.lock"
# Built packages by input digest, shared by every checkout on this machine (CI clones).
DEB_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-bringup" / "aptrepo-debs"
# The signing key, one per machine beside the packages: a directory's digest holds the key
# (_digest), and the state layers of every node are keyed by that digest
# (sandbox/field_states.py), so a key per checkout rebuilt 21 layers (about 60 s, 1.3 GB
# kept in the layer cache) in each clean clone CI runs.
GNUPGHOME = DEB_CACHE.with_name("aptrepo-gnupg")
MANIFEST = ".build.json"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8913

# NVIDIA serves one flat directory per distro; the sandbox's nodes run Debian 12
# (REPO_DIR, where packages are built) and these, which get the same packages (the
# driver's stand-ins under their family's names: family_driver). The
# names are NVIDIA's (bringup.platforms.REPO_EVIDENCE: the installation guide's
# ubuntu2204/x86_64 and ubuntu2404/x86_64) and the sandbox's --os names alike.
OTHER_DISTROS = ("debian13", "ubuntu2204", "ubuntu2404")
# The distros whose sbsa directory (Arm servers: GB10, Grace) the sandbox serves,
# each with packages built from the aarch64 wheels (the same .debs in each, cached by
# digest: only cuda-keyring and a family's driver stand-ins differ). Ubuntu's are NVIDIA's
# too (bringup.platforms.REPO_EVIDENCE); the sandbox runs no Ubuntu arm64 node, they serve
# the locks (make lock CUDA_REPO_URL=sandbox).
SBSA_DISTROS = ("debian12", "ubuntu2204", "ubuntu2404")

# What apt pins can match: "Pin: release o=NVIDIA" or "l=NVIDIA CUDA".
RELEASE_FIELDS = (("Origin", "NVIDIA"), ("Label", "NVIDIA CUDA"))


def repo_url(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> str:
    """The flat repository's URL (what a sources entry names, with suite '/')."""
    return f"http://{host}:{port}/{REPO_REL}/"


def distro_dir(distro: str, arch: str = "x86_64") -> Path:
    """The flat directory of *distro* and the repository architecture *arch* (``x86_64``,
    ``sbsa``); ``debian12``'s x86_64 one is REPO_DIR."""
    return SERVE_ROOT / REPO_REL.replace("/debian12/x86_64", f"/{distro}/{arch}")


def distro_url(url: str, distro: str, arch: str = "x86_64") -> str:
    """The URL of *distro*'s *arch* directory, from the Debian 12 x86_64 one.

    >>> distro_url("http://127.0.0.1:8913/compute/cuda/repos/debian12/x86_64/", "debian13")
    'http://127.0.0.1:8913/compute/cuda/repos/debian13/x86_64/'
    >>> distro_url("http://127.0.0.1:8913/compute/cuda/repos/debian12/x86_64/", "debian12", "sbsa")
    'http://127.0.0.1:8913/compute/cuda/repos/debian12/sbsa/'
    """
    return url.replace("/debian12/x86_64/", f"/{distro}/{arch}/")


def distro_keyring(distro: str, arch: str = "x86_64") -> debs.Pkg:
    """cuda-keyring as NVIDIA ships it in *distro*'s *arch* directory: its source file
    names that directory (``cuda-debian12-sbsa.list``)."""
    source = f"etc/apt/sources.list.d/cuda-{distro}-{arch}.list"
    return dataclasses.replace(debs.KEYRING, generated=((debs.KEYRING_PATH, "keyring"), (source, "sources-list")),
                               conffiles=(f"/{source}",))


def read_distro_manifest(distro: str, arch: str = "x86_64") -> dict:
    """The build manifest of *distro*'s *arch* directory ({} when not built)."""
    try:
        return json.loads((distro_dir(distro, arch) / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def pubkey_name(fingerprint: str) -> str:
    """NVIDIA names its key file after the fingerprint's last 8 hex digits (3bf863cc.pub)."""
    return fingerprint[-8:].lower() + ".pub"


def repo_lock():
    """Exclusive flock serialising builds and server starts across processes."""
    return file_lock(LOCK_FILE)


def read_manifest() -> dict:
    try:
        return json.loads((REPO_DIR / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


# Every directory the sandbox serves, as (distro, repository architecture), in build order:
# Debian 12's x86_64 one first (the other distros' x86_64 directories hard-link its packages).
HOME_DIR = ("debian12", "x86_64")
ALL_DIRS = (HOME_DIR, *((d, "x86_64") for d in OTHER_DISTROS), *((d, "sbsa") for d in SBSA_DISTROS))


def dirs_to_build(asked, present) -> list[tuple[str, str]]:
    """The directories a build looks at: those *asked* for, those already built (*present*:
    kept current, e.g. for a new keyring URL) and Debian 12's x86_64 one when another
    distro's x86_64 directory is among them (its packages come from there); in ALL_DIRS order.

    >>> dirs_to_build([("debian13", "x86_64")], [])
    [('debian12', 'x86_64'), ('debian13', 'x86_64')]
    >>> dirs_to_build([], [("debian12", "sbsa")])
    [('debian12', 'sbsa')]
    >>> dirs_to_build([("ubuntu2404", "sbsa")], [])
    [('ubuntu2404', 'sbsa')]
    >>> dirs_to_build([("debian13", "sbsa")], [])
    Traceback (most recent call last):
    ...
    ValueError: the sandbox apt repository has no debian13/sbsa directory; it serves debian12/x86_64, \
debian13/x86_64, ubuntu2204/x86_64, ubuntu2404/x86_64, debian12/sbsa, ubuntu2204/sbsa, ubuntu2404/sbsa
    """
    wanted = {tuple(d) for d in [*asked, *present]}
    unknown = sorted(wanted - set(ALL_DIRS))
    if unknown:
        raise ValueError(f"the sandbox apt repository has no {'/'.join(unknown[0])} directory; "
                         f"it serves {', '.join('/'.join(d) for d in ALL_DIRS)}")
    if any(arch == "x86_64" for _, arch in wanted):
        wanted.add(HOME_DIR)
    return [d for d in ALL_DIRS if d in wanted]


def built_dirs() -> list[tuple[str, str]]:
    """The directories built so far (those with a manifest)."""
    return [d for d in ALL_DIRS if read_distro_manifest(*d)]


def _built_url() -> str | None:
    """The keyring URL (as Debian 12's x86_64 one) of a directory built so far, if any."""
    for distro, arch in built_dirs():
        built = read_distro_manifest(distro, arch).get("repo_url", "")
        if built.endswith(f"/{distro}/{arch}/"):
            return built[:-len(f"{distro}/{arch}/")] + "debian12/x86_64/"
    return None


def build(url: str | None = None, force: bool = False, log=sys.stderr, dirs=ALL_DIRS) -> dict:
    """Build or refresh the directories *dirs* (default: all) and those already built;
    *url* is what cuda-keyring's source names.

    Without *url*: the one already built in, else the default port's.
    """
    with repo_lock():
        return _build_locked(url, force, log, dirs)


def _build_locked(url: str | None, force: bool, log, dirs=()) -> dict:
    """The build, under repo_lock(): a directory that is current is left as it is (a node
    using it meanwhile sees no change); each stale one is assembled beside it and renamed in."""
    started = time.monotonic()
    # The repos directory is the server's page (server.json's url): it answers, listing
    # what is built, before any directory is.
    _mkdirs(REPO_DIR.parents[1])
    gpg = GnuPG(GNUPGHOME)
    fpr = gpg.ensure_key()
    old = read_manifest()
    url = url or old.get("repo_url") or _built_url() or repo_url()
    armored, public_key = gpg.export(fpr, armor=True), gpg.export(fpr, armor=False)
    indexes = ["Packages", "Packages.gz", "Release", "InRelease", "Release.gpg", pubkey_name(fpr)]
    looked_at = dirs_to_build(dirs, built_dirs())
    # server.json's key_url names Debian 12's x86_64 directory: the key is published there
    # even while only another directory is built (an arm64 node's first run).
    if not (REPO_DIR / pubkey_name(fpr)).is_file():
        _mkdirs(REPO_DIR)
        atomic_write(REPO_DIR / pubkey_name(fpr), armored)

    def complete(directory: Path, names) -> bool:
        return all((directory / n).is_file() for n in [*names, *indexes])

    stale, wanted, digest, own = [], {}, "", {}
    if HOME_DIR in looked_at:
        ctx = debs.Context(fingerprint=fpr, public_key=public_key, repo_url=url)
        packages = [*debs.all_packages(read_lock()), *driver_debs.packages("x86_64"), *dcgm_debs.packages("x86_64")]
        wanted = _wanted(packages, ctx)
        digest = _digest(wanted, fpr, armored)
        if force or old.get("digest") != digest or not complete(REPO_DIR, wanted):
            stale.append(HOME_DIR)
        for d in OTHER_DISTROS:
            if (d, "x86_64") not in looked_at:
                continue
            own[d] = _wanted(family_driver(d, "x86_64"), ctx)
            manifest = read_distro_manifest(d)
            if force or manifest.get("base_digest") != digest or manifest.get("driver_debs", {}) != own[d] \
                    or not complete(distro_dir(d), distro_debs(wanted, own[d])):
                stale.append((d, "x86_64"))
    # The sbsa directories: packages of their own, from the aarch64 wheels.
    sbsa = {}
    for distro in SBSA_DISTROS:
        if (distro, "sbsa") not in looked_at:
            continue
        arm_ctx = debs.Context(fingerprint=fpr, public_key=public_key, repo_url=distro_url(url, distro, "sbsa"))
        arm_packages = [*debs.all_packages(read_lock(LOCKS["aarch64"]), "aarch64", distro_keyring(distro, "sbsa")),
                        *driver_debs.packages("aarch64", family=driver_debs.family_of(distro)),
                        *dcgm_debs.packages("aarch64")]
        arm_wanted = _wanted(arm_packages, arm_ctx)
        arm_digest = _digest(arm_wanted, fpr, armored)
        if force or read_distro_manifest(distro, "sbsa").get("digest") != arm_digest or not complete(
                distro_dir(distro, "sbsa"), arm_wanted):
            sbsa[distro] = (arm_packages, arm_ctx, arm_wanted, arm_digest)
            stale.append((distro, "sbsa"))

    fpr_ok = FINGERPRINT_FILE.is_file() and FINGERPRINT_FILE.read_text().strip() == fpr
    if not stale:
        if not fpr_ok:
            atomic_write(FINGERPRINT_FILE, fpr + "\n")
        return {"changed": False, "built": [], "reused": sorted(wanted), "fingerprint": fpr, "repo_url": url,
                "repo": str(REPO_DIR), "dirs": ["/".join(d) for d in looked_at],
                "seconds": round(time.monotonic() - started, 2)}

    for leftover in SANDBOX.glob(".aptrepo-tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp = SANDBOX / f".aptrepo-tmp-{os.getpid()}"
    work = tmp / "work"
    tmp.mkdir(parents=True)
    reused, todo, made = [], [], {}

    base = REPO_DIR
    if HOME_DIR in stale:
        out = base = tmp / "x86_64"
        out.mkdir()
        work.mkdir()
        old_debs = old.get("debs", {}) if not force else {}
        reused, todo = _assemble(out, work, packages, wanted, ctx, REPO_DIR, old_debs, force, "x86_64", log)
        _finish_dir(out, wanted, gpg, fpr, armored, {"digest": digest, "debs": wanted, "repo_url": url,
                                                      "fingerprint": fpr})
        made[HOME_DIR] = out
    for distro, arch in stale:
        if arch == "x86_64" and distro != HOME_DIR[0]:
            made[(distro, arch)] = _distro_copy(tmp, base, wanted, distro, digest, url, gpg, fpr, armored, log,
                                                own[distro])
    for distro, (arm_packages, arm_ctx, arm_wanted, arm_digest) in sbsa.items():
        arm_out, arm_work = tmp / f"{distro}-sbsa", tmp / f"work-{distro}-sbsa"
        arm_out.mkdir()
        arm_work.mkdir()
        arm_old = read_distro_manifest(distro, "sbsa").get("debs", {}) if not force else {}
        arm_reused, arm_todo = _assemble(arm_out, arm_work, arm_packages, arm_wanted, arm_ctx,
                                         distro_dir(distro, "sbsa"), arm_old, force, "aarch64", log)
        reused += arm_reused
        todo += arm_todo
        _finish_dir(arm_out, arm_wanted, gpg, fpr, armored, {"digest": arm_digest, "debs": arm_wanted,
                                                              "repo_url": arm_ctx.repo_url, "fingerprint": fpr})
        made[(distro, "sbsa")] = arm_out

    # Each directory is swapped in whole (its signed indexes with it); Debian 12's first,
    # since the others' packages are hard links of its files.
    for (distro, arch), built_dir in made.items():
        final = distro_dir(distro, arch)
        _mkdirs(final.parent)
        swap_in(built_dir, final)
    atomic_write(FINGERPRINT_FILE, fpr + "\n")
    shutil.rmtree(tmp)
    built = sorted(debs.deb_filename(p) for p in todo)
    seconds = round(time.monotonic() - started, 2)
    print(f"aptrepo: {', '.join('/'.join(d) for d in made)} ready in {seconds} s ({len(built)} built, "
          f"{len(reused)} reused): {SERVE_ROOT}", file=log, flush=True)
    return {"changed": True, "built": built, "reused": sorted(reused), "fingerprint": fpr,
            "repo_url": url, "repo": str(REPO_DIR), "dirs": ["/".join(d) for d in made], "seconds": seconds}


def _mkdirs(path: Path) -> None:
    """*path* and its parents up from SERVE_ROOT, each 0755 (served to every node)."""
    path.mkdir(parents=True, exist_ok=True)
    for d in (SERVE_ROOT, *path.relative_to(SERVE_ROOT).parents):
        os.chmod(SERVE_ROOT / d, 0o755)
    os.chmod(path, 0o755)


def _wanted(packages: list[debs.Pkg], ctx: debs.Context) -> dict[str, str]:
    """.deb file name -> the digest of its inputs, for every package of one directory."""
    gins = debs.generator_inputs(ctx)
    return {debs.deb_filename(p): debs.package_digest(p, gins) for p in packages}


def _digest(wanted: dict[str, str], fpr: str, armored: bytes) -> str:
    """The digest of one built directory: its packages' inputs, the key, the Release fields, this code."""
    return hashlib.sha256(json.dumps({
        "debs": wanted, "fingerprint": fpr, "key": armored.decode(), "release": RELEASE_FIELDS,
        "builder": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }, sort_keys=True).encode()).hexdigest()


def _assemble(out: Path, work: Path, packages: list[debs.Pkg], wanted: dict[str, str], ctx: debs.Context,
              old_dir: Path, old_debs: dict[str, str], force: bool, machine: str, log) -> tuple[list, list]:
    """Put every package of one directory into *out*: hard links to the unchanged ones of
    *old_dir* or of DEB_CACHE, the rest built from *machine*'s wheels; (reused names, built packages)."""
    reused, todo = [], []
    for pkg in packages:
        name = debs.deb_filename(pkg)
        cached = DEB_CACHE / f"{wanted[name]}.deb"
        if old_debs.get(name) == wanted[name] and (old_dir / name).is_file():
            os.link(old_dir / name, out / name)
            reused.append(name)
        elif cached.is_file() and not force:
            # Built by another checkout on this machine from the same inputs.
            link_or_copy(cached, out / name)
            reused.append(name)
        else:
            todo.append(pkg)
    if todo:
        print(f"aptrepo: building {len(todo)} {machine} package(s): {', '.join(p.name for p in todo)}",
              file=log, flush=True)
    if any(p.files for p in todo):
        wheels = ensure_wheels(machine=machine, log=log)
        debs.check_layout(wheels, driver_debs.without_driver(packages))
    else:
        wheels = {}
    # Biggest first so the two cores stay busy to the end.
    todo.sort(key=lambda p: -sum(wheels[w].stat().st_size for w in p.wheels() if w in wheels))
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        for f in [pool.submit(driver_debs.builder_of(p), p, ctx, wheels, out, work) for p in todo]:
            f.result()
    shutil.rmtree(work)
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    for pkg in todo:
        name = debs.deb_filename(pkg)
        link_or_copy(out / name, DEB_CACHE / f"{wanted[name]}.deb")
    return reused, todo


def _finish_dir(out: Path, wanted: dict[str, str], gpg: GnuPG, fpr: str, armored: bytes, manifest: dict) -> None:
    """The key file, the signed indexes and the manifest of one assembled directory."""
    (out / pubkey_name(fpr)).write_bytes(armored)
    _write_indexes(out, [out / n for n in sorted(wanted)])
    gpg.sign_release(out, fpr)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for p in out.iterdir():
        os.chmod(p, 0o644)
    os.chmod(out, 0o755)


def family_driver(distro: str, machine: str) -> list:
    """The stand-in driver packages *distro*'s directory serves in place of Debian 12's
    (sandbox/aptrepo/driver_debs.py, its family's names and versions); none where the
    family is Debian's (Debian 12's own are hard-linked).

    >>> family_driver("debian13", "x86_64"), family_driver("ubuntu2404", "x86_64")[0].name
    ([], 'nvidia-dkms-580-open')
    """
    family = driver_debs.family_of(distro)
    return [] if family == "debian" else driver_debs.packages(machine, family=family)


def distro_debs(built_debs: dict[str, str], own: dict[str, str]) -> dict[str, str]:
    """File name -> digest of a distro's x86_64 directory: Debian 12's packages (*built_debs*)
    and, where its family has driver packages of its own (*own*), those in place of Debian's.

    >>> debian = {debs.deb_filename(p): "d" for p in driver_debs.packages("x86_64", "6.1.0-1-amd64")}
    >>> ubuntu = {debs.deb_filename(p): "u" for p in driver_debs.packages("x86_64", "6.1.0-1-amd64", "ubuntu")}
    >>> mixed = distro_debs({"cuda-nvcc.deb": "t", **debian}, ubuntu)
    >>> "cuda-nvcc.deb" in mixed, "nvidia-smi_580.95.05-1_amd64.deb" in mixed, mixed["nvlsm_2025.06.10-1_amd64.deb"]
    (True, False, 'u')
    """
    if not own:
        return dict(built_debs)
    debian = {debs.deb_filename(p) for p in driver_debs.packages("x86_64")}
    return {**{name: d for name, d in built_debs.items() if name not in debian}, **own}


def _distro_copy(tmp: Path, built: Path, built_debs: dict[str, str], distro: str, base_digest: str, url: str,
                 gpg: GnuPG, fpr: str, armored: bytes, log, own: dict[str, str]) -> Path:
    """*distro*'s directory beside *built* (Debian 12's, holding *built_debs*: file name -> package
    digest): its packages hard-linked but cuda-keyring, made for *distro*, and the stand-in
    driver packages of its family (*own*: file name -> digest; ``distro_debs``), both cached by
    digest like every package; its own signed indexes."""
    out = tmp / distro
    out.mkdir()
    own_url = distro_url(url, distro)
    ctx = debs.Context(fingerprint=fpr, public_key=gpg.export(fpr, armor=False), repo_url=own_url)
    keyring = distro_keyring(distro)
    keyring_digest = debs.package_digest(keyring, debs.generator_inputs(ctx))
    wanted = {name: d for name, d in distro_debs(built_debs, own).items() if name != debs.deb_filename(keyring)}
    todo = []
    for pkg in family_driver(distro, "x86_64"):
        name = debs.deb_filename(pkg)
        if built_debs.get(name) == own[name]:
            continue  # the same package in Debian 12's directory (NVLSM, the kernel headers): linked below
        cached = DEB_CACHE / f"{own[name]}.deb"
        if cached.is_file():
            link_or_copy(cached, out / name)
        else:
            todo.append(pkg)
    if todo:
        print(f"aptrepo: building {len(todo)} {driver_debs.family_of(distro)} driver package(s) for {distro}",
              file=log, flush=True)
        work = tmp / f"work-{distro}-driver"
        for pkg in todo:
            name = debs.deb_filename(pkg)
            driver_debs.build_deb(pkg, ctx, {}, out, work)
            DEB_CACHE.mkdir(parents=True, exist_ok=True)
            link_or_copy(out / name, DEB_CACHE / f"{own[name]}.deb")
        shutil.rmtree(work, ignore_errors=True)
    for name in wanted:
        if not (out / name).exists():
            os.link(built / name, out / name)
    cached = DEB_CACHE / f"{keyring_digest}.deb"
    if cached.is_file():
        link_or_copy(cached, out / debs.deb_filename(keyring))
    else:
        print(f"aptrepo: building cuda-keyring for {distro}", file=log, flush=True)
        work = tmp / f"work-{distro}"
        debs.build_deb(keyring, ctx, {}, out, work)
        shutil.rmtree(work)
        link_or_copy(out / debs.deb_filename(keyring), cached)
    wanted[debs.deb_filename(keyring)] = keyring_digest
    # A family's own driver packages join the digest (Debian's directories' is as it was).
    digest = hashlib.sha256(json.dumps({"base": base_digest, "keyring": keyring_digest,
                                        **({"driver": own} if own else {})}, sort_keys=True).encode()).hexdigest()
    _finish_dir(out, wanted, gpg, fpr, armored, {"digest": digest, "base_digest": base_digest, "debs": wanted,
                                                  "driver_debs": own, "repo_url": own_url, "fingerprint": fpr})
    return out


def _write_indexes(repo: Path, deb_files: list[Path]) -> None:
    """Packages, Packages.gz and Release of a flat repository (Filename: ./x.deb)."""
    stanzas = []
    for deb in sorted(deb_files, key=lambda p: p.name):
        data = deb.read_bytes()
        control = debs.control_of(deb).rstrip("\n")
        stanzas.append(control + "\n" + "".join(f"{k}: {v}\n" for k, v in (
            ("Filename", f"./{deb.name}"),
            ("Size", len(data)),
            ("MD5sum", hashlib.md5(data).hexdigest()),
            ("SHA1", hashlib.sha1(data).hexdigest()),
            ("SHA256", hashlib.sha256(data).hexdigest()),
            ("SHA512", hashlib.sha512(data).hexdigest()),
        )))
    packages = "\n".join(stanzas).encode()
    (repo / "Packages").write_bytes(packages)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(packages)
    (repo / "Packages.gz").write_bytes(buf.getvalue())

    lines = [f"{k}: {v}" for k, v in RELEASE_FIELDS]
    lines.append("Date: " + time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()))
    for title, algo in (("MD5Sum", "md5"), ("SHA1", "sha1"), ("SHA256", "sha256"), ("SHA512", "sha512")):
        lines.append(f"{title}:")
        for name in ("Packages", "Packages.gz"):
            data = (repo / name).read_bytes()
            lines.append(f" {hashlib.new(algo, data).hexdigest()} {len(data):>16} {name}")
    (repo / "Release").write_text("\n".join(lines) + "\n")
