#!/bin/sh
# State ubuntu-drivers-dkms elsewhere than Ubuntu: Canonical's driver packages come from
# Ubuntu's archive only (bringup/canonical_driver.py).
echo "ubuntu-drivers-dkms is a state of Ubuntu nodes only (ubuntu2204, ubuntu2404)" >&2
exit 1
