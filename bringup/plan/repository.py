"""NVIDIA's CUDA apt repository as the node will use it: its distro directory, key and
files, the node's own sources that already serve it (adopted when they are checked by
the pinned key alone, disabled otherwise), and who holds apt's locks.

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> planned = repo(PlanContext.of({"os": {"id": "ubuntu", "version_id": "24.04", "arch": "aarch64"}}, Config(),
    ...                               None, found.append))
    >>> planned.distro, planned.arch, planned.keyring, found
    ('ubuntu2404', 'sbsa', '/etc/apt/keyrings/nvidia-cuda.gpg', [])
"""

import shlex
from dataclasses import replace
from urllib.parse import urlparse

from bringup.findings import BLOCKER, FIX, INFO, WARNING, Finding
from bringup.plan.model import RepoPlan
from bringup.platforms import repo_arch, repo_distro, repo_evidence, repo_location


def check_apt_locks(context):
    """Who held apt's locks when the node was probed (deploy waits for them)."""
    holders = context.facts.get("apt_locks") or []
    if not holders:
        return
    held = "; ".join(f"pid {h['pid']} ({h.get('command') or '?'}) holds {h['lock']}" for h in holders)
    timeout = context.config.deploy_apt_lock_timeout
    context.add(Finding("APT_LOCKED", WARNING, f"apt is in use: {held}",
                        f"nothing to do: deploy waits up to {timeout} s (deploy_apt_lock_timeout) for it "
                        "before it changes anything, and fails this host alone if it is still held"))


def repo(context):
    """The repository's plan, None (UNSUPPORTED_OS) where NVIDIA builds nothing for the
    node's OS and CPU and no ``cuda_repo_distro`` names a directory."""
    facts, config, add = context.facts, context.config, context.add
    os_facts = facts.get("os") or {}
    distro = config.cuda_repo_distro or repo_distro(os_facts.get("id"), os_facts.get("version_id"))
    arch = repo_arch(os_facts.get("arch"))
    if distro is None or arch is None:
        seen = f"{os_facts.get('id')} {os_facts.get('version_id')} on {os_facts.get('arch')}"
        add(Finding("UNSUPPORTED_OS", BLOCKER,
                    f"NVIDIA's CUDA repository has no build for {seen}",
                    "use Ubuntu 22.04/24.04 or Debian 12/13 on x86_64 or aarch64, or set "
                    "cuda_repo_distro to a distro directory your mirror carries"))
        return None
    url = repo_location(config.cuda_repo_url, distro, arch)
    fingerprint = config.cuda_repo_fingerprint.replace(" ", "").upper()
    layout = context.layout
    evidence = repo_evidence(distro, arch)
    if evidence == "unverified":
        add(Finding("REPO_UNVERIFIED", WARNING,
                    f"this release found no evidence that NVIDIA serves {distro}/{arch} (only other directories "
                    "of it are known)",
                    f"check that {url}Packages serves the toolkit before deploying: `make lock "
                    f"CUDA_PLATFORMS={distro}-{os_facts.get('arch')}` fails when it does not"))
    planned = RepoPlan(url=url, key_url=config.cuda_repo_key_url or f"{url}{fingerprint[-8:].lower()}.pub",
                       fingerprint=fingerprint, distro=distro, arch=arch, keyring=layout.apt_keyring,
                       source_file=layout.apt_source, preference_file=layout.apt_preference,
                       pin_origin=urlparse(url).hostname or "", evidence=evidence,
                       lock_command=shlex.join(["make", "lock-cuda", "lock-driver",
                                                f"CUDA_REPO_URL={config.cuda_repo_url}",
                                                f"CUDA_PLATFORMS={distro}-{os_facts.get('arch')}"]))
    return _existing_sources(context, planned)


def _same_uri(left, right):
    return left.rstrip("/") == right.rstrip("/")


