#!/bin/sh
# SANDBOX STAND-IN for the NVIDIA kernel module's build (dkms.conf's MAKE; sandbox/aptrepo/
# driver_debs.py): a few seconds long, as a real build is minutes, so a test can kill it
# half-way; then nvidia.ko, a relocatable ELF holding only a .modinfo section (the
# module's version and licence, which `modinfo` and the node's boot read). Nothing can
# load it: the sandbox's kernel is the host's.
# usage: dkms-build.sh KERNEL_RELEASE
set -eu
seconds=${SANDBOX_DKMS_SECONDS:-@SECONDS@}
i=0
while [ "$i" -lt "$seconds" ]; do
    echo "  CC [M]  nvidia/stand-in step $i of $seconds (kernel $1)"
    sleep 1
    i=$((i + 1))
done
cat > nvidia-modinfo.c <<MODINFO
__attribute__((section(".modinfo"), used, aligned(1)))
static const char modinfo[] =
    "version=@VERSION@\0"
    "license=@LICENSE@\0"
    "description=SANDBOX STAND-IN: NVIDIA @FLAVOUR@ kernel module, not NVIDIA's\0"
    "author=gpu-bringup sandbox\0"
    "name=nvidia\0"
    "vermagic=$1 SMP mod_unload \0";
MODINFO
${CC:-cc} -c -o nvidia.ko nvidia-modinfo.c
