"""The one shell command that runs files/probe.sh on a node: pyinfra-free, so the
facts (facts/node.py) and bench/gpu_proof.py, which runs on a GPU machine without
pyinfra, send the same script.
"""

import base64
import gzip
import shlex
from pathlib import Path

FILES = Path(__file__).resolve().parent.parent / "files"
# The env-file reader, the apt-lock finder and the rule for what root may run
# (root_may_run) first: the probe's sections call them.
PROBE_SOURCES = (FILES / "service-env.sh", FILES / "apt-locks.sh", FILES / "root-may-run.sh", FILES / "probe.sh")
# Run by the venv's python in the probe's venv section (no torch import).
TORCH_INFO = FILES / "torch_info.py"


def probe_command(inputs, sections=()):
    """The one shell command that runs the probe (``sections``, default all) on a node,
    given its ``ProbeInputs`` (bringup/layout.py).

    The script travels compressed and base64-encoded so no quoting of its body can break,
    and runs under ``sh`` so a node without bash still answers.

    ``PROBE_FS_ROOT`` (a test's scratch root for the driver layer and PCI files) is pinned
    empty: whatever the remote session's environment holds, the node's own files are read.

    >>> from bringup.layout import ProbeInputs
    >>> probe_command(ProbeInputs.defaults(), ("gpus",)).split(" | ")[3].split()[:2]
    ['PROBE_FS_ROOT=', 'PROBE_SECTIONS=gpus']
    """
    script = b"TORCH_INFO=" + shlex.quote(TORCH_INFO.read_text()).encode() + b"\n" + \
        b"".join(path.read_bytes() for path in PROBE_SOURCES)
    # gzip'd (gzip is essential on Debian and Ubuntu): a third of the bytes to send to each
    # host, which is what a fleet's validate spends its control-side time on.
    encoded = base64.b64encode(gzip.compress(script, 9, mtime=0)).decode("ascii")
    assignments = " ".join(f"{key}={shlex.quote(str(value))}" for key, value in inputs.environment(sections).items())
    return f"echo {encoded} | base64 -d | gzip -dc | PROBE_FS_ROOT= {assignments} sh"
