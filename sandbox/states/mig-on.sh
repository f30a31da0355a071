#!/bin/sh
# State mig-on (driver stand-in): MIG enabled on GPU 0. The nvidia-smi stand-in's -q
# says MIG Mode Current/Pending Enabled for the GPUs in /var/lib/sandbox-gpu/mig-enabled
# (MIG_ENABLED until `nvidia-smi -i 0 -mig 0`); on a GPU that has no MIG (-q says N/A)
# nothing changes.
set -eu
install -d -m 0755 /var/lib/sandbox-gpu
echo 0 > /var/lib/sandbox-gpu/mig-enabled
chmod 0644 /var/lib/sandbox-gpu/mig-enabled
