"""NVIDIA's CUDA apt repository (or a site mirror): pinned key, deb822 source, origin pin."""

from urllib.parse import urlparse

from pyinfra.api import deploy
from pyinfra.operations import apt, files

from tasks.operations.cuda import pinned_keyring

KEYRING = "/etc/apt/keyrings/nvidia-cuda.gpg"
SOURCE = "/etc/apt/sources.list.d/nvidia-cuda.sources"
PREFERENCE = "/etc/apt/preferences.d/nvidia-cuda"
TEMPLATES = "files/templates"


@deploy("NVIDIA CUDA apt repository")
def cuda_repository(repo):
    """
    Configure the repository the plan names; returns the operations whose change
    means apt's lists are stale.

    + repo: the plan's ``repo`` (``url``, ``key_url``, ``fingerprint``, ``distro``, ``arch``)
    """
    tools = apt.packages(name="Install key tools (curl, gpg)",
                         packages=["ca-certificates", "curl", "gpg"], no_recommends=True)
    keyring = pinned_keyring(name="Install the pinned CUDA repository key",
                             key_url=repo["key_url"], fingerprint=repo["fingerprint"], path=KEYRING)
    source = files.template(name="Add the CUDA repository (deb822, signed-by)",
                            src=f"{TEMPLATES}/nvidia-cuda.sources.j2", dest=SOURCE,
                            user="root", group="root", mode="0644",
                            url=repo["url"], distro=repo["distro"], arch=repo["arch"], keyring=KEYRING)
    pin = files.template(name="Pin CUDA packages to the repository's origin",
                         src=f"{TEMPLATES}/nvidia-cuda.pref.j2", dest=PREFERENCE,
                         user="root", group="root", mode="0644",
                         origin=urlparse(repo["url"]).hostname)
    return [tools, keyring, source, pin]
