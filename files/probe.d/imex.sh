# The imex section: writes imex-unit, imex-packages, imex-nodes, imex-channels;
# facts/sections/imex.py parses them (the document's key: `imex`; docs/facts.md).
# NVIDIA IMEX on a Grace-Blackwell NVL compute tray (GB200, GB300): the nvidia-imex
# unit, its package, how many peers its nodes config lists (never the addresses) and
# the IMEX channel devices (NVIDIA IMEX user's guide, "IMEX Channels": the driver
# registers nvidia-caps-imex-channels in /proc/devices; /dev/nvidia-caps-imex-channels/
# channelN must be created). Read on every node (a few file reads and one systemctl and
# dpkg-query each); the planner decides whether the GPUs need it. The tools and files
# as the driver layer reads them (driver_tool, run_program, DRIVER_FS_ROOT).
probe_imex() {
    # The unit as the driver layer reads Fabric Manager's: systemctl show's states.
    if [ -d "$DRIVER_FS_ROOT/run/systemd/system" ] && tool=$(driver_tool systemctl); then
        out=$(run_program "$tool" show -p Id -p LoadState -p ActiveState -p UnitFileState nvidia-imex.service 2>&1)
        emit imex-unit $? "$out"
    else
        emit imex-unit 127 ""
    fi
    # NVIDIA's repository: nvidia-imex (580 on), nvidia-imex-<branch> before; Ubuntu's
    # archive: nvidia-imex-<branch>.
    if tool=$(driver_tool dpkg-query); then
        emit imex-packages 0 "$(run_program "$tool" -W -f='${db:Status-Abbrev}|${Package}|${Version}\n' \
            'nvidia-imex*' 2>/dev/null)"
    else
        emit imex-packages 127 ""
    fi
    # The nodes config: its count of peer lines (an address a line; comments and blank
    # lines are none). The addresses stay on the node. The file the daemon reads: config.cfg's
    # IMEX_NODE_CONFIG_FILE (an absolute path; the last one set), else NVIDIA's default.
    imex_conf=/etc/nvidia-imex/nodes_config.cfg
    if [ -r "$DRIVER_FS_ROOT/etc/nvidia-imex/config.cfg" ]; then
        while IFS= read -r imex_line || [ -n "$imex_line" ]; do
            case $imex_line in IMEX_NODE_CONFIG_FILE=/*) imex_conf=${imex_line#IMEX_NODE_CONFIG_FILE=} ;; esac
        done < "$DRIVER_FS_ROOT/etc/nvidia-imex/config.cfg"
    fi
    imex_conf="$DRIVER_FS_ROOT$imex_conf"
    if [ -r "$imex_conf" ]; then
        imex_peers=0
        while IFS= read -r imex_line || [ -n "$imex_line" ]; do
            imex_line=${imex_line%%#*}
            case $imex_line in *[![:space:]]*) imex_peers=$((imex_peers + 1)) ;; esac
        done < "$imex_conf"
        emit imex-nodes 0 "peers=$imex_peers"
    elif [ -e "$imex_conf" ]; then
        emit imex-nodes 2 ""
    else
        emit imex-nodes 1 ""
    fi
    # The channels: whether the driver registered the device, and which channelN exist.
    imex_out=registered=no
    if [ -r "$DRIVER_FS_ROOT/proc/devices" ]; then
        while read -r imex_major imex_name; do
            [ "$imex_name" = nvidia-caps-imex-channels ] && imex_out=registered=yes
        done < "$DRIVER_FS_ROOT/proc/devices"
    fi
    for imex_channel in "$DRIVER_FS_ROOT"/dev/nvidia-caps-imex-channels/channel*; do
        [ -e "$imex_channel" ] && imex_out="$imex_out${NL}channel=${imex_channel##*/}"
    done
    emit imex-channels 0 "$imex_out"
}
