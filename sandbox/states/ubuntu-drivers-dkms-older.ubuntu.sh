#!/bin/sh
# State ubuntu-drivers-dkms-older (driver stand-in, Ubuntu only): as ubuntu-drivers-dkms, at
# an older upstream version, 580.82.07 (580.82.07-0ubuntu0.<release>.1: not the lock's, which
# deploy replaces; its DKMS module is the one loaded at boot). SANDBOX STAND-INs:
# sandbox/files/canonical-dkms.sh.
set -eu
. ./standin-deb.sh
. ./canonical-dkms.sh
canonical_dkms 580.82.07
