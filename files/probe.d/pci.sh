# ---- The GPUs on PCI (docs/facts.md "pci_gpus"; facts/sections/pci.py parses it) ----
# Every NVIDIA display or 3D controller under /sys/bus/pci/devices (vendor 0x10de, class
# 0x0300xx VGA or 0x0302xx 3D: the two NVIDIA's kernel module binds, open-gpu-kernel-modules
# kernel-open/nvidia/nv-pci-table.c PCI_CLASS_DISPLAY_VGA and PCI_CLASS_DISPLAY_3D; not its
# NVSwitches, 0x0680, nor audio functions), bound to a driver or not: what names the GPUs of a node
# whose nvidia-smi lists none (no driver, or a module that refused them), and the driver
# that holds each (a GPU bound to vfio-pci is handed to a virtual machine, not this host's
# to serve). Read by the shell alone (no process per device: `test -ef` compares the
# device's driver link with each driver's directory), under the driver layer's root; rc 1
# when sysfs cannot be read (a fact: null), an empty body when it holds no NVIDIA GPU.
probe_pci() {
    pci_dir=$DRIVER_FS_ROOT/sys/bus/pci/devices
    if [ ! -d "$pci_dir" ] || [ ! -r "$pci_dir" ] || [ ! -x "$pci_dir" ]; then
        emit pci-gpus 1 ""
        return
    fi
    pci_found=
    for pci_dev in "$pci_dir"/*; do
        [ -r "$pci_dev/vendor" ] && [ -r "$pci_dev/class" ] || continue
        pci_vendor= pci_class= pci_device=
        read -r pci_vendor < "$pci_dev/vendor" || [ -n "$pci_vendor" ] || continue
        [ "$pci_vendor" = 0x10de ] || continue
        read -r pci_class < "$pci_dev/class" || [ -n "$pci_class" ] || continue
        case $pci_class in 0x0300?? | 0x0302??) ;; *) continue ;; esac
        [ -r "$pci_dev/device" ] && { read -r pci_device < "$pci_dev/device" || :; }
        pci_driver=none
        if [ -e "$pci_dev/driver" ]; then
            pci_driver=other
            # nvgrace_gpu_vfio_pci: vfio-pci's variant driver for Grace Hopper's GPUs (the
            # kernel's drivers/vfio/pci/nvgrace-gpu), a VM's GPU as one on vfio-pci is.
            for pci_name in nvidia vfio-pci nouveau nvgrace_gpu_vfio_pci; do
                if [ "$pci_dev/driver" -ef "$DRIVER_FS_ROOT/sys/bus/pci/drivers/$pci_name" ]; then
                    case $pci_name in nvgrace_gpu_vfio_pci) pci_driver=vfio-pci ;; *) pci_driver=$pci_name ;; esac
                    break
                fi
            done
        fi
        pci_found="$pci_found$NL${pci_dev##*/} $pci_vendor ${pci_device:-none} $pci_class $pci_driver"
    done
    emit pci-gpus 0 "${pci_found#"$NL"}"
}
