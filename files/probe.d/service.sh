# The service section: writes service-env, resolved-nvcc; facts/sections/service.py parses them
# (the document's keys: `resolution`, `service_env`, `service_env_owned`; docs/facts.md).
probe_service() {
    # The service's environment (systemd's default PATH, then the env file), then
    # FlashInfer's own search order (flashinfer/jit/cpp_ext.py get_cuda_path):
    # CUDA_HOME, CUDA_PATH, which nvcc, /usr/local/cuda. Read, not exported: nothing
    # runs with it; nvcc is looked up on its PATH by the shell's own search.
    service=$(
        service_view $PROBE_ENV_KEYS
        service_env_PATH=$service_path
        cuda_home=${service_env_CUDA_HOME-} cuda_path=${service_env_CUDA_PATH-}
        if [ -n "$cuda_home" ]; then home=$cuda_home; via=CUDA_HOME
        elif [ -n "$cuda_path" ]; then home=$cuda_path; via=CUDA_PATH
        elif nvcc=$(PATH=$service_path; command -v nvcc); then home=${nvcc%/bin/*}; via=PATH
        elif [ -e /usr/local/cuda ]; then home=/usr/local/cuda; via=default
        else home=; via=none
        fi
        printf "env_file=%s\nCUDA_HOME=%s\nCUDA_PATH=%s\nPATH=%s\n" "$env_state" "$cuda_home" "$cuda_path" "$service_path"
        printf "FLASHINFER_CUDA_ARCH_LIST=%s\nFLASHINFER_WORKSPACE_BASE=%s\n" \
            "${service_env_FLASHINFER_CUDA_ARCH_LIST-}" "${service_env_FLASHINFER_WORKSPACE_BASE-}"
        printf "home=%s\nvia=%s\n" "$home" "$via"
        for key in $PROBE_ENV_KEYS; do
            case $key in "" | [0-9]* | *[!A-Za-z0-9_]*) continue ;; esac
            # Set (even empty) in the file, or PATH: reported as the service sees it.
            if eval "[ -n \"\${service_env_$key+set}\" ]"; then
                eval "printf 'env.%s=%s\n' \"\$key\" \"\$service_env_$key\""
            fi
        done
        # The keys deploy wrote for a reason of its own (a serving group's interfaces), each
        # while the env file still holds deploy's value: the plan takes it back once its reason
        # is gone. Nothing of the operator's is read out: only a value deploy's record holds.
        if [ "$env_state" = present ] && owned=$(owned_record "$PROBE_ENV_FILE.deploy-owned"); then
            printf '%s\n' "$owned" | while IFS= read -r line; do
                key=${line%%=*} value=${line#*=}
                case $line in *=*) ;; *) continue ;; esac
                case $key in "" | [0-9]* | *[!A-Za-z0-9_]*) continue ;; esac
                if eval "[ \"\${service_env_$key+set}\" = set ] && [ \"\$service_env_$key\" = \"\$value\" ]"; then
                    printf 'owned.%s=%s\n' "$key" "$value"
                fi
            done
        fi
    )
    emit service-env $? "$service"
    case $service in
        *"
home="*) service_home=${service#*
home=}; service_home=${service_home%%
*} ;;
        *) service_home= ;;
    esac
    if [ -n "$service_home" ]; then
        nvcc_section resolved-nvcc "$service_home"
    fi
}
