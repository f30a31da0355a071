# Sourced by the driver states' scripts (sandbox/states/*.sh, POSIX sh): SANDBOX
# STAND-IN packages of NVIDIA's driver, under NVIDIA's package names, built with
# dpkg-deb on the node. Their files are stand-ins too; each package's description
# says so.
#
# standin_deb PACKAGE VERSION TREE OUT: build OUT (a .deb) of the files under TREE.
standin_deb() {
    # The tree is the package's "/": mktemp's 0700 must not reach the node's root.
    chmod 0755 "$3"
    mkdir -p "$3/DEBIAN"
    cat > "$3/DEBIAN/control" <<CONTROL
Package: $1
Version: $2
Architecture: $(dpkg --print-architecture)
Maintainer: gpu-bringup sandbox <sandbox@localhost>
Section: non-free/libs
Priority: optional
Description: SANDBOX STAND-IN for NVIDIA's $1
 Built by a sandbox driver state (sandbox/states/); not NVIDIA's package.
CONTROL
    dpkg-deb --root-owner-group --build "$3" "$4" >/dev/null
}

# fabricmanager_deb VERSION OUT: nvidia-fabricmanager at VERSION (upstream), its
# daemon a stand-in that runs while the loaded module (/proc/driver/nvidia/version)
# is at VERSION and refuses to start otherwise, with nv-fabricmanager's own words.
fabricmanager_deb() {
    tree=$(mktemp -d)
    install -d -m 0755 "$tree/usr/bin" "$tree/lib/systemd/system" "$tree/usr/share/nvidia/nvswitch"
    cat > "$tree/usr/bin/nv-fabricmanager" <<DAEMON
#!/bin/sh
# SANDBOX STAND-IN -- NOT NVIDIA's Fabric Manager (sandbox/files/standin-deb.sh).
mine=$1
DAEMON
    cat >> "$tree/usr/bin/nv-fabricmanager" <<'DAEMON'
loaded=$(awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+(\.[0-9]+)*$/) { print $i; exit } }' \
    /proc/driver/nvidia/version 2>/dev/null)
if [ "$loaded" != "$mine" ]; then
    # NVIDIA/nvtrust#55, NVIDIA/gpu-operator#544 (tests/fixtures/failures/public-fabric-manager-version.log).
    echo "fabric manager NVIDIA GPU driver interface version $mine don't match with driver version ${loaded:-(none)}. Please update with matching NVIDIA driver package." >&2
    exit 1
fi
echo "SANDBOX STAND-IN: Fabric Manager $mine running for driver $loaded"
exec sleep infinity
DAEMON
    chmod 0755 "$tree/usr/bin/nv-fabricmanager"
    printf '# SANDBOX STAND-IN: nothing reads this file.\n' > "$tree/usr/share/nvidia/nvswitch/fabricmanager.cfg"
    cat > "$tree/lib/systemd/system/nvidia-fabricmanager.service" <<'UNIT'
# SANDBOX STAND-IN for NVIDIA's unit (sandbox/files/standin-deb.sh).
[Unit]
Description=NVIDIA fabric manager service

[Service]
Type=simple
ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg

[Install]
WantedBy=multi-user.target
UNIT
    chmod 0644 "$tree/usr/share/nvidia/nvswitch/fabricmanager.cfg" "$tree/lib/systemd/system/nvidia-fabricmanager.service"
    standin_deb nvidia-fabricmanager "$1-1" "$tree" "$2"
    rm -rf "$tree"
}

# installed_held DEB...: install the packages and hold them, as NVIDIA's guide says
# for the driver's packages (DRIVER_NOT_HELD otherwise).
installed_held() {
    for deb in "$@"; do
        dpkg -i "$deb" >/dev/null
        echo "$(dpkg-deb -f "$deb" Package) hold" | dpkg --set-selections
    done
}
