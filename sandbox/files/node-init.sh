#!/bin/sh
# First process (PID 1) of a sandbox node's private mount/PID/UTS/IPC/cgroup
# namespaces, started by `unshare` from sandbox/node.py. It assembles the
# node's root and becomes the node's systemd, which starts sshd as on a real
# host. Every mount made here lives only in this mount namespace: when this
# process dies (down, crash, kill -9) the kernel kills every process of the
# node and drops every mount with it.
#
# usage: node-init.sh BASE_ROOT NODE_DIR NAME
set -eu
umask 022
base=$1 node=$2 name=$3
root=$node/root

# overlay: the shared read-only base image below, this node's changes above.
mount -t overlay overlay \
    -o "lowerdir=$base,upperdir=$node/upper,workdir=$node/work" "$root"

# /proc of the node's own PID namespace, as a real host has it.
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
# /proc/sys read-only, as systemd-nspawn does: the node shares the host's
# kernel and network namespace, its systemd-sysctl must not retune them.
mount --bind "$root/proc/sys" "$root/proc/sys"
mount -o remount,bind,ro "$root/proc/sys"
# /sys read-only: it is the host kernel's, a node must not reconfigure it.
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
# The node's cgroup (its own cgroup namespace): systemd tracks services there.
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$root/sys/fs/cgroup"

# /dev: a private tmpfs with the usual nodes (not the host's devtmpfs, so
# nothing the node does under /dev touches the host).
mount -t tmpfs -o nosuid,mode=0755,size=64k tmpfs "$root/dev"
mknod -m 0666 "$root/dev/null" c 1 3
mknod -m 0666 "$root/dev/zero" c 1 5
mknod -m 0666 "$root/dev/full" c 1 7
mknod -m 0666 "$root/dev/random" c 1 8
mknod -m 0666 "$root/dev/urandom" c 1 9
mknod -m 0666 "$root/dev/tty" c 5 0
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
ln -s /proc/kcore "$root/dev/core"
mkdir -m 0755 "$root/dev/pts"
mkdir -m 1777 "$root/dev/shm"
# a devpts instance of its own: ssh sessions get ttys numbered from 0.
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"

# /run is a tmpfs on a real host (systemd creates what it needs there).
mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$root/run"

hostname "$name"
# The driver stand-in may have added a library: refresh the loader cache the
# way the driver package's ldconfig trigger would.
chroot "$root" /sbin/ldconfig

# The overlay becomes / (systemd expects a root mount, not a chroot); the
# host's tree is detached from this mount namespace.
cd "$root"
pivot_root . .
umount -l .
# systemd as PID 1; `container` tells it (and systemd-detect-virt) that it
# runs in a container: no udev, no getty on ttys, no hardware setup.
export container=sandbox
exec /lib/systemd/systemd
