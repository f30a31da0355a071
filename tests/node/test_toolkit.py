"""The plan's toolkit: its nvcc reports the plan's version and targets every GPU."""

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
