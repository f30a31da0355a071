#!/bin/sh
# State nvswitch-fm-inactive (driver stand-in, on nvswitch-no-fm): Fabric Manager
# installed at the driver's version, held, its unit not enabled and not running, as
# the package leaves it (FABRIC_MANAGER_INACTIVE, FABRIC_NOT_READY until
# `systemctl enable --now nvidia-fabricmanager`). 580.95.05 is the h100-x8
# profile's driver (tests/fixtures/gpus/h100-x8/).
set -eu
. ./standin-deb.sh
fabricmanager_deb 580.95.05 nvidia-fabricmanager_580.95.05-1.deb
installed_held nvidia-fabricmanager_580.95.05-1.deb
