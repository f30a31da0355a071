"""Sandbox GPU nodes: throwaway Debian 12 hosts served over real SSH on loopback.

Stand-in for GPU servers on machines without a GPU (README, "The sandbox").
Only the GPU driver (nvidia-smi, libcuda) and the
incident's old CUDA 12.8 toolkit are faked; see sandbox.gpu_standin.

    python3 -m sandbox up gpu1 --addr 127.0.0.11 --gpu rtx-pro-6000-x8 --toolkit incident
    python3 -m sandbox status
    python3 -m sandbox down gpu1        # or: down --all
    python3 -m sandbox destroy          # down --all + delete the image cache
"""
