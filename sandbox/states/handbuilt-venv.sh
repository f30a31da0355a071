#!/bin/sh
# State handbuilt-venv: the venv the seeds' operator built by hand at
# /opt/venv_sglang211 (root-owned, world-readable): python3 -m venv, then pip
# from a lock with hashes (lock.txt: sandbox/locks/handbuilt-venv-cpXY-ARCH.txt,
# torch 2.14.1 built for CUDA 13.0 and FlashInfer 0.7.0, the release in which
# a 12.8 nvcc first on PATH empties FlashInfer's target arch list).
#
# Environment: FIND_LINKS, the sandbox's wheel mirror (a site wheelhouse).
set -eu
python3 -m venv /opt/venv_sglang211
/opt/venv_sglang211/bin/pip install --no-cache-dir --disable-pip-version-check --progress-bar off \
    --no-index --find-links "$FIND_LINKS" --require-hashes -r lock.txt
