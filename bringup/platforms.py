"""Which NVIDIA CUDA apt repository serves a node's OS and architecture.

Source: NVIDIA CUDA installation guide for Linux, "Network Repo Installation"
(``https://developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/``, keyring
``cuda-keyring_1.1-1_all.deb``, key 3bf863cc) for the distros we support.
"""

# (os id, version id) -> repository distro directory.
REPO_DISTRO = {
    ("ubuntu", "22.04"): "ubuntu2204",
    ("ubuntu", "24.04"): "ubuntu2404",
    ("debian", "12"): "debian12",
    ("debian", "13"): "debian13",
}

# uname -m -> repository architecture directory.
REPO_ARCH = {
    "x86_64": "x86_64",
    "aarch64": "sbsa",
}


def repo_distro(os_id, version_id):
    """The repository's distro directory, or None for an unsupported OS.

    >>> repo_distro("debian", "12")
    'debian12'
    """
    return REPO_DISTRO.get((os_id, version_id))


def repo_arch(machine):
    """The repository's architecture directory, or None for an unsupported CPU.

    >>> repo_arch("aarch64")
    'sbsa'
    """
    return REPO_ARCH.get(machine)


def repo_location(base_url, distro, arch):
    """The flat repository URL for a distro and arch under a base (NVIDIA's or a mirror).

    >>> repo_location("https://mirror.example/cuda/repos/", "debian12", "x86_64")
    'https://mirror.example/cuda/repos/debian12/x86_64/'
    """
    return f"{base_url.rstrip('/')}/{distro}/{arch}/"
