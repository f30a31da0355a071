#!/bin/sh
# State nvswitch-fm-other-version (driver stand-in, on nvswitch-no-fm): Fabric
# Manager moved to 580.105.08 by an upgrade while the loaded driver stays at the
# profile's (580.95.05 on h100-x8): its unit is enabled, starts at boot and fails with
# nv-fabricmanager's "... don't match with driver version ..." (FABRIC_MANAGER_VERSION,
# FABRIC_NOT_READY). The package at the driver's version waits in
# /var/cache/sandbox-gpu/ for the fix (`dpkg -i --force-hold` it, hold it again,
# restart the unit).
set -eu
. ./standin-deb.sh
install -d -m 0755 /var/cache/sandbox-gpu
fabricmanager_deb 580.105.08 nvidia-fabricmanager_580.105.08-1.deb
fabricmanager_deb 580.95.05 /var/cache/sandbox-gpu/nvidia-fabricmanager_580.95.05-1.deb
installed_held nvidia-fabricmanager_580.105.08-1.deb
# Enabled as NVIDIA's guide says (systemctl enable, offline: the same link).
install -d -m 0755 /etc/systemd/system/multi-user.target.wants
ln -sf /lib/systemd/system/nvidia-fabricmanager.service /etc/systemd/system/multi-user.target.wants/
