#!/bin/sh
# State nvswitch-fm-inactive (driver stand-in, on nvswitch-no-fm and nvidia-repo): Fabric
# Manager installed from NVIDIA's repository (the sandbox's stand-in package,
# sandbox/aptrepo/driver_debs.py) at the driver's version, held, its unit not enabled and
# not running, as the package leaves it (FABRIC_MANAGER_INACTIVE, FABRIC_NOT_READY until
# `systemctl enable --now nvidia-fabricmanager`). 580.95.05 is the h100-x8 profile's
# driver (tests/fixtures/gpus/h100-x8/).
set -eu
apt-get install -y --no-install-recommends nvidia-fabricmanager=580.95.05-1
apt-mark hold nvidia-fabricmanager
apt-get clean
