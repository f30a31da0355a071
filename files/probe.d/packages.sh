# The packages section: writes deb-packages; facts/sections/packages.py parses them
# (the document's keys: `cuda_packages`; docs/facts.md).
probe_packages() {
    # Installed CUDA repository packages (cuda-*, libcublas-13-0, libnvvm-13-0 ...: the toolkit
    # lock's names; CUDA 13 names NVVM libnvvm-X-Y), and DCGM's (datacenter-gpu-manager-4-core ...: the
    # DCGM lock's names).
    if command -v dpkg-query >/dev/null 2>&1; then
        emit deb-packages 0 "$(dpkg-query -W -f='${db:Status-Abbrev}|${Package}|${Version}\n' 'cuda-*' 'libcu*-[0-9]*-[0-9]*' \
            'libnvvm-[0-9]*-[0-9]*' 'datacenter-gpu-manager-*' 2>/dev/null)"
    else
        emit deb-packages 127 ""
    fi
}
