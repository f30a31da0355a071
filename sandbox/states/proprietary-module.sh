#!/bin/sh
# State proprietary-module (driver stand-in): the node loaded NVIDIA's proprietary
# kernel module. node-init.sh shows the recorded proprietary banner at the profile's
# version in /proc/driver/nvidia/version (DRIVER_OPEN_MODULE_REQUIRED on a Blackwell
# profile, until the open banner, /usr/share/sandbox-gpu/proc-version-open, is there).
set -eu
install -d -m 0755 /var/lib/sandbox-gpu
echo proprietary > /var/lib/sandbox-gpu/module-flavour
chmod 0644 /var/lib/sandbox-gpu/module-flavour
