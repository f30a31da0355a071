#!/bin/sh
# State handbuilt-venv on Ubuntu 22.04: as handbuilt-venv.sh, but Ubuntu 22.04's
# python3 is 3.10, older than the lock's CPython (cp311): the operator installed
# python3.11 from jammy-updates/universe (bringup.platforms) and built the venv with it.
#
# Environment: FIND_LINKS, the sandbox's wheel mirror (a site wheelhouse).
set -eu
apt-get update
apt-get install -y --no-install-recommends python3.11 python3.11-venv
apt-get clean
python3.11 -m venv /opt/venv_sglang211
/opt/venv_sglang211/bin/pip install --no-cache-dir --disable-pip-version-check --progress-bar off \
    --no-index --find-links "$FIND_LINKS" --require-hashes -r lock.txt
