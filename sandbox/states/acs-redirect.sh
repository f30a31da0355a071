#!/bin/sh
# State acs-redirect (PCI stand-in): ACS redirect on the root ports above the GPUs.
# node-init.sh shows the bridges' config spaces with ACSCtl ReqRedir+ CmpltRedir+ (the
# bridge NVIDIA/nccl#2079 found the hang behind) for the marker below; the real lspci
# reads them, from pciutils of the distribution's archive as an operator installs it
# (P2P_ACS_REDIRECT until `setpci -s <bridge> ECAP_ACS+6.w=0000` on each bridge, as NCCL's
# troubleshooting guide clears ACS).
set -eu
apt-get update
apt-get install -y --no-install-recommends pciutils
# The downloaded .debs are dead weight in the layer.
apt-get clean
install -d -m 0755 /var/lib/sandbox-gpu
: > /var/lib/sandbox-gpu/acs-redirect
chmod 0644 /var/lib/sandbox-gpu/acs-redirect
