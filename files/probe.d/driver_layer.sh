# ---- The driver layer (docs/facts.md "driver_layer"; facts/sections/driver_layer.py parses it) ----
# What nvidia-smi alone does not say: the loaded module's version and flavour against the
# user space and the packages, nouveau, NVSwitch and Fabric Manager, persistence, DKMS and
# headers, a pending reboot, the IOMMU and the ACS control of the bridges above each GPU.
# A missing file or tool is a fact (an empty body, rc 127), never a failure. Files are
# read with the shell's own read (no process per file); each tool is looked up on the base
# PATH and run by run_program (clean environment, as its owner); its output is cut to the
# lines the parser reads, so a node with 8 GPUs and many bridges stays small.
driver_head() {
    # driver_head MAX: the first MAX lines of the standard input, by the shell alone (a
    # last line without its newline too).
    driver_count=0
    while [ "$driver_count" -lt "$1" ] && { IFS= read -r driver_line || [ -n "$driver_line" ]; }; do
        printf '%s\n' "$driver_line"
        driver_count=$((driver_count + 1))
    done
}

driver_file() {
    # driver_file SECTION FILE MAX: FILE's first MAX lines as a section; rc 1 when it is not there.
    if [ -r "$DRIVER_FS_ROOT$2" ]; then
        emit "$1" 0 "$(driver_head "$3" < "$DRIVER_FS_ROOT$2")"
    else
        emit "$1" 1 ""
    fi
}

driver_tool() {
    # driver_tool NAME: where NAME is on the base PATH (the shell's own search), or nothing.
    (PATH=$CLEAN_PATH; command -v "$1") 2>/dev/null
}

driver_initramfs() {
    # driver_initramfs RELEASE: that kernel's initramfs against the nouveau blacklists
    # ($nouveau_confs, those of /run left out): none (no /boot/initrd.img-RELEASE), stale (a
    # blacklist newer than it, or one of /etc/modprobe.d that lsinitramfs does not list in
    # it), else current.
    initrd="$DRIVER_FS_ROOT/boot/initrd.img-$1"
    [ -e "$initrd" ] || { echo none; return; }
    [ -n "$nouveau_confs" ] || { echo current; return; }
    # lsinitramfs (initramfs-tools) lists it; where it is missing or fails, the times alone.
    listed= lister=
    # (An empty listing is no answer either.) A path is taken from its etc/modprobe.d/ on,
    # whatever archive prefix a version of lsinitramfs puts before it.
    if tool=$(driver_tool lsinitramfs) && out=$(run_program "$tool" "$initrd" 2>/dev/null) && [ -n "$out" ]; then
        lister=yes
        listed=$(printf '%s\n' "$out" | while IFS= read -r line; do
            case $line in etc/modprobe.d/* | */etc/modprobe.d/*) printf 'etc/modprobe.d/%s\n' "${line#*etc/modprobe.d/}" ;; esac
        done)
    fi
    printf '%s\n' "$nouveau_confs" | {
        verdict=current
        while IFS= read -r conf; do
            case ${conf#"$DRIVER_FS_ROOT"} in "" | /run/*) continue ;; esac  # /run's: this boot's only
            [ "$conf" -nt "$initrd" ] && verdict=stale
            case ${conf#"$DRIVER_FS_ROOT"} in
                /etc/modprobe.d/*)
                    [ -n "$lister" ] || continue
                    case "$NL$listed$NL" in *"${NL}${conf#"$DRIVER_FS_ROOT"/}$NL"*) ;; *) verdict=stale ;; esac ;;
            esac
        done
        echo "$verdict"
    }
}

driver_smi_query() {
    # `nvidia-smi -q`, cut to what the parsers read: the lines at column 0 (the GPU
    # headers, the driver version, an error) and, per GPU, Persistence Mode, MIG Mode's
    # Current, Fabric's State and Status, PCI's Bus Id and the Remapped Rows counts and
    # flags (the gpu_health section's: --query-gpu has no row remapping field).
    driver_top=
    while IFS= read -r driver_line; do
        case $driver_line in
            "        "[!\ ]*)
                case $driver_top:$driver_line in
                    "MIG Mode:        Current "* | "Fabric:        State "* | "Fabric:        Status "* | \
                    "PCI:        Bus Id "*) printf '%s\n' "$driver_line" ;;
                    "Remapped Rows:        Correctable Error "* | "Remapped Rows:        Uncorrectable Error "* | \
                    "Remapped Rows:        Pending "* | "Remapped Rows:        Remapping Failure Occurred "*)
                        # Without -q's column padding (what comes back from 8 GPUs stays small).
                        driver_key=${driver_line%%:*}
                        while :; do case $driver_key in *" ") driver_key=${driver_key% } ;; *) break ;; esac; done
                        printf '%s :%s\n' "$driver_key" "${driver_line#*:}" ;;
                esac ;;
            "    "[!\ ]*)
                driver_top=${driver_line#    }
                driver_top=${driver_top%%  *}
                case $driver_top in
                    "Persistence Mode"*) printf '%s\n' "$driver_line" ;;
                    "MIG Mode" | Fabric | "Remapped Rows") printf '%s\n' "$driver_line" ;;
                esac ;;
            " "* | "") ;;
            *) printf '%s\n' "$driver_line" ;;
        esac
    done
}

driver_pci_gpus() {
    # Each NVIDIA display or 3D controller on PCI (vendor 0x10de, class 0x03xxxx) and the
    # bridges above it, root port first: "gpu bridge...", from its sysfs path.
    driver_links=
    for driver_dev in "$DRIVER_FS_ROOT"/sys/bus/pci/devices/*; do
        [ -r "$driver_dev/vendor" ] && [ -r "$driver_dev/class" ] || continue
        read -r driver_vendor < "$driver_dev/vendor" || continue
        read -r driver_class < "$driver_dev/class" || continue
        case $driver_vendor:$driver_class in 0x10de:0x03*) driver_links="$driver_links $driver_dev" ;; esac
    done
    [ -n "$driver_links" ] || return 0
    # One readlink for all of them; each path's PCI addresses after the GPU's own are dropped.
    readlink -f -- $driver_links | while IFS= read -r driver_path; do
        driver_chain=
        driver_rest=${driver_path#"$DRIVER_FS_ROOT"/sys/devices/}
        while [ -n "$driver_rest" ]; do
            driver_part=${driver_rest%%/*}
            case $driver_part in
                [0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7])
                    driver_chain="$driver_chain $driver_part" ;;
            esac
            case $driver_rest in */*) driver_rest=${driver_rest#*/} ;; *) driver_rest= ;; esac
        done
        set -- $driver_chain
        [ $# -gt 0 ] || continue
        eval "driver_gpu=\${$#}"
        driver_bridges=
        while [ $# -gt 1 ]; do driver_bridges="$driver_bridges $1"; shift; done
        printf '%s%s\n' "$driver_gpu" "$driver_bridges"
    done
}

driver_acs() {
    # driver_acs BRIDGE...: "bridge ACSCtl..." for each BRIDGE lspci shows an ACS control
    # of, from one `lspci -vvv` of the PCI bridges (class 0604) read by the shell.
    driver_want=" $* "
    driver_dev=
    while IFS= read -r driver_line; do
        case $driver_line in
            [0-9a-f]*" "*)
                driver_dev=${driver_line%% *}
                case $driver_dev in ????:*) ;; *) driver_dev=0000:$driver_dev ;; esac ;;
            *ACSCtl:*)
                case $driver_want in *" $driver_dev "*) printf '%s %s\n' "$driver_dev" "${driver_line#*ACSCtl:}" ;; esac ;;
        esac
    done
}

