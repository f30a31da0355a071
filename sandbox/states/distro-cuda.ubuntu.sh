#!/bin/sh
# State distro-cuda on Ubuntu: Ubuntu's own CUDA toolkit, nvidia-cuda-toolkit from
# the multiverse component (11.5 on 22.04, 12.0 on 24.04): a real, older nvcc at
# /usr/bin/nvcc that trips the same trap as the seeds' 12.8 (field notes, section 10).
set -eu
# Operators enable multiverse in the format the release ships (22.04: sources.list,
# 24.04: deb822 ubuntu.sources), as `add-apt-repository multiverse` leaves it.
if [ -f /etc/apt/sources.list.d/ubuntu.sources ]; then
    sed -i 's/^Components: main universe$/Components: main universe multiverse/' \
        /etc/apt/sources.list.d/ubuntu.sources
else
    sed -i 's/^\(deb .*\) main universe$/\1 main universe multiverse/' /etc/apt/sources.list
fi
apt-get update
apt-get install -y --no-install-recommends nvidia-cuda-toolkit
apt-get clean
