#!/bin/sh
# Build the operator's CPython (sandbox/operator_python.py), run as root chrooted into a
# throwaway overlay of the distribution's base image (files/layer-init.sh): Debian's
# python3.11 source package (its .dsc, orig tarball and debian tarball beside this script,
# fetched and checked against Debian's signed Sources by the host's apt), unpacked with
# Debian's patch series applied by dpkg-source (which checks the tarballs against the
# .dsc's hashes), built with this distribution's own build dependencies, installed under
# PREFIX. Only PREFIX is kept (as a tarball); the build dependencies stay in the overlay.
#
# Environment: PREFIX (/opt/cpython-3.11), DSC (the .dsc's file name).
set -eu
apt-get update
# CPython's optional modules need these headers (ssl, sqlite3, ctypes, lzma, bz2, zlib,
# readline, uuid, curses, dbm, pyexpat); dpkg-dev for dpkg-source.
apt-get install -y --no-install-recommends build-essential pkg-config dpkg-dev xz-utils \
    libssl-dev libsqlite3-dev libffi-dev liblzma-dev libbz2-dev zlib1g-dev libreadline-dev \
    uuid-dev libncursesw5-dev libgdbm-dev libgdbm-compat-dev libexpat1-dev
dpkg-source -x "$DSC" src
cd src
# No PGO or LTO (an operator's quick build), no ensurepip into PREFIX itself (Debian's
# patch disables it outside a venv; venvs still get pip from the bundled wheels).
# The modules Debian builds into the interpreter, as debian/rules's __post_configure
# writes them to Modules/Setup.local (Debian's security patches rely on it: pyexpat's
# includes a core header), with the system's expat (debian/rules: --with-system-expat).
grep -E "^#($(awk -v ORS='|' '$2 ~ /^extension$/ {print $1}' debian/PVER-minimal.README.Debian.in)XX)" \
    Modules/Setup | sed -e 's/^#//' -e 's/-Wl,-Bdynamic//;s/-Wl,-Bstatic//' >> Modules/Setup.local
./configure --prefix="$PREFIX" --with-ensurepip=no --without-static-libpython --with-system-expat \
    >configure.log 2>&1 \
    || { tail -40 configure.log; exit 1; }
make -j"$(nproc)" >make.log 2>&1 || { tail -60 make.log; exit 1; }
make install >install.log 2>&1 || { tail -40 install.log; exit 1; }
# What the venv and SGLang's stack need from the standard library, built or not at all
# (make's own list of modules it could not build first, for the log).
grep -A4 -E "necessary bits|Failed to build|could not be imported" make.log || true
"$PREFIX/bin/python3.11" -I -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, readline, uuid, _uuid, curses, venv, ensurepip
import pyexpat, _elementtree, _decimal, _hashlib, _dbm, _gdbm
print("built", __import__("sys").version, ssl.OPENSSL_VERSION)'
