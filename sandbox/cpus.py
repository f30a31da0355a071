"""Foreign CPUs: running their programs (QEMU's binfmt_misc handler) and building for them.

An arm64 sandbox node (``up --arch arm64``) stands in for a GB10 or Grace server on
this x86_64 machine: its programs are real arm64 Debian binaries, run by Debian's
``qemu-user-static`` through a binfmt_misc handler. The handler line is the package's
own (``/usr/lib/binfmt.d/qemu-aarch64.conf``, flags ``OPF``): ``F`` makes the kernel
open the interpreter when the handler is registered, so it runs inside a node's root,
which has no QEMU of its own. Nothing here is a stand-in: the node's apt, dpkg, nvcc and
systemd are the arm64 builds, only slower.

The handler is machine-wide (the kernel's binfmt_misc of the initial user namespace,
which the nodes share): ``ensure(machine)`` registers it when it is missing, the way
``systemd-binfmt`` would at boot, and says so; it never changes a handler that is there.
It stays registered, as it would after the next boot with the package installed:
``python3 -m sandbox binfmt --remove`` takes it away, when no arm64 node runs. (Tests
never remove it: suites on two workers share it, and one that removed it on leaving made
the other's next exec fail with "Exec format error".)

The one piece of foreign code the sandbox compiles itself, the empty libcuda stub (a
driver stand-in), is built by Debian's cross compiler (``gcc(machine)``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

BINFMT = Path("/proc/sys/fs/binfmt_misc")
# uname -m -> Debian's architecture name (dpkg --print-architecture, debootstrap --arch).
DPKG_ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}
# uname -m of a foreign CPU -> QEMU's binfmt_misc handler name.
HANDLERS = {"aarch64": "qemu-aarch64"}
CONF_DIR = Path("/usr/lib/binfmt.d")
PACKAGE = "qemu-user-static"
# uname -m -> GNU triplet, the prefix of Debian's cross compilers (gcc-aarch64-linux-gnu).
TRIPLETS = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}


class BinfmtError(RuntimeError):
    """A foreign CPU's programs cannot run here; the message says what to install or allow."""


def host_machine() -> str:
    """This machine's CPU as ``uname -m`` prints it."""
    return os.uname().machine


def dpkg_arch(machine: str) -> str:
    """Debian's architecture name of *machine*.

    >>> dpkg_arch("aarch64"), dpkg_arch("x86_64")
    ('arm64', 'amd64')
    """
    if machine not in DPKG_ARCHES:
        raise ValueError(f"unknown CPU {machine!r}; known: {', '.join(DPKG_ARCHES)}")
    return DPKG_ARCHES[machine]


def machine_of(arch: str) -> str:
    """The CPU (``uname -m``) of Debian's architecture *arch*.

    >>> machine_of("arm64")
    'aarch64'
    """
    return next(machine for machine, dpkg in DPKG_ARCHES.items() if dpkg == arch)


def handler(machine: str) -> Path:
    """The binfmt_misc entry of QEMU's handler for *machine* (present when registered)."""
    return BINFMT / HANDLERS[machine]


def gcc(machine: str) -> str:
    """The C compiler that builds *machine*'s code here: ``gcc`` for this machine's CPU,
    else Debian's cross compiler, which must be installed.

    >>> gcc(host_machine())
    'gcc'
    """
    if machine == host_machine():
        return "gcc"
    if machine not in TRIPLETS:
        raise BinfmtError(f"no cross compiler known for {machine}; known: {', '.join(TRIPLETS)}")
    compiler = f"{TRIPLETS[machine]}-gcc"
    if shutil.which(compiler) is None:
        raise BinfmtError(f"{compiler} is missing: install Debian's gcc-{TRIPLETS[machine]} "
                          f"(apt-get install gcc-{TRIPLETS[machine]}; make sandbox-deps does)")
    return compiler


def handler_flags(text: str) -> tuple[bool, str]:
    """(enabled, flags) of a handler's status file in binfmt_misc.

    >>> handler_flags("enabled\\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\\nflags: POCF\\n")
    (True, 'POCF')
    """
    lines = text.splitlines()
    flags = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("flags:")), "")
    return bool(lines) and lines[0] == "enabled", flags


def _mounted() -> bool:
    return (BINFMT / "register").exists()


def ensure(machine: str, log=None) -> None:
    """Make *machine*'s programs run here: nothing for this machine's own CPU; for a
    foreign one, QEMU's handler, registered when missing. BinfmtError says why not."""
    if machine == host_machine():
        return
    if machine not in HANDLERS:
        raise BinfmtError(f"no way to run {machine} programs on this {host_machine()} machine; "
                          f"known: {', '.join(HANDLERS)}")
    name = HANDLERS[machine]
    conf = CONF_DIR / f"{name}.conf"
    if not conf.is_file():
        raise BinfmtError(f"{conf} is missing: install Debian's {PACKAGE} (apt-get install {PACKAGE}; "
                          "make sandbox-deps does) to run arm64 nodes")
    if not _mounted():
        proc = subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BinfmtError(f"cannot mount binfmt_misc on {BINFMT}: {proc.stderr.strip()}")
    entry = handler(machine)
    if entry.exists():
        enabled, flags = handler_flags(entry.read_text())
        if not enabled or "F" not in flags:
            raise BinfmtError(f"{entry} is {'disabled' if not enabled else 'registered without flag F'} "
                              f"(flags {flags!r}): a node's root has no QEMU, the kernel must hold it open; "
                              f"re-register it: echo -1 > {entry}, then run the command again")
        return
    line = next(raw for raw in conf.read_text().splitlines() if raw.startswith(":"))
    try:
        (BINFMT / "register").write_text(line + "\n")
    except OSError as error:
        raise BinfmtError(f"registering {name} in {BINFMT} failed: {error}") from None
    print(f"sandbox: registered the {name} binfmt_misc handler ({conf}): this machine now runs "
          f"{machine} programs through QEMU; `python3 -m sandbox binfmt --remove` takes it away",
          file=log or sys.stderr)


def remove(machine: str = "aarch64") -> bool:
    """Unregister QEMU's handler for *machine*; True when one was there."""
    entry = handler(machine)
    if not entry.exists():
        return False
    entry.write_text("-1\n")
    return True
