"""Command line of the sandbox: ``python3 -m sandbox {up,down,status,image,destroy}``.

Run from the repository root as root (nodes need mount and PID namespaces).
Exit status: 0 success, 1 sandbox error, 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import yaml

from sandbox import gpu_standin, image, node


def _parser() -> argparse.ArgumentParser:
    """Build the argparse tree."""
    parser = argparse.ArgumentParser(
        prog="python3 -m sandbox",
        description="Throwaway Debian 12 'GPU nodes' reachable over real SSH on loopback.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)

    p_up = sub.add_parser("up", help="start (or restart from clean) a node")
    p_up.add_argument("name", help="node name, e.g. gpu1")
    p_up.add_argument("--addr", required=True, help="loopback address, e.g. 127.0.0.11")
    p_up.add_argument("--gpu", required=True, metavar="PROFILE",
                      help=f"GPU profile: {', '.join(gpu_standin.profiles())}")
    p_up.add_argument("--toolkit", default="none", choices=gpu_standin.TOOLKITS,
                      help="pre-existing CUDA toolkit state (default: none)")
    p_up.add_argument("--port", type=int, default=None,
                      help="SSH port (default: 22, or the first free of 2222-2299)")

    p_down = sub.add_parser("down", help="stop nodes and delete them")
    p_down.add_argument("names", nargs="*", metavar="NAME")
    p_down.add_argument("--all", action="store_true", help="every node")

    sub.add_parser("status", help="list nodes")
    sub.add_parser("image", help="build the base image if needed and print its path")
    sub.add_parser("destroy", help="down --all, then delete the keys and the image cache")
    return parser


def _cmd_up(args) -> int:
    """`up`: start a node and print its registry entry."""
    started = time.monotonic()
    entry = node.up(args.name, args.addr, args.gpu, args.toolkit, args.port)
    print(yaml.safe_dump({args.name: entry}, sort_keys=False), end="")
    print(f"sandbox: {args.name} up in {time.monotonic() - started:.1f} s "
          f"(registry {node.registry_path()})", file=sys.stderr)
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


def _cmd_status(_args) -> int:
    """`status`: one line per node."""
    rows = node.status()
    if not rows:
        print("no sandbox nodes")
        return 0
    print(f"{'NAME':<12} {'STATE':<9} {'ADDRESS':<20} {'GPU':<20} {'TOOLKIT':<9} PID")
    for row in rows:
        entry = row["entry"] or {}
        where = f"{entry.get('ssh_hostname', '?')}:{entry.get('ssh_port', '?')}"
        print(f"{row['name']:<12} {row['state']:<9} {where:<20} "
              f"{entry.get('gpu_profile', '?'):<20} {entry.get('toolkit', '?'):<9} {row['pid'] or '-'}")
    return 0


def _cmd_image(_args) -> int:
    """`image`: build (once) and print the base root."""
    print(image.base_root())
    return 0


def _cmd_destroy(_args) -> int:
    """`destroy`: remove everything the sandbox made."""
    node.destroy()
    print("sandbox: all nodes down, keys and image cache deleted")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    if os.geteuid() != 0 and args.cmd != "status":
        print("sandbox: must run as root (mount and PID namespaces, chroot)", file=sys.stderr)
        return 1
    handler = {"up": _cmd_up, "down": _cmd_down, "status": _cmd_status,
               "image": _cmd_image, "destroy": _cmd_destroy}[args.cmd]
    try:
        return handler(args)
    except (node.SandboxError, ValueError) as exc:
        print(f"sandbox: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
