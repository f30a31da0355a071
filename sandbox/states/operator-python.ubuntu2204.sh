#!/bin/sh
# State operator-python on Ubuntu 22.04: the operator's own CPython 3.11 under
# /opt/cpython-3.11, as a fleet whose image carries one has it (Ubuntu 22.04's archive
# has only 3.11.0~rc1). Built once per machine from Debian's signed python3.11 source
# package by sandbox/operator_python.py (cpython.tar beside this script), installed
# root-owned, writable by root only: what venv_python then names. Not a stand-in.
#
# The libraries its modules link (OpenSSL, SQLite, libffi, liblzma, libbz2, zlib,
# readline, libuuid, ncurses, gdbm, expat) are the base image's, which the build was made on.
set -eu
tar --numeric-owner --no-same-permissions -C / -xf cpython.tar
chown -R root:root /opt/cpython-3.11
chmod -R go-w /opt/cpython-3.11
/opt/cpython-3.11/bin/python3.11 -I -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, readline, uuid, pyexpat, venv, ensurepip; print("operator python", __import__("sys").version.split()[0])'
