#!/bin/sh
# State cuda-12.8: the seeds' old toolkit, CUDA 12.8, installed by apt from
# NVIDIA's repository (state nvidia-repo below this one) as NVIDIA lays it
# out: /usr/local/cuda-12.8, and /usr/local/cuda pointing at it through the
# 'cuda' alternative. Then what the operator added by hand: a profile.d
# snippet putting 12.8's bin first on every login shell's PATH, the reason
# FlashInfer later picked nvcc 12.8 (field notes, sections 1 and 10).
set -eu
# The compiler and what a build compiles and links against: headers, cudart.
apt-get install -y --no-install-recommends cuda-nvcc-12-8 cuda-cudart-dev-12-8
apt-get clean
cat > /etc/profile.d/cuda-12.8.sh <<'PROFILE'
# CUDA 12.8 (added by hand after the toolkit install)
export PATH="/usr/local/cuda-12.8/bin${PATH:+:$PATH}"
PROFILE
chmod 0644 /etc/profile.d/cuda-12.8.sh
