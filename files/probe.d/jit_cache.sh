# The jit_cache section: writes toolchain, jit-cache; facts/sections/jit_cache.py parses them
# (the document's keys: `jit_cache`; docs/facts.md).
probe_jit_cache() {
    # SGLang's JIT cache key covers nvcc's and c++'s --version output and every header a
    # build read (sglang kernels/jit/utils/compile/cache.py: _environment_fingerprint and
    # the deps key): a changed compiler or header package means its pre-warmed modules
    # would compile again at start. The compilers' output and the versions of the
    # packages that ship them and their headers stand for that, in the service's
    # environment; the pre-warm records the same digest in its manifest.
    # The compilers are looked up as the service would (its env file's CUDA_HOME, CXX
    # and PATH) and run as their owners, with a clean environment.
    toolchain=$(
        service_view
        cxx=${service_env_CXX:-c++}
        case $cxx in
            */*) ;;
            *) cxx=$(PATH=$service_path; command -v "$cxx") || cxx="${service_env_CXX:-c++}: not found" ;;
        esac
        {
            run_program "${service_env_CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version 2>&1
            case $cxx in
                *": not found") printf '%s\n' "$cxx" ;;
                *) run_program "$cxx" --version 2>&1 ;;
            esac
            # libcuda1 is the driver's user-space library (no header, no compiler): an
            # upgrade of the driver must not read as a changed toolchain.
            dpkg-query -W -f '${db:Status-Abbrev}${Package}=${Version}\n' 'cuda-*' 'libcu*' 'libnvvm-*' 'libc6-dev' \
                'libstdc++*-dev' 'g++*' 'gcc*' 2>/dev/null | sed -n '/^ii libcuda1[:=]/d; s/^ii //p' | LC_ALL=C sort
        } | sha256sum | cut -c1-64
    )
    emit toolchain 0 "$toolchain"
    if [ -d "$PROBE_JIT_ROOT" ]; then
        emit jit-cache 0 "$(cd "$PROBE_JIT_ROOT" && find . -mindepth 5 -maxdepth 5 -path './*/*/cached_ops/*/*.so' | sort)" "base=$PROBE_CACHE_DIR"
    else
        emit jit-cache 1 "" "base=$PROBE_CACHE_DIR"
    fi
}
