# Sourced by the ubuntu-drivers-dkms states' scripts (sandbox/states/*.sh, POSIX sh, after
# standin-deb.sh): Canonical's 580-server series with the open kernel module built by DKMS,
# as `ubuntu-drivers install --gpgpu` leaves it on a kernel flavour without Canonical's
# prebuilt modules (bringup/canonical_driver.py cites the names). Every package is a
# SANDBOX STAND-IN built here with dpkg-deb under Canonical's name and version
# (<upstream>-0ubuntu0.<release>.1), with the dependencies apt resolves by; their files are
# stand-ins too:
#
# - nvidia-dkms-580-server-open: a DKMS source tree at /usr/src/nvidia-<upstream> that
#   Ubuntu's real dkms (from Ubuntu's archive) builds and installs for the running kernel as
#   the sandbox's NVIDIA stand-ins do (sandbox/aptrepo/driver/: an ELF nvidia.ko holding only
#   a .modinfo section, version and licence "Dual MIT/GPL"), from its postinst; its prerm
#   removes it. node-init.sh loads the installed module at boot, so a node made from this
#   layer boots with Canonical's module at <upstream> (the profile's preinstalled one is
#   not loaded);
# - libnvidia-compute-580-server: an empty libnvidia-ml.so.<upstream> (the probe reads the
#   name; the node's preinstalled libnvidia-ml is then not written, sandbox/gpu_standin.py);
# - nvidia-compute-utils-580-server: the nvidia-persistenced daemon stand-in and its unit
#   (runs while a module is loaded), not enabled;
# - nvidia-utils-580-server, nvidia-kernel-common-580-server, nvidia-kernel-source-580-server-
#   open: empty (the node's nvidia-smi stays the preinstalled stand-in's);
# - nvidia-driver-580-server-open: the metapackage, each of them at exactly its version;
# - linux-headers-<running release>: what dkms looks for (/lib/modules/<release>/build with
#   an include/), as the sandbox repository's stand-in of the same name and version has it
#   (nodes run the host's kernel, which no archive has headers for).
#
# canonical_dkms UPSTREAM: build and install them (not held: ubuntu-drivers holds nothing).

canonical_deb() {
    # canonical_deb PACKAGE VERSION TREE OUT DEPENDS [PROVIDES]: standin_deb with relations.
    standin_deb "$1" "$2" "$3" "$4"
    dir=$(mktemp -d)
    dpkg-deb -R "$4" "$dir"
    sed -i "s/^Description: SANDBOX STAND-IN for NVIDIA's /Description: SANDBOX STAND-IN for Canonical's /" \
        "$dir/DEBIAN/control"
    sed -i "s/^ Built by a sandbox driver state (sandbox\/states\/); not NVIDIA's package./ Built by a sandbox driver \
state (sandbox\/states\/, sandbox\/files\/canonical-dkms.sh); not Canonical's package./" "$dir/DEBIAN/control"
    [ -z "$5" ] || sed -i "/^Architecture:/a Depends: $5" "$dir/DEBIAN/control"
    [ -z "${6:-}" ] || sed -i "/^Architecture:/a Provides: $6" "$dir/DEBIAN/control"
    dpkg-deb --root-owner-group --build "$dir" "$4" >/dev/null
    rm -rf "$dir"
}

canonical_dkms() {
    upstream=$1
    . /etc/os-release
    version="$upstream-0ubuntu0.$VERSION_ID.1"
    release=$(uname -r)
    case $(dpkg --print-architecture) in
        arm64) lib=/usr/lib/aarch64-linux-gnu ;;
        *) lib=/usr/lib/x86_64-linux-gnu ;;
    esac
    # Ubuntu's dkms, as nvidia-dkms-580-server-open depends on it (its compiler with it).
    apt-get update -qq
    apt-get install -y --no-install-recommends dkms >/dev/null
    apt-get clean

    # The running kernel's headers stand-in (dkms's _check_kernel_dir: build/include).
    tree=$(mktemp -d)
    install -d -m 0755 "$tree/usr/src/linux-headers-$release/include" "$tree/lib/modules/$release"
    echo "SANDBOX STAND-IN: no kernel headers here (Linux $release)." > "$tree/usr/src/linux-headers-$release/README"
    echo "SANDBOX STAND-IN: no header here." > "$tree/usr/src/linux-headers-$release/include/README"
    ln -s "/usr/src/linux-headers-$release" "$tree/lib/modules/$release/build"
    standin_deb "linux-headers-$release" "$release-1" "$tree" headers.deb
    dir=$(mktemp -d)
    dpkg-deb -R headers.deb "$dir"
    sed -i "s/^Description: .*/Description: SANDBOX STAND-IN: header files of Linux $release/; s/^Section: .*/Section: kernel/" \
        "$dir/DEBIAN/control"
    dpkg-deb --root-owner-group --build "$dir" headers.deb >/dev/null
    rm -rf "$dir"
    dpkg -i headers.deb >/dev/null

    # The DKMS module package: its source tree, built and installed by its postinst.
    tree=$(mktemp -d)
    src="$tree/usr/src/nvidia-$upstream"
    install -d -m 0755 "$src" "$tree/DEBIAN"
    cat > "$src/dkms.conf" <<CONF
# SANDBOX STAND-IN for Canonical's dkms.conf (sandbox/files/canonical-dkms.sh): real dkms
# builds and installs it for the running kernel.
PACKAGE_NAME="nvidia"
PACKAGE_VERSION="$upstream"
BUILT_MODULE_NAME[0]="nvidia"
DEST_MODULE_LOCATION[0]="/updates/dkms"
MAKE[0]="sh ./dkms-build.sh \${kernelver}"
CLEAN="rm -f nvidia.ko nvidia-modinfo.c"
AUTOINSTALL="yes"
CONF
    cat > "$src/dkms-build.sh" <<'BUILD'
