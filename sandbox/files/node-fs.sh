# Sourced by node-init.sh and layer-init.sh (POSIX sh): the kernel file systems
# a node's root has, mounted the same way for a running node and for a state's
# layer build, so a state script sees the machine a node will be.
#
# mount_node_fs ROOT   (in a private mount namespace: the mounts die with it)
mount_node_fs() {
    fsroot=$1
    # /proc of the namespace's own PID namespace, as a real host has it.
    mount -t proc -o nosuid,nodev,noexec proc "$fsroot/proc"
    # /sys read-only: it is the host kernel's, a node must not reconfigure it.
    mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$fsroot/sys"

    # /dev: a private tmpfs with the usual nodes (not the host's devtmpfs, so
    # nothing the node does under /dev touches the host).
    mount -t tmpfs -o nosuid,mode=0755,size=64k tmpfs "$fsroot/dev"
    mknod -m 0666 "$fsroot/dev/null" c 1 3
    mknod -m 0666 "$fsroot/dev/zero" c 1 5
    mknod -m 0666 "$fsroot/dev/full" c 1 7
    mknod -m 0666 "$fsroot/dev/random" c 1 8
    mknod -m 0666 "$fsroot/dev/urandom" c 1 9
    mknod -m 0666 "$fsroot/dev/tty" c 5 0
    ln -s /proc/self/fd "$fsroot/dev/fd"
    ln -s /proc/self/fd/0 "$fsroot/dev/stdin"
    ln -s /proc/self/fd/1 "$fsroot/dev/stdout"
    ln -s /proc/self/fd/2 "$fsroot/dev/stderr"
    ln -s /proc/kcore "$fsroot/dev/core"
    mkdir -m 0755 "$fsroot/dev/pts"
    mkdir -m 1777 "$fsroot/dev/shm"
    # a devpts instance of its own: ssh sessions get ttys numbered from 0.
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$fsroot/dev/pts"
    ln -s pts/ptmx "$fsroot/dev/ptmx"
    mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$fsroot/dev/shm"

    # /run is a tmpfs on a real host; sshd needs /run/sshd for privilege separation.
    mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$fsroot/run"
    mkdir -m 0755 "$fsroot/run/sshd" "$fsroot/run/lock"
}
