#!/bin/sh
# State distro-cuda: Debian's own CUDA toolkit, nvidia-cuda-toolkit from the
# non-free component of Debian's archive (11.8 on Debian 12, 12.4 on Debian 13):
# a real, complete, older nvcc at /usr/bin/nvcc ("/usr" is its home) that trips
# the same trap as the seeds' 12.8 (field notes, section 10).
set -eu
# Operators enable the components the way the release notes show, in the
# format the installer left (Debian 12: sources.list, Debian 13: deb822).
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' \
        /etc/apt/sources.list.d/debian.sources
else
    sed -i 's/^\(deb .*\) main$/\1 main contrib non-free non-free-firmware/' /etc/apt/sources.list
fi
apt-get update
apt-get install -y --no-install-recommends nvidia-cuda-toolkit
# The downloaded .debs are dead weight in the layer.
apt-get clean
