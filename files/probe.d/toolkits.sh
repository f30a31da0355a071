# The toolkits section: writes toolkit, cuda-link; facts/sections/toolkits.py parses them
# (the document's keys: `toolkits`, `cuda_symlink`; docs/facts.md).
probe_toolkits() {
    for home in /usr/local/cuda-* /opt/cuda /opt/cuda-* /opt/nvidia/cuda*; do
        # Version links such as /usr/local/cuda-13 (alternatives) are not toolkits of their own.
        [ -d "$home" ] && [ ! -L "$home" ] && nvcc_section toolkit "$home"
    done
    if [ -x /usr/bin/nvcc ]; then
        nvcc_section toolkit /usr
    fi
    if [ -e /usr/local/cuda ]; then
        emit cuda-link 0 "$(readlink -f /usr/local/cuda)"
    fi
}
