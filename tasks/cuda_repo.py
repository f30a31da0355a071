"""NVIDIA's CUDA apt repository (or a site mirror): exactly one source for it, signed by
the pinned key, and an origin pin."""

from pyinfra.api import deploy
from pyinfra.operations import apt

from tasks.operations.cuda import apt_source_disabled, pinned_keyring
from tasks.operations.files import whole_template
from tasks.operations.packages import APT_ENV, lock_timeout_option

TEMPLATES = "files/templates"


@deploy("NVIDIA CUDA apt repository")
def cuda_repository(node):
    """
    Configure the repository the plan names; returns the operations whose change
    means apt's lists are stale. Conflicting sources go first, so apt reads its
    sources at every step even when the run stops half-way.

    + node: the NodePlan (``repo``)
    """
    repo = node.repo
    changes = [apt_source_disabled(name=f"Disable the conflicting source in {path}", path=path, uri=repo.url,
                                   reason=f"the repository's source is {repo.source_file}")
               for path in repo.disable]
    changes.append(apt.packages(name="Install key tools (curl, gpg)", packages=list(repo.key_tools),
                                no_recommends=True, extra_install_args=lock_timeout_option(node.apt_lock_timeout),
                                _env=APT_ENV))
    if not repo.adopt:
        changes.append(pinned_keyring(name="Install the pinned CUDA repository key", key_url=repo.key_url,
                                      fingerprint=repo.fingerprint, path=repo.keyring))
        changes.append(whole_template(name="Add the CUDA repository (deb822, signed-by)",
                                      src=f"{TEMPLATES}/nvidia-cuda.sources.j2", dest=repo.source_file,
                                      url=repo.url, distro=repo.distro, arch=repo.arch, keyring=repo.keyring))
    held = [pin.split("=", 1) for pin in node.toolkit.pins if "=" in pin]
    # DCGM comes from the same repository: held as the toolkit is, or `apt-get upgrade` moves
    # it past its lock and every later deploy moves it back and restarts its host engine.
    dcgm_held = [pin.split("=", 1) for pin in node.dcgm.pins if "=" in pin]
    changes.append(whole_template(name="Pin CUDA packages to the repository's origin and the toolkit lock",
                                  src=f"{TEMPLATES}/nvidia-cuda.pref.j2", dest=repo.preference_file,
                                  origin=repo.pin_origin, held=held, dcgm_held=dcgm_held))
    return changes
