"""GPU health states of the driver stand-in: a sandbox node's GPUs found healthy, or one of
them broken as real GPUs break (issue 37), switched on a running node by the stand-in
control ``python -m sandbox health NAME STATE``.

SANDBOX STAND-INS (declared, like the profiles' recordings: docs/contributing.md "GPU health
states"). For each state the node holds, under ``/usr/share/sandbox-gpu/health/<state>/``,
the nvidia-smi answers that differ from the healthy node's (ASSEMBLED here from the
profile's recorded and assembled texts, sandbox/driver_texts.py); the nvidia-smi stand-in
(sandbox/files/nvidia-smi) answers from them while ``/var/lib/sandbox-gpu/health`` names
the state. The state's NVRM Xid lines, in the driver's format (``NVRM: Xid (PCI:%04x:%02x:
%02x): %d, pid=..., name=..., <text>``, open-gpu-kernel-modules' nvErrorLog), reach the
node's journal as kernel-transport entries (``_TRANSPORT=kernel``): Debian's real
``systemd-journal-remote`` (the ``kernel-log`` state installs it from the distribution's
archive) writes an export-format stream into ``/run/log/journal/<machine-id>/``, where
``journalctl -k -b`` reads them and a reboot takes them away, as a ring buffer's lines
go. The host's ``/dev/kmsg`` is never written (it is the machine's).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sandbox.driver_texts import profile_gpus, topology
from sandbox.statedir import read_registry

HEALTH_STATES = ("healthy", "ecc-uncorrectable", "row-remap-pending", "row-remap-failure", "link-x8", "hw-slowdown",
                 "gpu-missing", "reset-required")
# NVIDIA's diagnostic on the node (the gpu_diag setting), beside the health state: DCGM's dcgmi
# stand-in (sandbox/files/dcgmi) installed answering a passing or a failing diagnostic (the
# public samples of tests/fixtures/dcgm/: the failure is GPU 3's, SICK's), or removed; a
# process on GPU 0 (nvidia-smi's compute apps) or none.
DCGM_STATES = ("dcgm-pass", "dcgm-fail", "dcgm-none", "gpu-process", "gpu-idle")
DCGM_SAMPLES = {"pass": "diag-r1-pass.json", "fail": "diag-r2-fail.json"}
DCGMI = Path(__file__).resolve().parent / "files" / "dcgmi"
SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "dcgm"
# The stand-in process: a pid and name as nvidia-smi --query-compute-apps prints them.
GPU_PROCESS = "4242, python3, 00000000:18:00.0"
# The GPU a state breaks: one in the middle; gpu-missing drops the last (the others keep
# their indexes).
SICK = 3
STATE_FILE = "/var/lib/sandbox-gpu/health"
JOURNAL_FILE = "sandbox-kernel-log.journal"
# The health query's answer of a healthy data-centre GPU at idle (its fields:
# facts/sections/gpu_health.py FIELDS): no errors, gen 1 of 5 at idle, x16 of x16, no
# slowdown, 32 C and 55 C of margin.
HEALTHY = {"ecc_v": "0", "ecc_a": "0", "pages": "[N/A]", "gen": "1", "gen_max": "5", "width": "16",
           "width_max": "16", "idle": "Active", "hw": "Not Active", "hw_thermal": "Not Active",
           "brake": "Not Active", "sw_thermal": "Not Active", "temp": "32", "tlimit": "55"}
CHANGES = {
    "ecc-uncorrectable": {"ecc_v": "2", "ecc_a": "2"},
    "link-x8": {"width": "8"},
    "hw-slowdown": {"hw": "Active", "brake": "Active"},
    # NVML_ERROR_RESET_REQUIRED in every cell the driver can no longer read (nvidia-smi
    # prints an NVML error in brackets); the index and bus id stay.
    "reset-required": dict.fromkeys(HEALTHY, "[GPU requires reset]"),
}
REMAPPED = {"row-remap-pending": ("1", "Yes", "No"), "row-remap-failure": ("8", "No", "Yes")}
XID = {
    "ecc-uncorrectable": (95, "pid=2817, name=python3, Uncontained ECC error"),
    "row-remap-pending": (63, "pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, reset "
                              "gpu to activate."),
    "row-remap-failure": (64, "pid='<unknown>', name=<unknown>, Row Remapper: Failed to remap row"),
    "gpu-missing": (79, "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
    # The catalog's Xid 154 line (its text names the new recovery action).
    "reset-required": (154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"),
}


def health_row(gpu: dict, values: dict) -> str:
    """One GPU's line of the health query (``--format=csv,noheader,nounits``).

    >>> health_row({"index": 0, "bus_id": "00000000:18:00.0"}, HEALTHY)[:40]
    '0, 00000000:18:00.0, 0, 0, [N/A], 1, 5, '
    """
    return ", ".join([str(gpu["index"]), gpu["bus_id"], *values.values()])


def xid_line(gpu: dict, state: str) -> str | None:
    """The state's Xid line for its GPU, in the driver's format; None for a state without one.

    >>> xid_line({"bus_id": "00000000:88:00.0"}, "gpu-missing")
    "NVRM: Xid (PCI:0000:88:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    """
    if state not in XID:
        return None
    number, text = XID[state]
    domain, bus, device = gpu["bus_id"].lower().split(".")[0].split(":")
    return f"NVRM: Xid (PCI:{domain[-4:]}:{bus}:{device}): {number}, {text}"


