#!/bin/sh
# State cloud-login: how cloud images are reached. The login user of the image (uid
# 1000: ubuntu on Ubuntu's, admin on Debian's; sandbox.image.cloud_login_user)
# with passwordless sudo as cloud-init writes it (/etc/sudoers.d/90-cloud-init-users),
# and sudo hardened as CIS benchmarks have it: use_pty, env_reset, a secure_path, a log
# file, and umask 0077 for every command run through sudo (umask_override: not merged
# with the caller's). The node's start puts the sandbox's SSH key in the user's
# authorized_keys (sandbox/node.py); the host list registered for inventory/gpu.py
# reaches the node as that user with _sudo (sandbox/registration.py).
set -eu
. /etc/os-release
case "$ID" in ubuntu) user=ubuntu ;; *) user=admin ;; esac
id "$user" >/dev/null 2>&1 || useradd --uid 1000 --user-group --create-home --shell /bin/bash "$user"
install -d -m 0700 -o "$user" -g "$user" "/home/$user/.ssh"
install -d -m 0750 /etc/sudoers.d
printf '%s ALL=(ALL) NOPASSWD:ALL\n' "$user" > /etc/sudoers.d/90-cloud-init-users
cat > /etc/sudoers.d/10-cis-hardening <<'SUDO'
Defaults use_pty
Defaults env_reset
Defaults secure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin"
Defaults logfile="/var/log/sudo.log"
Defaults umask=0077
Defaults umask_override
SUDO
chmod 0440 /etc/sudoers.d/90-cloud-init-users /etc/sudoers.d/10-cis-hardening
visudo -c -q
