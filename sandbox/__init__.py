"""Sandbox GPU nodes: throwaway Debian 12 or 13 hosts (amd64, or arm64 through QEMU)
served over real SSH on loopback, or (``--network bridge``) each in a network namespace of
its own on a bridge, distinct on the network as a serving group's members are
(sandbox.network).

Stand-in for GPU servers on machines without a GPU (docs/contributing.md, "The sandbox").
Only the GPU driver (nvidia-smi, libcuda, the kernel module; also as packages of the
sandbox apt repository, sandbox.aptrepo.driver_debs) is faked, and, with ``--toolkit
incident``, the incident's old CUDA 12.8 toolkit; see sandbox.gpu_standin.
``--state`` puts real field states under the node as cached layers (apt from
the sandbox's NVIDIA-style repository, hand-built venvs, operators' files);
see sandbox.field_states.

    python3 -m sandbox up gpu1 --addr 127.0.0.11 --gpu rtx-pro-6000-x8 --toolkit incident
    python3 -m sandbox up gpu2 --addr 127.0.0.12 --gpu rtx-pro-6000-x8 --state incident,operator
    python3 -m sandbox up gpu3 --addr 127.0.0.13 --gpu b200-x8 --os debian13
    python3 -m sandbox up arm1 --addr 127.0.0.14 --gpu gb10 --arch arm64
    python3 -m sandbox up net1 --addr 198.18.0.11 --gpu none --network bridge --state iproute2
    python3 -m sandbox status
    python3 -m sandbox reboot gpu1      # as a machine reboots: a module installed meanwhile is loaded
    python3 -m sandbox layers [--prune]
    python3 -m sandbox down gpu1        # or: down --all
    python3 -m sandbox destroy          # down --all + delete the image and layer caches
"""
