#!/bin/sh
# State kernel-log (for the GPU health states' Xid lines): Debian's systemd-journal-remote
# from the distribution's archive, as an operator installs it. `python -m sandbox health
# NAME STATE` has it write the state's NVRM Xid lines into the node's journal as
# kernel-transport entries (sandbox/gpu_health_states.py), which `journalctl -k -b` shows.
# Its units stay disabled and masked: a node shares the host's network, and its listener
# (port 19532) is no part of any node.
set -eu
apt-get update
apt-get install -y --no-install-recommends systemd-journal-remote
apt-get clean
systemctl mask systemd-journal-remote.socket systemd-journal-remote.service systemd-journal-upload.service
