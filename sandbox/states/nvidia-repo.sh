#!/bin/sh
# State nvidia-repo: NVIDIA's CUDA apt repository, set up the way NVIDIA's
# installation guide says for Debian (network repo): fetch the cuda-keyring
# package from the repository, install it with dpkg, update the lists. The
# keyring package leaves the one-line source
# /etc/apt/sources.list.d/cuda-<distro>-x86_64.list
#   deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] <repo> /
# and the repository's key in /usr/share/keyrings. Nodes that got some CUDA
# from NVIDIA's repository carry exactly this source (field notes, section 10).
#
# Environment: CUDA_REPO, the repository (.../compute/cuda/repos/<distro>/x86_64/).
set -eu
# The guide uses wget; the image has curl (same download, same file name).
curl -fsSLO "${CUDA_REPO}cuda-keyring_1.1-1_all.deb"
dpkg -i cuda-keyring_1.1-1_all.deb
apt-get update
