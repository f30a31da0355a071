#!/bin/sh
# State nvswitch-no-fm (driver stand-in): an HGX node's NVSwitches and no Fabric
# Manager. node-init.sh shows 4 NVSwitches under /proc/driver/nvidia-nvswitch/devices;
# the nvidia-smi stand-in says the HGX GPUs' fabric is "In Progress" while no
# nvidia-fabricmanager runs (FABRIC_MANAGER_MISSING, FABRIC_NOT_READY).
set -eu
install -d -m 0755 /var/lib/sandbox-gpu
echo 4 > /var/lib/sandbox-gpu/nvswitch-count
chmod 0644 /var/lib/sandbox-gpu/nvswitch-count
