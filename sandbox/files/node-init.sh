#!/bin/sh
# First process (PID 1) of a sandbox node's private mount/PID/UTS/IPC
# namespaces, started by `unshare` from sandbox/node.py. It assembles the
# node's root and becomes the node's sshd. Every mount made here lives only
# in this mount namespace: when this process dies (down, crash, kill -9) the
# kernel kills every process of the node and drops every mount with it.
#
# usage: node-init.sh LOWERDIR NODE_DIR NAME ADDR PORT
#   LOWERDIR: overlayfs lowerdir, top first: the layers of the node's states
#   (sandbox/layers.py), then the base image ("layerN:...:layer1:base").
set -eu
# As systemd starts a real host's sshd: sessions inherit this umask.
umask 022
lower=$1 node=$2 name=$3 addr=$4 port=$5
root=$node/root
. "$(dirname "$0")/node-fs.sh"

# overlay: the shared read-only base image and state layers below (their
# whiteouts and opaque directories apply), this node's changes above.
mount -t overlay overlay \
    -o "lowerdir=$lower,upperdir=$node/upper,workdir=$node/work" "$root"

mount_node_fs "$root"

hostname "$name"
# The driver stand-in may have added a library: refresh the loader cache the
# way the driver package's ldconfig trigger would.
chroot "$root" /sbin/ldconfig

# sshd in the foreground as PID 1: it reaps its own children and orphans.
exec chroot "$root" /usr/sbin/sshd -D -e \
    -o "ListenAddress=$addr:$port" \
    -o "PasswordAuthentication=no" \
    -o "KbdInteractiveAuthentication=no" \
    -o "PermitRootLogin=prohibit-password"
