#!/bin/sh
# State ubuntu-drivers-dkms (driver stand-in, Ubuntu only): Canonical's 580-server series
# with the open kernel module built by DKMS, as `ubuntu-drivers install --gpgpu` leaves it on a
# kernel flavour without prebuilt modules, at the profile's driver 580.95.05
# (580.95.05-0ubuntu0.<release>.1: the lock's upstream version, which deploy adopts). The
# packages and what they install are SANDBOX STAND-INs: sandbox/files/canonical-dkms.sh.
set -eu
. ./standin-deb.sh
. ./canonical-dkms.sh
canonical_dkms 580.95.05
