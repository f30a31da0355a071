#!/bin/sh
# State ubuntu-drivers (driver stand-in, Ubuntu only): what `ubuntu-drivers install --gpgpu`
# leaves on a generic kernel, Canonical's 580-server series with the open kernel module,
# prebuilt and signed (bringup/canonical_driver.py cites the names): nvidia-headless-no-dkms-
# 580-server-open, libnvidia-compute-580-server, nvidia-utils-580-server,
# nvidia-compute-utils-580-server, nvidia-kernel-common-580-server at Canonical's revision
# 580.95.05-0ubuntu0.<release>.2 (the profile's driver), and linux-modules-nvidia-580-server-
# open-generic with the running kernel's linux-modules-nvidia-580-server-open-<release> at a
# kernel version. Not held (ubuntu-drivers holds nothing). Every package is an empty
# SANDBOX STAND-IN built here with dpkg-deb (standin-deb.sh): the node's driver files stay
# the stand-in driver's, so validate sees the packages and versions only (DRIVER_CANONICAL).
set -eu
. ./standin-deb.sh
. /etc/os-release
version="580.95.05-0ubuntu0.$VERSION_ID.2"
release=$(uname -r)
for package in nvidia-headless-no-dkms-580-server-open libnvidia-compute-580-server nvidia-utils-580-server \
        nvidia-compute-utils-580-server nvidia-kernel-common-580-server; do
    standin_deb "$package" "$version" "$(mktemp -d)" "$package.deb"
done
# Canonical's prebuilt modules carry the kernel's version (linux-restricted-modules).
base=$(printf '%s' "$release" | sed 's/[^0-9.].*//')
abi=$(printf '%s' "$release" | sed -n 's/^[0-9.]*-\([0-9][0-9]*\).*/\1/p')
kernel_version="${base:-6.8.0}-${abi:-1}.${abi:-1}"
standin_deb linux-modules-nvidia-580-server-open-generic "$kernel_version" "$(mktemp -d)" meta.deb
standin_deb "linux-modules-nvidia-580-server-open-$release" "$kernel_version" "$(mktemp -d)" modules.deb
for deb in *.deb; do
    dpkg -i "$deb" >/dev/null
done
rm -f ./*.deb
