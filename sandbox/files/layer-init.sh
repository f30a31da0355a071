#!/bin/sh
# First process of a state layer build's private mount and PID namespaces,
# started by `unshare` from sandbox/layers.py. It lays a fresh overlay on the
# base image (and the layers of the states below this one), mounts /proc,
# /sys, /dev and /run like a node (node-fs.sh), and runs the state's script
# as root chrooted into it, with the host's network (the sandbox's apt repo
# and wheel mirror listen on 127.0.0.1). What the script changes lands in
# UPPER, which becomes the layer. No sshd: a layer never needs a running node.
#
# usage: layer-init.sh LOWERDIR UPPER WORK ROOT INPUTS [NAME=VALUE...]
#   INPUTS: a host directory holding script.sh and the state's input files;
#   copied to /run/state (a tmpfs: the script's scratch files stay out of the
#   layer), where the script runs. NAME=VALUE: the script's environment.
set -eu
# As a root shell on a real host: what the script creates is world-readable.
umask 022
lower=$1 upper=$2 work=$3 root=$4 inputs=$5
shift 5
. "$(dirname "$0")/node-fs.sh"

# redirect_dir and metacopy off: every change is stored whole in UPPER, so
# the layer is a complete, self-contained lower layer for any later mount.
mount -t overlay overlay \
    -o "lowerdir=$lower,upperdir=$upper,workdir=$work,redirect_dir=off,metacopy=off" "$root"
mount_node_fs "$root"
# Name resolution as the host has it now (Debian's archive), without writing
# the node's /etc/resolv.conf into the layer.
if [ -f /etc/resolv.conf ] && [ -f "$root/etc/resolv.conf" ]; then
    mount --bind -o ro /etc/resolv.conf "$root/etc/resolv.conf"
fi
mkdir -m 0700 "$root/run/state"
cp -R "$inputs/." "$root/run/state/"

# After the script: apt's package caches (about 80 MB, rebuilt by apt when it
# next runs) and downloaded .debs would only weigh on every layer.
exec chroot "$root" /usr/bin/env -i \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive TMPDIR=/run/state \
    "$@" /bin/sh -euc 'cd /run/state && /bin/sh -eu ./script.sh
        rm -f /var/cache/apt/pkgcache.bin /var/cache/apt/srcpkgcache.bin /var/cache/apt/archives/*.deb'
