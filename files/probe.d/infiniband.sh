# The infiniband section: writes infiniband, nvidia-peermem; facts/sections/infiniband.py parses
# them (the document's key: `infiniband`; docs/facts.md).
# The RDMA devices a serving group's NCCL may use (InfiniBand HCAs and RoCE NICs alike: both are
# under /sys/class/infiniband) and whether GPUDirect RDMA can work (nvidia_peermem loaded). The
# files and their formats are the kernel's stable sysfs ABI (Documentation/ABI/stable/
# sysfs-class-infiniband; the text each file holds: drivers/infiniband/core/sysfs.c state_show
# "4: ACTIVE", phys_state_show "5: LinkUp", rate_show "400 Gb/sec (4X NDR)", link_layer_show
# "InfiniBand" or "Ethernet"). Read by the shell alone (no process per file), under the driver
# layer's root (DRIVER_FS_ROOT: a test's scratch root); no /sys/class/infiniband is no device,
# not an error. One line per fact: KIND|DEVICE|PORT|VALUE, the value last (it holds spaces and
# colons; a device's name is the kernel's, never one with a '|').
# The most devices and ports read: a node has a few HCAs of one or two ports (a DGX H100 eight
# ConnectX-7 and two BlueField-3); a bound keeps the section small whatever sysfs holds.
IB_DEVICES_MAX=64
IB_PORTS_MAX=8

probe_infiniband() {
    ib_class=$DRIVER_FS_ROOT/sys/class/infiniband
    ib_out=
    ib_devices=0
    if [ -d "$ib_class" ]; then
        for ib_dev in "$ib_class"/*; do
            [ -d "$ib_dev" ] || continue
            ib_devices=$((ib_devices + 1))
            [ "$ib_devices" -le "$IB_DEVICES_MAX" ] || break
            ib_name=${ib_dev##*/}
            ib_out="$ib_out${NL}device|$ib_name||"
            ib_ports=0
            for ib_port in "$ib_dev"/ports/*; do
                [ -d "$ib_port" ] || continue
                ib_ports=$((ib_ports + 1))
                [ "$ib_ports" -le "$IB_PORTS_MAX" ] || break
                for ib_file in state phys_state rate link_layer; do
                    ib_value=
                    [ -r "$ib_port/$ib_file" ] || continue
                    # A port whose query fails (a driver's error) reads as nothing: no line.
                    { read -r ib_value < "$ib_port/$ib_file"; } 2>/dev/null || [ -n "$ib_value" ] || continue
                    ib_out="$ib_out$NL$ib_file|$ib_name|${ib_port##*/}|$ib_value"
                done
            done
            # The net devices of the same PCI function (a RoCE NIC's Ethernet name, an HCA's IPoIB
            # ib0): what NCCL_SOCKET_IFNAME and the routed interface are matched against.
            for ib_net in "$ib_dev"/device/net/*; do
                [ -e "$ib_net" ] && ib_out="$ib_out${NL}net|$ib_name||${ib_net##*/}"
            done
        done
    fi
    emit infiniband 0 "$(printf '%s\n' "${ib_out#"$NL"}" | printable)"
    # GPUDirect RDMA: NVIDIA's nvidia_peermem module lets the HCA read and write GPU memory
    # directly; without it NCCL's net transport goes through host memory, silently slower. A
    # loaded module has its directory in /sys/module (the kernel's sysfs-module ABI).
    if [ -d "$DRIVER_FS_ROOT/sys/module/nvidia_peermem" ]; then
        emit nvidia-peermem 0 "loaded=yes"
    else
        emit nvidia-peermem 0 "loaded=no"
    fi
}
