"""The one shell command that runs the probe on a node: pyinfra-free, so the facts
(facts/node.py) and bench/gpu_proof.py, which runs on a GPU machine without pyinfra, send
the same script.

The probe is assembled here from the section registry (facts/sections/): the shared
shell library files/probe.d/lib.sh, each registered section's fragment
(files/probe.d/<name>.sh) and a runner made from the registry's groups.
"""

import base64
import gzip
import shlex
from pathlib import Path

from bringup.layout import HUB_CACHE_DEFAULT, HUB_CACHE_ORDER, MODEL_ENV_KEYS
from facts.sections import SECTIONS

FILES = Path(__file__).resolve().parent.parent / "files"
PROBE_D = FILES / "probe.d"
# The env-file reader, the apt-lock finder and the rule for what root may run
# (root_may_run) first: the probe's sections call them.
HELPERS = (FILES / "service-env.sh", FILES / "apt-locks.sh", FILES / "root-may-run.sh")
# Run by the venv's python in the probe's venv section (no torch import).
TORCH_INFO = FILES / "torch_info.py"
# The inputs the probe reads that a command may leave out, pinned empty (the script's default)
# unless the inputs give them, so none comes from the remote session's environment (pam_env's
# /etc/environment, sshd's AcceptEnv): PROBE_FS_ROOT and APT_LOCK_FILES are the tests' scratch
# files; an inherited PROBE_ENV_KEYS would have the service section print those env-file
# values (HF_TOKEN's); an inherited PROBE_GPU_DIAG would start a diagnostic no one asked for, an
# inherited PROBE_ROUTE_TO a route look-up no one asked for.
# PROBE_MODEL_ENV_<KEY> counts when set even empty: unset instead.
PINNED = {"PROBE_FS_ROOT": "", "PROBE_SECTIONS": "", "PROBE_ENV_KEYS": "", "PROBE_MODEL": "", "PROBE_VENV_PYTHON": "",
          "PROBE_GPU_DIAG": "", "PROBE_ROUTE_TO": "", "APT_LOCK_FILES": ""}


def runner(sections=SECTIONS):
    """The probe's last lines: every section when ``PROBE_SECTIONS`` is unset, in its
    groups side by side (most of the probe's time is waiting for processes to start; the
    slow ones, nvidia-smi, the venv's python, ninja, the driver layer's tools, are in
    different groups), each group into a file of its own, printed in group order. Few
    groups, not one per section: on a machine many nodes share (the sandbox) every extra
    process counts. A narrow fact (``PROBE_SECTIONS``) runs its one or two sections in turn.

    >>> print(runner([SECTIONS[0], SECTIONS[1]]).splitlines()[2])
        { probe_os; probe_gpus; } > "$tmp/1"
    """
    groups = sorted({section.group for section in sections})
    lines = ["# The sections, run as facts/probe_script.py runner() says.",
             'if [ -z "${PROBE_SECTIONS:-}" ] && tmp=$(mktemp -d 2>/dev/null); then']
    for group in groups:
        calls = "; ".join(f"probe_{section.name}" for section in sections if section.group == group)
        lines.append(f'    {{ {calls}; }} > "$tmp/{group}"' + (" &" if group != groups[-1] else ""))
    lines += ["    wait", "    cat " + " ".join(f'"$tmp/{group}"' for group in groups), '    rm -rf "$tmp"', "else",
              f'    for section in ${{PROBE_SECTIONS:-{" ".join(section.name for section in sections)}}}; do',
              '        "probe_$section"', "    done", "fi", "exit 0"]
    return "\n".join(lines) + "\n"


def planner_tables():
    """The planner's tables the probe's sections read, as shell assignments: the service's
    huggingface_hub settings (``MODEL_ENV_KEYS``) and the order in which they place its cache
    (``HUB_CACHE_ORDER``, ``KEY:SUFFIX`` items), declared once in bringup/layout.py.

    >>> print(planner_tables().splitlines()[2])
    HUB_CACHE_ORDER='HF_HUB_CACHE: HUGGINGFACE_HUB_CACHE: HF_HOME:/hub XDG_CACHE_HOME:/huggingface/hub'
    """
    order = " ".join(f"{key}:{suffix}" for key, suffix in HUB_CACHE_ORDER)
    return "".join(["# bringup/layout.py's tables, written by facts/probe_script.py planner_tables().\n",
                    f"MODEL_ENV_KEYS={shlex.quote(' '.join(MODEL_ENV_KEYS))}\n",
                    f"HUB_CACHE_ORDER={shlex.quote(order)}\n",
                    f"HUB_CACHE_DEFAULT={shlex.quote(HUB_CACHE_DEFAULT)}\n"])


def probe_script():
    """The probe (without its helpers): files/probe.d/lib.sh, the planner's tables, each
    registered section's fragment in registry order, the runner.

    >>> probe_script().count("probe_gpus() {")
    1
    """
    return "".join([(PROBE_D / "lib.sh").read_text(), planner_tables(),
                    *((PROBE_D / s.fragment).read_text() for s in SECTIONS), runner()])


def probe_command(inputs, sections=()):
    """The one shell command that runs the probe (``sections``, default all) on a node,
    given its ``ProbeInputs`` (bringup/layout.py).

    The script travels compressed and base64-encoded so no quoting of its body can break,
    and runs under ``sh`` so a node without bash still answers.

    ``PROBE_FS_ROOT`` (a test's scratch root for the driver layer and PCI files) is pinned
    empty, and every other input the inputs leave out (``PINNED``, the model's
    ``PROBE_MODEL_ENV_<KEY>`` unset): whatever the remote session's environment holds, the
    node's own files are read, and only the plan's env-file keys reported.

    >>> from bringup.layout import ProbeInputs
    >>> probe_command(ProbeInputs.defaults(), ("gpus",)).split(" | ")[3].split()[:8]
    ['env', '-u', 'SHELLOPTS', '-u', 'BASHOPTS', 'PROBE_FS_ROOT=', 'PROBE_SECTIONS=gpus', 'PROBE_ENV_KEYS=']
    """
    script = b"TORCH_INFO=" + shlex.quote(TORCH_INFO.read_text()).encode() + b"\n" + \
        b"".join(path.read_bytes() for path in HELPERS) + probe_script().encode()
    # gzip'd (gzip is essential on Debian and Ubuntu): a third of the bytes to send to each
    # host, which is what a fleet's validate spends its control-side time on.
    encoded = base64.b64encode(gzip.compress(script, 9, mtime=0)).decode("ascii")
    environment = inputs.environment(sections)
    assignments = " ".join(f"{key}={shlex.quote(str(value)) if value != '' else ''}"
                           for key, value in {**PINNED, **environment}.items())
    unset = " ".join(name for name in (f"PROBE_MODEL_ENV_{key}" for key in MODEL_ENV_KEYS) if name not in environment)
    # A bash that is sh would take its options from the session's SHELLOPTS and BASHOPTS
    # (xtrace would print the env file's lines as it reads them): env drops both.
    return f"unset {unset}; echo {encoded} | base64 -d | gzip -dc | env -u SHELLOPTS -u BASHOPTS {assignments} sh"
