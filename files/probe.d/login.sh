# The login section: writes login-env, path-nvcc; facts/sections/login.py parses them
# (the document's keys: `path_nvcc`, `login_env`; docs/facts.md).
probe_login() {
    shell=bash
    command -v bash >/dev/null 2>&1 || shell=sh
    login=$("$shell" -lc 'printf "CUDA_HOME=%s\nCUDA_PATH=%s\nPATH=%s\nnvcc=%s\n" "$CUDA_HOME" "$CUDA_PATH" "$PATH" "$(command -v nvcc)"' </dev/null 2>/dev/null)
    emit login-env $? "$login"
    # Its last line is "nvcc=<path>" (the shell's own expansion: no process for it).
    case $login in *nvcc=*) login_nvcc=${login##*nvcc=} ;; *) login_nvcc= ;; esac
    if [ -n "$login_nvcc" ]; then
        capture path-nvcc "path=$login_nvcc" run_program "$login_nvcc" --version
    fi
}
