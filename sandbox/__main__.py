"""Command line of the sandbox: ``python3 -m sandbox {up,down,reboot,health,status,fetch,image,layers,binfmt,destroy}``.

Run from the repository root as root (nodes need mount and PID namespaces).
Exit status: 0 success, 1 sandbox error, 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import yaml

from sandbox import cpus, field_states, gpu_health_states, gpu_standin, image, layers, network, node, platforms, registration


def _parser() -> argparse.ArgumentParser:
    """Build the argparse tree."""
    parser = argparse.ArgumentParser(
        prog="python3 -m sandbox",
        description="Throwaway Debian 'GPU nodes' reachable over real SSH, on loopback or a bridge.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)

    p_up = sub.add_parser("up", help="start (or restart from clean) a node")
    p_up.add_argument("name", help="node name, e.g. gpu1")
    p_up.add_argument("--addr", required=True,
                      help="loopback address, e.g. 127.0.0.11; with --network bridge one of 198.18.0.2-254")
    p_up.add_argument("--gpu", required=True, metavar="PROFILE",
                      help=f"GPU profile: {', '.join(gpu_standin.profiles())}")
    p_up.add_argument("--toolkit", default="none", choices=gpu_standin.TOOLKITS,
                      help="incident: the stand-in CUDA 12.8 (an nvcc that only reports its version; "
                           "no apt repository needed); the real one is --state cuda-12.8 (default: none)")
    p_up.add_argument("--state", default="", metavar="NAME[,NAME...]",
                      help=f"field states, as cached layers: {', '.join(field_states.STATES)}")
    p_up.add_argument("--os", default=image.DEFAULT_OS, choices=sorted(image.OSES),
                      help=f"distribution of the node (default: {image.DEFAULT_OS})")
    p_up.add_argument("--arch", default=cpus.dpkg_arch(cpus.host_machine()), choices=sorted(cpus.DPKG_ARCHES.values()),
                      help="CPU of the node (default: this machine's); a foreign one runs through QEMU "
                           "(qemu-user-static; its binfmt_misc handler is registered when missing)")
    p_up.add_argument("--port", type=int, default=None,
                      help="SSH port (default: 22, or the first free of 2222-2299; bridged: 22)")
    p_up.add_argument("--network", default=network.LOOPBACK, choices=network.MODES,
                      help="loopback (default): this machine's network, the node on its own 127.x address; "
                           "bridge: a network namespace of its own, eth0 on the bridge gbsbx0 (198.18.0.0/24), "
                           "kept across reboots (sandbox/network.py)")

    p_down = sub.add_parser("down", help="stop nodes and delete them")
    p_down.add_argument("names", nargs="*", metavar="NAME")
    p_down.add_argument("--all", action="store_true", help="every node")

    p_reboot = sub.add_parser("reboot", help="reboot a node as a machine would (its systemd stops the units, the "
                                             "node boots again: same files, address and keys; a module installed "
                                             "meanwhile is loaded) and wait for its sshd")
    p_reboot.add_argument("name", metavar="NAME")

    p_health = sub.add_parser("health", help="STAND-IN control: put a running node's GPUs in a health state (the "
                                             "nvidia-smi stand-in's answers, and the state's Xid lines in its kernel "
                                             "log: the node needs --state kernel-log for those)")
    p_health.add_argument("name", metavar="NAME")
    p_health.add_argument("state", choices=gpu_health_states.HEALTH_STATES + gpu_health_states.DCGM_STATES)

    sub.add_parser("status", help="list nodes")
    p_fetch = sub.add_parser("fetch", help="build and fetch what a platform's nodes need (what `up` does first)")
    p_fetch.add_argument("platform", nargs="+", metavar="OS-CPU", help="e.g. debian12-x86_64, debian13-aarch64")
    p_fetch.add_argument("--state", default="", metavar="NAME[,NAME...]",
                         help="also the venv locks of these field states")
    p_image = sub.add_parser("image", help="build the base image if needed and print its path")
    p_image.add_argument("--os", default=image.DEFAULT_OS, choices=sorted(image.OSES))
    p_image.add_argument("--arch", default=cpus.dpkg_arch(cpus.host_machine()),
                         choices=sorted(cpus.DPKG_ARCHES.values()))
    p_binfmt = sub.add_parser("binfmt", help="QEMU's arm64 binfmt_misc handler (machine-wide): show, or --remove")
    p_binfmt.add_argument("--remove", action="store_true", help="unregister it (running arm64 nodes stop working)")
    p_layers = sub.add_parser("layers", help="list the cached state layers (build time, disk)")
    p_layers.add_argument("--prune", action="store_true",
                          help="first delete the layers this checkout's states no longer make "
                               "(edited script, rebuilt apt repo, new lock) and no node mounts")
    sub.add_parser("destroy", help="down --all, then delete the keys, the images and the layers")
    return parser


def _cmd_up(args) -> int:
    """`up`: start a node and print its registry entry."""
    started = time.monotonic()
    entry = node.up(args.name, args.addr, args.gpu, args.toolkit, args.port,
                    states=field_states.parse(args.state), os_name=args.os, machine=cpus.machine_of(args.arch),
                    network=args.network)
    print(yaml.safe_dump({args.name: entry}, sort_keys=False), end="")
    print(f"sandbox: {args.name} up in {time.monotonic() - started:.1f} s "
          f"(registry {node.registry_path()}; inventory/gpu.py reads it from {registration.registered_file()})",
          file=sys.stderr)
    return 0


def _cmd_fetch(args) -> int:
    """`fetch OS-CPU...`: the apt directories and venv locks of those platforms."""
    states = field_states.parse(args.state)
    for text in args.platform:
        wanted = platforms.ensure(*platforms.parse(text), states)
        print(f"sandbox: {text}: apt {', '.join('/'.join(pair) for pair in wanted.apt_dirs)}; "
              f"{len(wanted.locks)} venv lock(s): {', '.join(lock.name for lock in wanted.locks)}")
    return 0


def _cmd_down(args) -> int:
    """`down NAME...` / `down --all`."""
    if args.all == bool(args.names):
        print("down: give node names, or --all alone", file=sys.stderr)
        return 2
    removed = node.down(None if args.all else args.names)
    for name in args.names:
        if name not in removed:
            print(f"sandbox: {name}: no such node (nothing to do)", file=sys.stderr)
    for name in removed:
        print(f"sandbox: {name} down")
    return 0


def _cmd_reboot(args) -> int:
    """`reboot NAME`: reboot the node, wait until it answers again."""
    started = time.monotonic()
    node.reboot(args.name)
    print(f"sandbox: {args.name} rebooted in {time.monotonic() - started:.1f} s")
    return 0


def _cmd_health(args) -> int:
    """`health NAME STATE`: the node's GPUs in that health state, over the node's own SSH."""
    gpu_health_states.set_state(args.name, args.state)
    print(f"sandbox: {args.name}: GPU health {args.state} (STAND-IN)")
    return 0


def _cmd_status(_args) -> int:
    """`status`: one line per node."""
    rows = node.status()
    if not rows:
        print("no sandbox nodes")
        return 0
    print(f"{'NAME':<12} {'STATUS':<9} {'ADDRESS':<20} {'GPU':<20} {'OS':<9} {'ARCH':<6} {'TOOLKIT':<9} "
          f"{'STATES':<24} PID")
    for row in rows:
        entry = row["entry"] or {}
        where = f"{entry.get('ssh_hostname', '?')}:{entry.get('ssh_port', '?')}"
        states = ",".join(entry.get("states") or []) or "-"
        print(f"{row['name']:<12} {row['state']:<9} {where:<20} {entry.get('gpu_profile', '?'):<20} "
              f"{entry.get('os', image.DEFAULT_OS):<9} {entry.get('arch', 'amd64'):<6} "
              f"{entry.get('toolkit', '?'):<9} {states:<24} "
              f"{row['pid'] or '-'}")
    return 0


def _cmd_image(args) -> int:
    """`image`: build (once) and print the base root."""
    print(image.base_root(os_name=args.os, machine=cpus.machine_of(args.arch)))
    return 0


def _cmd_binfmt(args) -> int:
    """`binfmt [--remove]`: QEMU's arm64 handler, as the kernel holds it."""
    if args.remove:
        print("sandbox: qemu-aarch64 handler " + ("removed" if cpus.remove("aarch64") else "was not registered"))
        return 0
    entry = cpus.handler("aarch64")
    print(entry.read_text().strip() if entry.exists() else "qemu-aarch64: not registered")
    return 0


