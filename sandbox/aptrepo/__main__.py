"""python3 -m sandbox.aptrepo {build,serve,stop,status,wheels,lock}: the sandbox's CUDA apt repository."""

from __future__ import annotations

import argparse
import json
import sys

from sandbox import aptrepo, platforms
from sandbox.aptrepo import lock
from sandbox.aptrepo.wheels import cache_dir, ensure_wheels


def _print(obj) -> None:
    print(json.dumps(obj, indent=2))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m sandbox.aptrepo", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{build,serve,stop,status,wheels,lock}")
    b = sub.add_parser("build", help="build or refresh the repository (a no-op when nothing changed)")
    b.add_argument("--force", action="store_true", help="rebuild every package")
    b.add_argument("--platform", action="append", default=[], metavar="OS-CPU",
                   help="only this platform's directory (debian12-x86_64, debian12-aarch64 ...), and those "
                        "already built; repeatable (default: every directory)")
    b.add_argument("--url", help="repository URL the cuda-keyring package's source names "
                                 "(default: the one built in, else the default port's)")
    s = sub.add_parser("serve", help="build if needed and serve in the background (no-op if running)")
    s.add_argument("--port", type=int, default=None,
                   help=f"TCP port (default {aptrepo.DEFAULT_PORT}, another free one if taken; 0: any)")
    s.add_argument("--host", default=aptrepo.DEFAULT_HOST, help="address to bind (default 127.0.0.1)")
    s.add_argument("--platform", action="append", default=[], metavar="OS-CPU",
                   help="build this platform's directory first (default: none; what is built is served "
                        "and kept current, and `python -m sandbox up` builds its node's); repeatable")
    sub.add_parser("stop", help="stop the server")
    sub.add_parser("status", help="what is built and served (JSON)")
    sub.add_parser("wheels", help="download the locked wheels into the cache (hash-checked)")
    lk = sub.add_parser("lock", help="make lock CUDA_REPO_URL=sandbox: the toolkit (or driver) locks from this "
                                     "repository (python -m control.locks with its file:// URL and key)")
    lk.add_argument("--kind", choices=("cuda", "driver", "dcgm"), default="cuda", help="which locks (default: cuda)")
    lk.add_argument("--platforms", default="all", help="all (the platforms it serves), or <distro>-<machine>[,...]")
    args = ap.parse_args(argv)
    try:
        dirs = [d for text in getattr(args, "platform", []) for d in platforms.needs(*platforms.parse(text), locks=()).apt_dirs]
    except ValueError as error:
        ap.error(str(error))

    if args.cmd == "build":
        _print(aptrepo.build(url=args.url, force=args.force, dirs=dirs if args.platform else aptrepo.ALL_DIRS))
    elif args.cmd == "serve":
        info, started = aptrepo.serve(port=args.port, host=args.host, dirs=dirs)
        if not started:
            print(f"aptrepo: already serving (pid {info['pid']}) at {info['url']}", file=sys.stderr)
        _print(info)
    elif args.cmd == "stop":
        info = aptrepo.stop()
        print(f"aptrepo: stopped pid {info['pid']}" if info else "aptrepo: no server running",
              file=sys.stderr)
    elif args.cmd == "status":
        _print(aptrepo.status())
    elif args.cmd == "wheels":
        _print({f"{w.name}=={w.version}": str(path) for w, path in ensure_wheels(log=sys.stderr).items()})
        print(f"aptrepo: wheel cache {cache_dir()}", file=sys.stderr)
    elif args.cmd == "lock":
        return lock.lock(args.platforms, kind=args.kind)
    return 0


if __name__ == "__main__":
    sys.exit(main())