#!/bin/sh
# SANDBOX STAND-IN for the module's build (dkms.conf's MAKE): nvidia.ko, a relocatable ELF
# holding only a .modinfo section (version, licence), which `modinfo` and the node's boot
# read. Nothing can load it: the sandbox's kernel is the host's.
set -eu
cat > nvidia-modinfo.c <<MODINFO
__attribute__((section(".modinfo"), used, aligned(1)))
static const char modinfo[] =
    "version=@UPSTREAM@\0"
    "license=Dual MIT/GPL\0"
    "description=SANDBOX STAND-IN: Canonical's NVIDIA open kernel module, not Canonical's\0"
    "author=gpu-bringup sandbox\0"
    "name=nvidia\0"
    "vermagic=$1 SMP mod_unload \0";
MODINFO
${CC:-cc} -c -o nvidia.ko nvidia-modinfo.c
BUILD
    sed -i "s/@UPSTREAM@/$upstream/" "$src/dkms-build.sh"
    chmod 0755 "$src/dkms-build.sh"
    cat > "$tree/DEBIAN/postinst" <<POSTINST
#!/bin/sh
# SANDBOX STAND-IN (sandbox/files/canonical-dkms.sh): builds and installs the module for the
# running kernel with dkms, as Canonical's DKMS package does.
set -e
[ "\$1" = configure ] || exit 0
kernel=\$(uname -r)
dkms status -m nvidia -v $upstream | grep -q . || dkms add -m nvidia -v $upstream
if [ ! -e "/lib/modules/\$kernel/build" ]; then
    echo "nvidia $upstream: module build for kernel \$kernel skipped: its headers are not installed"
    exit 0
fi
dkms build -m nvidia -v $upstream -k "\$kernel"
dkms install -m nvidia -v $upstream -k "\$kernel" --force
POSTINST
    cat > "$tree/DEBIAN/prerm" <<PRERM
#!/bin/sh
# SANDBOX STAND-IN (sandbox/files/canonical-dkms.sh): the module goes with the package.
set -e
[ "\$1" = remove ] || [ "\$1" = purge ] || exit 0
dkms remove -m nvidia -v $upstream --all || true
PRERM
    chmod 0755 "$tree/DEBIAN/postinst" "$tree/DEBIAN/prerm"
    canonical_deb nvidia-dkms-580-server-open "$version" "$tree" dkms.deb \
        "dkms, nvidia-kernel-common-580-server (= $version), nvidia-kernel-source-580-server-open (= $version)" \
        nvidia-dkms-kernel

    # The user space: NVML's name, the persistence daemon and its unit.
    tree=$(mktemp -d)
    install -d -m 0755 "$tree$lib"
    install -m 0644 /dev/null "$tree$lib/libnvidia-ml.so.$upstream"
    canonical_deb libnvidia-compute-580-server "$version" "$tree" compute.deb \
        "nvidia-kernel-common-580-server (= $version)"
    tree=$(mktemp -d)
    install -d -m 0755 "$tree/usr/bin" "$tree/usr/lib/systemd/system"
    cat > "$tree/usr/bin/nvidia-persistenced" <<'DAEMON'
#!/bin/sh
# SANDBOX STAND-IN -- NOT nvidia-persistenced (sandbox/files/canonical-dkms.sh): runs while a
# module is loaded, refuses with the daemon's own words otherwise.
if [ ! -r /proc/driver/nvidia/version ]; then
    echo "nvidia-persistenced failed to initialize. Check syslog for more details." >&2
    exit 1
fi
echo "SANDBOX STAND-IN: nvidia-persistenced running"
exec sleep infinity
DAEMON
    chmod 0755 "$tree/usr/bin/nvidia-persistenced"
    cat > "$tree/usr/lib/systemd/system/nvidia-persistenced.service" <<'UNIT'
# SANDBOX STAND-IN for the unit of Canonical's nvidia-compute-utils (sandbox/files/canonical-dkms.sh).
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=simple
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose

[Install]
WantedBy=multi-user.target
UNIT
    canonical_deb nvidia-compute-utils-580-server "$version" "$tree" compute-utils.deb \
        "libnvidia-compute-580-server (= $version)"
    canonical_deb nvidia-utils-580-server "$version" "$(mktemp -d)" utils.deb \
        "libnvidia-compute-580-server (= $version)"
    canonical_deb nvidia-kernel-common-580-server "$version" "$(mktemp -d)" common.deb ""
    canonical_deb nvidia-kernel-source-580-server-open "$version" "$(mktemp -d)" source.deb ""
    canonical_deb nvidia-driver-580-server-open "$version" "$(mktemp -d)" driver.deb \
        "libnvidia-compute-580-server (= $version), nvidia-utils-580-server (= $version), \
nvidia-compute-utils-580-server (= $version), nvidia-dkms-580-server-open (= $version), \
nvidia-kernel-common-580-server (= $version)"
    # As apt would: dependencies first, the module built by nvidia-dkms's postinst.
    dpkg -i common.deb source.deb compute.deb utils.deb compute-utils.deb >/dev/null
    dpkg -i dkms.deb
    dpkg -i driver.deb >/dev/null
    rm -f ./*.deb
    module=/lib/modules/$release/updates/dkms/nvidia.ko
    [ "$(modinfo -F version "$module")" = "$upstream" ] || {
        echo "ubuntu-drivers-dkms: dkms did not install nvidia $upstream at $module" >&2
        exit 1
    }
}
