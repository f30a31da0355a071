#!/bin/sh
# State first-boot-upgrades: a cloud image's first boot, when unattended-upgrades
# (apt-daily-upgrade.service) installs the security updates for minutes and holds
# apt's and dpkg's locks meanwhile. A stand-in (sandbox/files/unattended-upgrade-standin,
# declared in docs/contributing.md, "The sandbox"): the real unattended-upgrade would
# fetch and install whatever Ubuntu's archive has that day. The stand-in takes the locks
# the way apt does (fcntl write locks on lock-frontend, then lock) as soon as the node
# boots, holds them HOLD_SECONDS (/etc/default/sandbox-first-boot-upgrades), and exits.
# An hour: a test says when the upgrades finish (systemctl stop sandbox-first-boot-upgrades),
# so no step of it races a clock.
set -eu
install -d -m 0755 /usr/local/lib/sandbox
install -m 0755 unattended-upgrade-standin /usr/local/lib/sandbox/unattended-upgrade
printf 'HOLD_SECONDS=3600\n' > /etc/default/sandbox-first-boot-upgrades
chmod 0644 /etc/default/sandbox-first-boot-upgrades
cat > /etc/systemd/system/sandbox-first-boot-upgrades.service <<'UNIT'
[Unit]
Description=Stand-in: unattended-upgrades at a cloud image's first boot (holds apt's locks)
After=local-fs.target

[Service]
Type=simple
EnvironmentFile=/etc/default/sandbox-first-boot-upgrades
ExecStart=/usr/bin/python3 /usr/local/lib/sandbox/unattended-upgrade

[Install]
WantedBy=multi-user.target
UNIT
chmod 0644 /etc/systemd/system/sandbox-first-boot-upgrades.service
install -d -m 0755 /etc/systemd/system/multi-user.target.wants
ln -sf /etc/systemd/system/sandbox-first-boot-upgrades.service \
    /etc/systemd/system/multi-user.target.wants/sandbox-first-boot-upgrades.service
