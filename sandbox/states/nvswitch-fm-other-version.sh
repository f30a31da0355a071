#!/bin/sh
# State nvswitch-fm-other-version (driver stand-in, on nvswitch-no-fm and nvidia-repo):
# Fabric Manager moved to 580.105.08 by an upgrade while the loaded driver stays at the
# profile's (580.95.05 on h100-x8): its unit is enabled, starts at boot and fails with
# nv-fabricmanager's "... don't match with driver version ..." (FABRIC_MANAGER_VERSION,
# FABRIC_NOT_READY). The package at the driver's version waits in
# /var/cache/sandbox-gpu/ for the fix (`dpkg -i --force-hold` it, hold it again,
# restart the unit). Both are the sandbox repository's stand-ins (sandbox/aptrepo/driver_debs.py).
set -eu
apt-get install -y --no-install-recommends nvidia-fabricmanager=580.105.08-1
apt-mark hold nvidia-fabricmanager
install -d -m 0755 /var/cache/sandbox-gpu
cd /var/cache/sandbox-gpu
apt-get download nvidia-fabricmanager=580.95.05-1
mv nvidia-fabricmanager_580.95.05-1_*.deb nvidia-fabricmanager_580.95.05-1.deb
chmod 0644 nvidia-fabricmanager_580.95.05-1.deb
apt-get clean
# Enabled as NVIDIA's guide says (systemctl enable, offline: the same link).
install -d -m 0755 /etc/systemd/system/multi-user.target.wants
ln -sf /lib/systemd/system/nvidia-fabricmanager.service /etc/systemd/system/multi-user.target.wants/