def _existing_sources(context, repo):
    """Converge on exactly one source for the repository (apt refuses every source when
    two name it with different Signed-By): adopt a source the node already has when its
    keyring holds the pinned key and nothing else and root alone can change it (NVIDIA's
    cuda-keyring package installs one), else disable the others (their files kept,
    renamed) and write ours."""
    apt, add = context.facts.get("apt") or {}, context.add
    serving = [entry for entry in apt.get("sources") or [] if any(_same_uri(uri, repo.url) for uri in entry["uris"])]
    others = [entry for entry in serving if entry["file"] != repo.source_file]
    adopted = next((entry for entry in others if _why_not_pinned(entry, apt, repo.fingerprint) is None), None)
    if adopted:
        conflicting = [entry for entry in serving if entry["signed_by"] != adopted["signed_by"]]
        add(Finding("APT_SOURCE_CONFLICT", INFO,
                    f"{adopted['file']} already serves {repo.url}, signed by {adopted['signed_by']} which holds only "
                    f"the pinned key {repo.fingerprint} and that only root can change",
                    "deploy adopts that source and keyring instead of adding a second source"))
        repo = replace(repo, adopt=True, source_file=adopted["file"], keyring=adopted["signed_by"])
    else:
        conflicting = others
    if conflicting:
        files = sorted({entry["file"] for entry in conflicting})
        reasons = "; ".join(f"{entry['file']}: " + (_why_not_pinned(entry, apt, repo.fingerprint) or
                                                     f"signed by {entry['signed_by']} (the pinned key, another "
                                                     "keyring file)")
                            for entry in conflicting)
        add(Finding("APT_SOURCE_CONFLICT", FIX,
                    f"{', '.join(files)} also serve{'s' if len(files) == 1 else ''} {repo.url} ({reasons}): a second "
                    "source with another Signed-By makes apt refuse every source",
                    "deploy disables those entries first (a file of them only is renamed to "
                    "<file>.disabled-by-gpu-bringup, a shared file gets the lines commented out), then adds its own"
                    if not adopted else "deploy disables those entries and keeps the adopted source"))
        repo = replace(repo, disable=tuple(files))
    return repo


def _keyring_chain(apt, keyring):
    """The keyring's path chain as the probe read it (files/probe.d/apt.sh probe_apt), or []
    when it did not (an older report) or the facts do not have the documented shape."""
    chain = (apt.get("keyring_paths") or {}).get(keyring) if isinstance(apt.get("keyring_paths"), dict) else None
    fields = ("path", "user", "mode", "kind")
    if not isinstance(chain, list) or not all(isinstance(item, dict) and all(isinstance(item.get(name), str)
                                                                            for name in fields) for item in chain):
        return []
    return chain


def _unsafe_keyring(keyring, chain):
    """Why someone other than root could change ``keyring`` (README, Security), or None:
    it must be a regular file (no link), and it and every directory above it owned by
    root and writable by no group or other user.

    >>> _unsafe_keyring("/k/a.gpg", [{"path": "/k/a.gpg", "user": "root", "mode": "644", "kind": "regular file"},
    ...                              {"path": "/k", "user": "root", "mode": "1777", "kind": "directory"}])
    '/k is writable by others (mode 1777)'
    """
    parent = keyring.rsplit("/", 1)[0] or "/"
    if len(chain) < 2 or chain[0]["path"] != keyring or chain[1]["path"] != parent:
        return "who may change it was not probed (validate again with this release)"
    if chain[0]["kind"] != "regular file":
        return f"it is a {chain[0]['kind']}, not a regular file"
    for item in chain:
        if item["user"] != "root":
            return f"{item['path']} is owned by {item['user']}, not root"
        try:
            mode = int(item["mode"], 8)
        except ValueError:
            return f"{item['path']} has mode {item['mode']!r}"
        if mode & 0o022:
            who = "others" if mode & 0o002 else "its group"
            return f"{item['path']} is writable by {who} (mode {item['mode']})"
    return None


def _why_not_pinned(entry, apt, fingerprint):
    """Why the source ``entry`` cannot be adopted, or None when it can: checked by the
    pinned key alone, in a keyring that holds nothing else (subkeys of that key aside)
    and that only root can change."""
    if entry["trusted"]:
        return "trusted=yes, no key checked"
    if not entry["signed_by"]:
        return "no Signed-By (any key apt trusts)"
    if entry["signed_by"] == "inline":
        return "an inline key"
    keyrings = apt.get("keyrings") or {}
    found = keyrings.get(entry["signed_by"]) if isinstance(keyrings, dict) else None
    chain = _keyring_chain(apt, entry["signed_by"])
    unsafe = _unsafe_keyring(entry["signed_by"], chain)
    if not isinstance(found, list) or not all(isinstance(key, str) for key in found):
        return f"signed by {entry['signed_by']}, " + (unsafe if chain and unsafe else "unreadable")
    others = [key for key in dict.fromkeys(found) if key != fingerprint]
    held = ", ".join(others[:2]) + (f" and {len(others) - 2} more" if len(others) > 2 else "") if others else "no key"
    if fingerprint not in found:
        return f"signed by {entry['signed_by']}, which holds {held}, not {fingerprint}"
    if others:
        return f"signed by {entry['signed_by']}, which holds the pinned key and also {held} (apt trusts those too)"
    if unsafe:
        return f"signed by {entry['signed_by']}, the pinned key, but not only root can change it: {unsafe}"
    return None