def _cmd_layers(args) -> int:
    """`layers [--prune]`: one line per cached layer."""
    if args.prune:
        field_states.prune()
    rows = layers.cached()
    if not rows:
        print("no cached layers")
        return 0
    print(f"{'STATE':<16} {'OS':<9} {'BUILD':>8} {'DISK':>9}  KEY")
    for info in rows:
        print(f"{info['state']:<16} {info['os']:<9} {info['build_seconds']:>7.1f}s "
              f"{info['disk_bytes'] / 1e6:>7.0f}MB  {info['key']}")
    return 0


def _cmd_destroy(_args) -> int:
    """`destroy`: remove everything the sandbox made."""
    node.destroy()
    print("sandbox: all nodes down, keys, images and layers deleted")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    if os.geteuid() != 0 and args.cmd != "status" and not (args.cmd == "layers" and not args.prune):
        print("sandbox: must run as root (mount and PID namespaces, chroot)", file=sys.stderr)
        return 1
    handler = {"up": _cmd_up, "down": _cmd_down, "reboot": _cmd_reboot, "health": _cmd_health, "status": _cmd_status,
               "fetch": _cmd_fetch,
               "image": _cmd_image, "layers": _cmd_layers, "binfmt": _cmd_binfmt,
               "destroy": _cmd_destroy}[args.cmd]
    try:
        return handler(args)
    except (node.SandboxError, layers.LayerBuildError, cpus.BinfmtError, network.NetworkError, ValueError) as exc:
        print(f"sandbox: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
