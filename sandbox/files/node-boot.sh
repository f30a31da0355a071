#!/bin/sh
# The power switch of a sandbox node, started by sandbox/node.py (`setsid`, in the
# node's cgroup): each boot is a fresh set of namespaces (`unshare --fork`) whose first
# process, node-init.sh, assembles the same overlay (same upper: the node's files,
# address, port and host keys) and becomes the node's systemd.
#
# A reboot inside the node (`reboot`, `systemctl reboot`, `shutdown -r now`, pyinfra's
# server.reboot) ends in reboot(2), which in a PID namespace ends its init as if killed
# by SIGHUP (pid_namespaces(7)); unshare passes that on (status 128 + 1) and this loop
# boots the node again. Any other end (poweroff: SIGINT, `sandbox down`: SIGKILL, a
# crash) stops the node for good.
#
# Each boot has a time namespace of its own whose boot clock starts at 1 s: /proc/uptime
# says how long the node has been up, not the host, as pyinfra's reboot check reads it.
#
# usage: node-boot.sh LOWERDIR NODE_DIR NAME
set -u
init=$(dirname "$0")/node-init.sh
while :; do
    host_up=$(cut -d. -f1 /proc/uptime)
    unshare --mount --pid --uts --ipc --cgroup --time --boottime "$((1 - host_up))" --fork \
        --kill-child --propagation private /bin/sh "$init" "$@"
    status=$?
    [ "$status" -eq 129 ] || exit "$status"
    echo "node-boot: $3 rebooting"
done
