#!/bin/sh
# State library-mismatch (driver stand-in): user space upgraded under the running
# module. The driver's user space (libnvidia-compute-580, held, shipping
# libnvidia-ml.so.580.105.08) is at 580.105.08 while the loaded module stays at the
# profile's version (DRIVER_LIBRARY_MISMATCH until the module is 580.105.08: write
# that banner to /proc/driver/nvidia/version, the sandbox's reboot).
set -eu
. ./standin-deb.sh
tree=$(mktemp -d)
case $(dpkg --print-architecture) in
    arm64) lib=/usr/lib/aarch64-linux-gnu ;;
    *) lib=/usr/lib/x86_64-linux-gnu ;;
esac
install -d -m 0755 "$tree$lib"
# An empty file: the probe reads the name; nothing loads it (libnvidia-ml.so.1 is absent).
install -m 0644 /dev/null "$tree$lib/libnvidia-ml.so.580.105.08"
standin_deb libnvidia-compute-580 580.105.08-0ubuntu1 "$tree" libnvidia-compute-580.deb
installed_held libnvidia-compute-580.deb
