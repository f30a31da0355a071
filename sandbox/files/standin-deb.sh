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

# installed_held DEB...: install the packages and hold them, as NVIDIA's guide says
# for the driver's packages (DRIVER_NOT_HELD otherwise).
installed_held() {
    for deb in "$@"; do
        dpkg -i "$deb" >/dev/null
        echo "$(dpkg-deb -f "$deb" Package) hold" | dpkg --set-selections
    done
}