probe_driver_layer() {
    driver_file driver-proc-version /proc/driver/nvidia/version 4
    driver_file driver-sys-version /sys/module/nvidia/version 1
    if tool=$(driver_tool modinfo); then
        out=$(run_program "$tool" nvidia 2>&1); rc=$?
        emit driver-modinfo "$rc" "$(printf '%s\n' "$out" | while IFS= read -r line; do
            case $line in filename:* | version:* | license:*) printf '%s\n' "$line" ;; esac
        done)"
    else
        emit driver-modinfo 127 ""
    fi
    # User space: the libnvidia-ml.so.<version> files of the library directories.
    nvml=
    for lib in "$DRIVER_FS_ROOT"/usr/lib/*-linux-gnu/libnvidia-ml.so.* "$DRIVER_FS_ROOT"/usr/lib64/libnvidia-ml.so.* \
            "$DRIVER_FS_ROOT"/usr/lib/libnvidia-ml.so.* "$DRIVER_FS_ROOT"/lib64/libnvidia-ml.so.*; do
        [ -e "$lib" ] && nvml="$nvml${NL}${lib#"$DRIVER_FS_ROOT"}"
    done
    emit driver-nvml 0 "${nvml#"$NL"}"
    # Canonical's driver too (ubuntu-drivers): its -server series and its prebuilt modules
    # (linux-modules/objects/signatures-nvidia-*); its version says the archive (bringup/canonical_driver.py).
    if tool=$(driver_tool dpkg-query); then
        emit driver-packages 0 "$(run_program "$tool" -W -f='${db:Status-Abbrev}|${Package}|${Version}\n' \
            'nvidia-*' 'libnvidia-*' 'cuda-drivers*' '*fabricmanager*' 'nvlsm*' 'linux-modules-nvidia-*' \
            'linux-objects-nvidia-*' 'linux-signatures-nvidia-*' 'firmware-nvidia-*' 2>/dev/null)"
    else
        emit driver-packages 127 ""
    fi
    # nouveau: loaded, and each modprobe.d file with a "blacklist nouveau" line.
    nouveau=loaded=no
    nouveau_confs=
    [ -d "$DRIVER_FS_ROOT/sys/module/nouveau" ] && nouveau=loaded=yes
    for conf in "$DRIVER_FS_ROOT"/etc/modprobe.d/*.conf "$DRIVER_FS_ROOT"/lib/modprobe.d/*.conf \
            "$DRIVER_FS_ROOT"/usr/lib/modprobe.d/*.conf "$DRIVER_FS_ROOT"/run/modprobe.d/*.conf; do
        [ -r "$conf" ] || continue
        while read -r word module rest; do
            if [ "$word" = blacklist ] && [ "$module" = nouveau ]; then
                nouveau="$nouveau${NL}blacklist=${conf#"$DRIVER_FS_ROOT"}"
                nouveau_confs="$nouveau_confs${NL}$conf"
                break
            fi
        done < "$conf"
    done
    emit driver-nouveau 0 "$nouveau"
    switches=0
    for switch in "$DRIVER_FS_ROOT"/proc/driver/nvidia-nvswitch/devices/*; do
        [ -e "$switch" ] && switches=$((switches + 1))
    done
    emit driver-nvswitch 0 "$switches"
    if [ -d "$DRIVER_FS_ROOT/run/systemd/system" ] && tool=$(driver_tool systemctl); then
        out=$(run_program "$tool" show -p Id -p LoadState -p ActiveState -p UnitFileState nvidia-persistenced.service \
            nvidia-fabricmanager.service nvlsm.service 2>&1)
        emit driver-units $? "$out"
    else
        emit driver-units 127 ""
    fi
    if tool=$(driver_tool nvidia-smi); then
        out=$(run_program "$tool" -q 2>&1); rc=$?
        emit driver-smi-q "$rc" "$(printf '%s\n' "$out" | driver_smi_query)"
        out=$(run_program "$tool" topo -m 2>&1); rc=$?
        # The matrix: its header and the GPU rows (no NIC rows, no legend).
        if [ "$rc" = 0 ]; then
            emit driver-topo 0 "$(printf '%s\n' "$out" | while IFS= read -r line; do
                case $line in *GPU0* | GPU[0-9]*) printf '%s\n' "$line" ;; esac
            done)"
        else
            emit driver-topo "$rc" "$(printf '%s\n' "$out" | driver_head 3)"
        fi
    else
        emit driver-smi-q 127 ""
    fi
    release=
    [ -r "$DRIVER_FS_ROOT/proc/sys/kernel/osrelease" ] && read -r release < "$DRIVER_FS_ROOT/proc/sys/kernel/osrelease"
    headers=no
    [ -n "$release" ] && [ -e "$DRIVER_FS_ROOT/lib/modules/$release/build" ] && headers=yes
    # Every installed kernel a boot may start (its image in /boot and its modules
    # directory): its headers, and whether its initramfs holds the nouveau blacklist.
    installed=
    for modules in "$DRIVER_FS_ROOT"/lib/modules/*; do
        kernel=${modules##*/}
        [ -d "$modules" ] && [ -e "$DRIVER_FS_ROOT/boot/vmlinuz-$kernel" ] || continue
        kernel_headers=no
        [ -e "$modules/build" ] && kernel_headers=yes
        installed="$installed${NL}installed=$kernel|$kernel_headers|$(driver_initramfs "$kernel")"
    done
    emit driver-kernel 0 "release=$release${NL}headers=$headers$installed"
    if tool=$(driver_tool dkms); then
        out=$(run_program "$tool" status 2>&1); rc=$?
        emit driver-dkms "$rc" "$(printf '%s\n' "$out" | driver_head 40)"
    else
        emit driver-dkms 127 ""
    fi
    if [ -e "$DRIVER_FS_ROOT/run/reboot-required" ]; then
        pkgs=
        [ -r "$DRIVER_FS_ROOT/run/reboot-required.pkgs" ] && pkgs=$(driver_head 50 < "$DRIVER_FS_ROOT/run/reboot-required.pkgs")
        emit driver-reboot 0 "required=yes${pkgs:+$NL$pkgs}"
    else
        emit driver-reboot 0 "required=no"
    fi
    # The kernel's IOMMU arguments and module blacklists (never the whole command line).
    iommu=
    if [ -r "$DRIVER_FS_ROOT/proc/cmdline" ]; then
        read -r cmdline < "$DRIVER_FS_ROOT/proc/cmdline"
        set -f
        for word in $cmdline; do
            case $word in
                *iommu*=* | modprobe.blacklist=* | module_blacklist=* | rd.driver.blacklist=*) iommu="$iommu${NL}$word" ;;
            esac
        done
        set +f
    fi
    emit driver-cmdline 0 "${iommu#"$NL"}"
    paths=$(driver_pci_gpus)
    emit driver-pci-paths 0 "$paths"
    if [ -n "$paths" ]; then
        if tool=$(driver_tool lspci); then
            out=$(run_program "$tool" -D -vvv -d ::0604 2>&1); rc=$?
            # Each bridge above a GPU, once.
            bridges=$(printf '%s\n' "$paths" | while read -r gpu rest; do printf '%s\n' $rest; done | sort -u)
            emit driver-acs "$rc" "$(printf '%s\n' "$out" | driver_acs $bridges)"
        else
            emit driver-acs 127 ""
        fi
    fi
}
