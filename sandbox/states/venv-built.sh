#!/bin/sh
# State venv-built: a deploy that stopped right after building its venv. The
# product's own files/build-venv.sh (copied beside this script with the helpers it
# runs) built the venv of lock.txt (sandbox/locks/handbuilt-venv-cpXY-ARCH.txt:
# torch 2.14.1 built for CUDA 13.0, FlashInfer 0.7.0) into /opt/sglang/venvs/<its
# digest>, marked complete, and switched /opt/sglang/venv to it; the link is then
# taken away again, as a deploy interrupted between the build and the switch leaves
# it. A deploy of the same lock finds the venv complete and only switches it in
# (seconds): the serving group's nodes share this one layer instead of building a
# torch venv each (about 7 GB and minutes per node).
#
# Environment: FIND_LINKS, the sandbox's wheel mirror.
set -eu
digest=$(sha256sum lock.txt | cut -c1-16)
install -d -m 0755 -o root -g root /opt/sglang /opt/sglang/locks
install -m 0644 -o root -g root lock.txt "/opt/sglang/locks/$digest.txt"
# Its download cache stays in /run/state (a tmpfs), out of the layer.
env VENV_LINK=/opt/sglang/venv VENV_DIRS=/opt/sglang/venvs VENV_DIGEST="$digest" \
    VENV_LOCK="/opt/sglang/locks/$digest.txt" VENV_UV_LOCK=/nonexistent VENV_TOOLS=/opt/sglang/tools \
    VENV_CACHE=/run/state/cache VENV_INSTALLER=pip VENV_PYTHON=/usr/bin/python3 \
    VENV_TORCH_INFO=/run/state/torch_info.py VENV_RELEASES=/opt/sglang/releases \
    sh ./build-venv.sh --no-index --find-links "$FIND_LINKS"
test "$(cat "/opt/sglang/venvs/$digest/.complete")" = "$digest"
test -s "/opt/sglang/venvs/$digest/.torch-arch.json"
rm -f /opt/sglang/venv /opt/sglang/venvs/.build.lock
