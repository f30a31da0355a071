"""The plan's toolkit: its packages are installed at the lock's versions and apt would
not move them, its nvcc reports the plan's version and targets every GPU."""

import shlex

from bringup.versions import same_major_minor
from facts.probe_output import parse_nvcc_release
from tests.node.remote import fail


def test_nvcc_reports_plan_version(host, expected):
    nvcc = f"{expected.home}/bin/nvcc"
    result = host.run(f"{shlex.quote(nvcc)} --version")
    release = parse_nvcc_release(result.stdout) if result.rc == 0 else None
    if not same_major_minor(release, expected.version):
        got = f"release {release}" if release else f"exit {result.rc}: {(result.stderr or result.stdout).strip()[-200:]}"
        fail(expected, f"{nvcc} --version", f"release {expected.version}", got)


def test_nvcc_lists_every_gpu_arch(host, expected):
    nvcc = f"{expected.home}/bin/nvcc"
    wanted = [f"compute_{sm.major}{sm.minor}" for sm in expected.sms]
    if not wanted:
        fail(expected, "GPU SMs to target", "at least one (nvidia-smi GPUs or target_sms)", "none")
    result = host.run(f"{shlex.quote(nvcc)} --list-gpu-arch")
    listed = set(result.stdout.split()) if result.rc == 0 else set()
    missing = [arch for arch in wanted if arch not in listed]
    if missing:
        got = (f"missing {' '.join(missing)} (lists {' '.join(sorted(listed))})" if result.rc == 0
               else f"exit {result.rc}: {(result.stderr or result.stdout).strip()[-200:]}")
        fail(expected, f"{nvcc} --list-gpu-arch", " ".join(wanted), got)


def test_toolkit_packages_at_lock(host, expected):
    """Every package of the toolkit's plan is installed, at the lock's version where the
    plan has a lock, and apt's candidate is that version: an ``apt-get upgrade`` keeps it."""
    wanted = dict(pin.partition("=")[::2] for pin in expected.plan.toolkit.pins)
    script = ("for package in " + " ".join(shlex.quote(name) for name in wanted) + "; do "
              "printf '%s|%s|%s\\n' \"$package\" "
              "\"$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' \"$package\" 2>/dev/null)\" "
              "\"$(apt-cache policy \"$package\" 2>/dev/null | sed -n 's/^ *Candidate: //p')\"; done")
    result = host.run(script)
    found = {}
    for line in result.stdout.splitlines():
        name, status, candidate = line.split("|")
        found[name] = (status[3:] if status.startswith("ii ") else None, candidate)
    wrong = []
    for name, version in wanted.items():
        installed, candidate = found.get(name, (None, ""))
        if installed is None:
            wrong.append(f"{name} not installed")
        elif version and installed != version:
            wrong.append(f"{name} {installed}")
        elif version and candidate != version:
            wrong.append(f"{name} candidate {candidate or 'none'}")
    if wrong:
        locked = f"the versions of {expected.plan.toolkit.lock}" if expected.plan.toolkit.lock else "installed"
        fail(expected, "toolkit packages (dpkg-query, apt-cache policy)", locked, "; ".join(wrong))
