"""NVIDIA's CUDA apt repository (or a site mirror): pinned key, deb822 source, origin pin."""

from pyinfra.api import deploy
from pyinfra.operations import apt

from tasks.operations.cuda import pinned_keyring
from tasks.operations.files import whole_template

TEMPLATES = "files/templates"


@deploy("NVIDIA CUDA apt repository")
def cuda_repository(node):
    """
    Configure the repository the plan names; returns the operations whose change
    means apt's lists are stale.

    + node: the NodePlan (``repo``)
    """
    repo = node.repo
    tools = apt.packages(name="Install key tools (curl, gpg)", packages=list(repo.key_tools), no_recommends=True)
    keyring = pinned_keyring(name="Install the pinned CUDA repository key",
                             key_url=repo.key_url, fingerprint=repo.fingerprint, path=repo.keyring)
    source = whole_template(name="Add the CUDA repository (deb822, signed-by)",
                            src=f"{TEMPLATES}/nvidia-cuda.sources.j2", dest=repo.source_file,
                            url=repo.url, distro=repo.distro, arch=repo.arch, keyring=repo.keyring)
    pin = whole_template(name="Pin CUDA packages to the repository's origin",
                         src=f"{TEMPLATES}/nvidia-cuda.pref.j2", dest=repo.preference_file, origin=repo.pin_origin)
    return [tools, keyring, source, pin]
