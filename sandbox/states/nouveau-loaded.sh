#!/bin/sh
# State nouveau-loaded (driver stand-in): nouveau holds the GPUs. node-init.sh shows
# /sys/module/nouveau (NOUVEAU_LOADED until `rm -r /sys/module/nouveau`); the driver
# stand-in's blacklist stays, as on a node that booted before it was written.
set -eu
install -d -m 0755 /var/lib/sandbox-gpu
: > /var/lib/sandbox-gpu/nouveau-loaded
chmod 0644 /var/lib/sandbox-gpu/nouveau-loaded