def remapped_rows(smi_q: str, bus_id: str, counts: tuple[str, str, str]) -> str:
    """``-q`` with the GPU at *bus_id*'s Remapped Rows set: (uncorrectable, pending, failure)."""
    out, current = [], None
    for line in smi_q.splitlines():
        if line.startswith("GPU "):
            current = line[4:].strip()
        if current == bus_id and line.lstrip().startswith(("Uncorrectable Error", "Pending", "Remapping Failure")):
            key = line.split(":")[0].strip()
            value = {"Uncorrectable Error": counts[0], "Pending": counts[1], "Remapping Failure Occurred": counts[2]}
            line = f"{line.split(':')[0]}: {value[key]}"
        out.append(line)
    return "\n".join(out) + "\n"


def without_gpu(texts: dict, gpus: list[dict], gone: dict) -> dict:
    """The recorded and assembled answers of a node whose GPU *gone* fell off the bus: the
    driver lists the others (the table, the query, -q and its count, the topology)."""
    index = gone["index"]
    query = "".join(line + "\n" for line in texts["query.csv"].splitlines() if line.split(",")[0].strip() != str(index))
    table, skip = [], 0
    for line in texts["smi.txt"].splitlines():
        if re.match(rf"^\|\s+{index}\s+NVIDIA", line):
            skip = 4  # the GPU's three rows and the rule below them
        if skip:
            skip -= 1
            continue
        table.append(line)
    blocks = texts["smi-q.txt"].split("\n\n")
    kept = [block for block in blocks if not block.startswith(f"GPU {gone['bus_id']}")]
    smi_q = "\n\n".join(kept).replace(f": {len(gpus)}\n", f": {len(gpus) - 1}\n", 1)
    return {"query.csv": query, "smi.txt": "\n".join(table) + "\n", "smi-q.txt": smi_q,
            "topo.txt": topology([gpu for gpu in gpus if gpu is not gone])}


def health_texts(profile_dir, texts: dict) -> dict[str, str]:
    """The health answers of a profile (path under the node's data directory -> text):
    ``health.csv`` (healthy) and, per state, what differs from the healthy node's files.
    *texts*: the node's healthy ``query.csv``, ``smi.txt`` (recorded) and ``smi-q.txt``
    (assembled). None for a profile without GPUs."""
    gpus = profile_gpus(profile_dir)
    if len(gpus) <= SICK:
        return {"health.csv": "".join(health_row(gpu, HEALTHY) + "\n" for gpu in gpus)} if gpus else {}
    out = {"health.csv": "".join(health_row(gpu, HEALTHY) + "\n" for gpu in gpus)}
    for state in HEALTH_STATES[1:]:
        sick = gpus[-1] if state == "gpu-missing" else gpus[SICK]
        rows = [health_row(gpu, {**HEALTHY, **(CHANGES.get(state, {}) if gpu is sick else {})}) for gpu in gpus
                if not (state == "gpu-missing" and gpu is sick)]
        out[f"health/{state}/health.csv"] = "".join(row + "\n" for row in rows)
        if state in REMAPPED:
            out[f"health/{state}/smi-q.txt"] = remapped_rows(texts["smi-q.txt"], sick["bus_id"], REMAPPED[state])
        if state == "gpu-missing":
            out.update({f"health/{state}/{name}": text for name, text in without_gpu(texts, gpus, sick).items()})
        line = xid_line(sick, state)
        if line:
            out[f"health/{state}/xid.txt"] = line + "\n"
    return out


def heredoc(path: str, text: str, mode: str) -> str:
    """Shell that writes *text* whole to *path* with *mode* (a new file renamed over the old).

    >>> print(heredoc("/x", "a\\n", "0644"))
    cat > /x.new <<'SANDBOX_EOF'
    a
    SANDBOX_EOF
    chmod 0644 /x.new && mv -f /x.new /x
    """
    if "\nSANDBOX_EOF\n" in "\n" + text:
        raise ValueError(f"{path}: its text holds the heredoc's end")
    return f"cat > {path}.new <<'SANDBOX_EOF'\n{text}SANDBOX_EOF\nchmod {mode} {path}.new && mv -f {path}.new {path}"


