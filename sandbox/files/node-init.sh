#!/bin/sh
# First process (PID 1) of a sandbox node's private mount/PID/UTS/IPC/cgroup
# namespaces, started by `unshare` from sandbox/node.py. It assembles the
# node's root and becomes the node's systemd, which starts sshd as on a real
# host. Every mount made here lives only in this mount namespace: when this
# process dies (down, crash, kill -9) the kernel kills every process of the
# node and drops every mount with it.
#
# usage: node-init.sh LOWERDIR NODE_DIR NAME
#   LOWERDIR: overlayfs lowerdir, top first: the layers of the node's states
#   (sandbox/layers.py), then the base image ("layerN:...:layer1:base").
set -eu
umask 022
lower=$1 node=$2 name=$3
root=$node/root
. "$(dirname "$0")/node-fs.sh"

# overlay: the shared read-only base image and state layers below (their
# whiteouts and opaque directories apply), this node's changes above.
mount -t overlay overlay \
    -o "lowerdir=$lower,upperdir=$node/upper,workdir=$node/work" "$root"

mount_node_fs "$root"
# /proc/sys read-only, as systemd-nspawn does: the node shares the host's
# kernel and (a loopback node) network namespace, its systemd-sysctl must not retune
# them. A bridged node's boot loop runs in the node's own network namespace
# (sandbox/network.py), which this process and systemd inherit: its eth0 and routes.
mount --bind "$root/proc/sys" "$root/proc/sys"
mount -o remount,bind,ro "$root/proc/sys"
# The node's cgroup (its own cgroup namespace): systemd tracks services there.
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$root/sys/fs/cgroup"

hostname "$name"
# The driver stand-in may have added a library: refresh the loader cache the
# way the driver package's ldconfig trigger would.
chroot "$root" /sbin/ldconfig

# The driver stand-in's kernel side (sandbox/gpu_standin.py, the driver states
# of sandbox/field_states.py): what a loaded NVIDIA module shows under /proc and
# /sys, on tmpfs mounts of this namespace only (the host's are never written).
# Writable by the node's root, so a test can "reboot into" another module.
# The module loaded is the one installed for the running kernel (the sandbox apt
# repository's DKMS package builds it: its .modinfo says version and licence, "Dual
# MIT/GPL" for the open flavour); without one, the preinstalled stand-in's (the GPU
# profile's driver version; its flavour: the proprietary-module state); the no-driver
# state has neither. A module changes only here, at boot.
gpu_data=$root/usr/share/sandbox-gpu gpu_state=$root/var/lib/sandbox-gpu
module=$root/lib/modules/$(uname -r)/updates/dkms/nvidia.ko
version= flavour=open
if [ -r "$gpu_data/driver-version" ] && [ -f "$module" ]; then
    version=$(tr '\000' '\n' < "$module" | sed -n 's/^version=//p' | head -n 1)
    licence=$(tr '\000' '\n' < "$module" | sed -n 's/^license=//p' | head -n 1)
    [ "$licence" = "Dual MIT/GPL" ] || flavour=proprietary
elif [ -r "$gpu_data/module-preinstalled" ] && [ -r "$gpu_data/driver-version" ]; then
    read -r version < "$gpu_data/driver-version"
    [ -r "$gpu_state/module-flavour" ] && read -r flavour < "$gpu_state/module-flavour"
fi
if [ -n "$version" ] && [ -r "$gpu_data/proc-version-$flavour" ] && [ -d "$root/proc/driver" ]; then
    read -r recorded < "$gpu_data/driver-version"
    mount -t tmpfs -o nosuid,nodev,noexec,mode=0555,size=64k tmpfs "$root/proc/driver"
    mkdir -m 0555 "$root/proc/driver/nvidia"
    sed "s/$recorded/$version/" "$gpu_data/proc-version-$flavour" > "$root/proc/driver/nvidia/version"
    chmod 0444 "$root/proc/driver/nvidia/version"
    # NVSwitches (the nvswitch-* states): one entry per switch, named by its PCI
    # address as the driver names them; the probe counts them.
    switches=0
    [ -r "$gpu_state/nvswitch-count" ] && read -r switches < "$gpu_state/nvswitch-count"
    if [ "$switches" -gt 0 ]; then
        mkdir -p -m 0555 "$root/proc/driver/nvidia-nvswitch/devices"
        i=0
        while [ "$i" -lt "$switches" ]; do
            printf 'SANDBOX STAND-IN: NVSwitch %s\n' "$i" > "$root/proc/driver/nvidia-nvswitch/devices/0000:0$((i + 5)):00.0"
            i=$((i + 1))
        done
    fi
fi
if [ -e "$gpu_state/nouveau-loaded" ]; then
    # nouveau loaded (state nouveau-loaded): /sys/module/nouveau; the host's
    # modules are hidden from such a node (`rm -r /sys/module/nouveau` unloads it).
    mount -t tmpfs -o nosuid,nodev,noexec,mode=0755,size=64k tmpfs "$root/sys/module"
    mkdir -m 0755 "$root/sys/module/nouveau"
    printf 'live\n' > "$root/sys/module/nouveau/initstate"
fi

# ---- The PCI stand-in (sandbox/gpu_standin.py install_pci; the pci_gpus fact) ----
# The node's PCI bus shows its profile's GPUs alone, driver or not: a tmpfs over
# /sys/bus/pci/devices (the host's devices, its own GPUs included, never show) holding
# a link per GPU and per root port above one into a device tree on the same tmpfs
# (.devices/pci0000:17/0000:17:01.1/0000:18:00.0, as sysfs links into /sys/devices),
# each device with its vendor, device, class, irq, resource and config files; the real
# lspci reads them. With the state acs-redirect the bridges' config spaces are the ones
# with ACS redirect on (root may write them back, as `setpci` does). tmpfs gives each
# file a page of its size= (8 GPUs and their 8 bridges: 96 files, 384 KiB).
pci_data=$root/usr/share/sandbox-pci/devices
pci_acs=$root/usr/share/sandbox-pci/acs-redirect
if [ -d "$root/sys/bus/pci/devices" ]; then
    mount -t tmpfs -o nosuid,nodev,noexec,mode=0755,size=1m tmpfs "$root/sys/bus/pci/devices"
    if [ -d "$pci_data" ]; then
        cp -R "$pci_data/." "$root/sys/bus/pci/devices/"
        if [ -e "$gpu_state/acs-redirect" ] && [ -d "$pci_acs" ]; then
            for pci_bridge in "$pci_acs"/*; do
                cp "$pci_bridge" "$root/sys/bus/pci/devices/${pci_bridge##*/}/config"
            done
        fi
    fi
fi
# ---- end of the PCI stand-in ----

# The overlay becomes / (systemd expects a root mount, not a chroot); the
# host's tree is detached from this mount namespace.
cd "$root"
pivot_root . .
umount -l .
# systemd as PID 1; `container` tells it (and systemd-detect-virt) that it
# runs in a container: no udev, no getty on ttys, no hardware setup.
export container=sandbox
exec /lib/systemd/systemd
