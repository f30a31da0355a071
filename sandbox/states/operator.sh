#!/bin/sh
# State operator: the marks operators leave on a node before any tool runs.
# - /etc/sglang/sglang.env: the service's env file, with the operator's own
#   variables and no CUDA settings (a deploy must keep these);
# - an Ubuntu-style /etc/environment (PATH without any CUDA, read by pam_env
#   for every SSH session);
# - /opt/sglang/venv as a directory (not a link): an older, smaller venv built
#   by hand (one pinned wheel from lock.txt, no torch), marked by HANDBUILT.
#
# Environment: FIND_LINKS, the sandbox's wheel mirror.
set -eu
install -d -m 0755 /etc/sglang
cat > /etc/sglang/sglang.env <<'ENV'
HF_TOKEN=hf_sandbox_not_a_secret
NCCL_DEBUG=INFO
NCCL_IB_DISABLE=1
ENV
chmod 0644 /etc/sglang/sglang.env

cat > /etc/environment <<'ENV'
PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games:/snap/bin"
ENV
chmod 0644 /etc/environment

install -d -m 0755 /opt/sglang
python3 -m venv /opt/sglang/venv
/opt/sglang/venv/bin/pip install --no-cache-dir --disable-pip-version-check --progress-bar off \
    --no-index --find-links "$FIND_LINKS" --require-hashes -r lock.txt
cat > /opt/sglang/venv/HANDBUILT <<'NOTE'
Built by hand by an operator (python3 -m venv + pip), before any deploy.
Sandbox marker of the operator state (sandbox/states/operator.sh).
NOTE
chmod 0644 /opt/sglang/venv/HANDBUILT