def dcgm_script(state: str) -> str:
    """The shell of a DCGM_STATES state (as root on the node): the dcgmi stand-in and its
    answers installed, or removed; the stand-in process on a GPU, or none."""
    lines = ["set -eu", "mkdir -p -m 0755 /var/lib/sandbox-gpu /usr/share/sandbox-gpu/dcgm"]
    if state in ("dcgm-pass", "dcgm-fail"):
        for answer, sample in DCGM_SAMPLES.items():
            lines.append(heredoc(f"/usr/share/sandbox-gpu/dcgm/{answer}.json", (SAMPLES / sample).read_text(), "0644"))
        lines.append(heredoc("/usr/bin/dcgmi", DCGMI.read_text(), "0755"))
        lines.append(heredoc("/var/lib/sandbox-gpu/dcgm", state.removeprefix("dcgm-") + "\n", "0644"))
    elif state == "dcgm-none":
        lines.append("rm -f /usr/bin/dcgmi /var/lib/sandbox-gpu/dcgm /var/lib/sandbox-gpu/dcgm-runs")
    elif state == "gpu-process":
        lines.append(heredoc("/var/lib/sandbox-gpu/compute-apps", GPU_PROCESS + "\n", "0644"))
    else:
        lines.append("rm -f /var/lib/sandbox-gpu/compute-apps")
    return "\n".join(lines) + "\n"


def control_script(state: str) -> str:
    """The shell the stand-in control runs on the node (as root, over its SSH): the state's
    name where the nvidia-smi stand-in reads it, and this boot's kernel log of it: the
    state's Xid lines as kernel-transport journal entries (none for healthy). A DCGM state
    (DCGM_STATES) changes only what it names (dcgm_script)."""
    if state in DCGM_STATES:
        return dcgm_script(state)
    if state not in HEALTH_STATES:
        raise ValueError(f"unknown health state {state!r}; known: {', '.join(HEALTH_STATES)}")
    return f"""set -eu
data=/usr/share/sandbox-gpu
[ -r "$data/health.csv" ] || {{ echo "this node's GPU profile has no health states" >&2; exit 1; }}
mid=$(cat /etc/machine-id)
journal=/run/log/journal/$mid
rm -f "$journal/{JOURNAL_FILE}"
mkdir -p -m 0755 /var/lib/sandbox-gpu
if [ {state} = healthy ]; then rm -f {STATE_FILE}; else echo {state} > {STATE_FILE}.new; mv {STATE_FILE}.new {STATE_FILE}; fi
xid="$data/health/{state}/xid.txt"
[ -r "$xid" ] || exit 0
remote=/lib/systemd/systemd-journal-remote
[ -x "$remote" ] || {{ echo "no $remote: start the node with --state kernel-log" >&2; exit 1; }}
mkdir -p "$journal"
boot=$(tr -d - < /proc/sys/kernel/random/boot_id)
now=$(date +%s%6N)
mono=$(awk '{{printf "%d", $1 * 1000000}}' /proc/uptime)
while IFS= read -r line; do
    printf '__REALTIME_TIMESTAMP=%s\\n__MONOTONIC_TIMESTAMP=%s\\n_BOOT_ID=%s\\n_MACHINE_ID=%s\\n_HOSTNAME=%s\\n' \\
        "$now" "$mono" "$boot" "$mid" "$(hostname)"
    printf '_TRANSPORT=kernel\\nPRIORITY=3\\nSYSLOG_FACILITY=0\\nSYSLOG_IDENTIFIER=kernel\\nMESSAGE=%s\\n\\n' "$line"
done < "$xid" > /run/sandbox-kernel-log.export
"$remote" --output="$journal/{JOURNAL_FILE}" /run/sandbox-kernel-log.export 2>/dev/null
rm -f /run/sandbox-kernel-log.export
"""


def set_state(name: str, state: str) -> None:
    """STAND-IN control: put node *name*'s GPUs in the health *state*, by the node's own
    root over its SSH (control_script); a ValueError says why it could not."""
    entry = read_registry().get(name)
    if entry is None:
        raise ValueError(f"{name}: no such node (python -m sandbox status lists them)")
    command = ["ssh", "-i", entry["ssh_key"], "-o", f"UserKnownHostsFile={entry['ssh_known_hosts_file']}",
               "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", str(entry["ssh_port"]),
               f"root@{entry['ssh_hostname']}", "sh -s"]
    run = subprocess.run(command, input=control_script(state), capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise ValueError(f"{name}: health {state} failed: {(run.stderr or run.stdout).strip()[-500:]}")
