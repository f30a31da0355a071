"""What a cold first run downloads, predicted from this machine's caches (nothing is fetched):
per platform (sandbox.platforms), the wheels of the locks its node needs from the wheel
mirror and NVIDIA's wheels its apt directory is made from; and, for comparison, what the
servers fetched when they built every platform up front.

    .venv/bin/python bench/first_run_bytes.py [--state incident]   # the demo node's states

A mirror wheel is counted when the cache holds a file of the pin's name and version whose
tags the lock's CPython and CPU accept (the file pip would download); NVIDIA's wheels by
their sha256 (sandbox.aptrepo.wheels.cached). Pins the cache lacks are listed: the figure
is then a floor. Each file is counted once, however many locks name it.
"""

import argparse
import re
import sys
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox import platforms, pypimirror  # noqa: E402
from sandbox.aptrepo import wheels as nvidia_wheels  # noqa: E402

PLATFORMS = ("debian12-x86_64", "debian13-x86_64", "debian12-aarch64")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def cached_wheels():
    """(normalised name, version) -> [(file, tags)] of the mirror's cache."""
    found = {}
    for path in pypimirror.CACHE.glob("*.whl"):
        name, version, _, tags = parse_wheel_filename(path.name)
        found.setdefault((str(name), str(version)), []).append((path, tags))
    return found


def lock_files(lock, cache):
    """The cached files one lock's pins take for its CPython and CPU, and the pins missing."""
    python, abi, arch = pypimirror.lock_target(lock)
    accepted_platforms = set(pypimirror.platform_tags(python, arch))
    files, missing = set(), []
    for line in Path(lock).read_text().splitlines():
        pin = PIN.match(line)
        if not pin:
            continue
        key = (str(canonicalize_name(pin[1])), pin[2])
        fits = [path for path, tags in cache.get(key, []) if any(
            tag.platform in accepted_platforms and tag.abi in (abi, "abi3", "none")
            and (tag.interpreter in (abi, "py3") or tag.interpreter.startswith("py3") or tag.abi == "abi3")
            for tag in tags)]
        if fits:
            files.add(fits[0])
        else:
            missing.append(f"{lock.name}: {key[0]}=={key[1]}")
    return files, missing


def nvidia_files(machine):
    """NVIDIA's cached wheels of *machine*'s apt lock, and the wheels missing."""
    files, missing = set(), []
    for wheel in nvidia_wheels.locked_wheels(nvidia_wheels.read_lock(nvidia_wheels.LOCKS[machine])):
        path = nvidia_wheels.cached(wheel)
        if path:
            files.add(path)
        else:
            missing.append(f"{machine}: {wheel.name}=={wheel.version}")
    return files, missing


def size(files):
    """GB on disk of *files*."""
    return sum(path.stat().st_size for path in files) / 1e9


def report(label, locks, machines, cache):
    mirror, apt, missing = set(), set(), []
    for lock in locks:
        files, gaps = lock_files(lock, cache)
        mirror |= files
        missing += gaps
    for machine in machines:
        files, gaps = nvidia_files(machine)
        apt |= files
        missing += gaps
    print(f"{label:<34} mirror {size(mirror):6.2f} GB ({len(mirror)} wheels)  apt {size(apt):5.2f} GB "
          f"({len(apt)} wheels)  total {size(mirror) + size(apt):6.2f} GB"
          + (f"  MISSING {len(missing)}: {', '.join(missing[:3])}" if missing else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", default="incident", help="the demo node's field states (default: incident)")
    args = parser.parse_args()
    cache = cached_wheels()
    states = [name for name in args.state.split(",") if name]
    report("before: every platform up front", pypimirror.lock_files(), nvidia_wheels.LOCKS, cache)
    for text in PLATFORMS:
        os_name, machine = platforms.parse(text)
        for label, node_states in ((f"{text} --state {args.state}", states), (text, [])):
            if node_states and machine != "x86_64":
                continue
            needed = platforms.needs(os_name, machine, node_states)
            report(label, needed.locks, [machine], cache)


if __name__ == "__main__":
    main()
