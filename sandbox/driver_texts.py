"""The driver stand-in's texts for one GPU profile: what ``nvidia-smi -q`` and
``nvidia-smi topo -m`` print, and the loaded module's ``/proc/driver/nvidia/version``.

SANDBOX STAND-INS, written into a node with the profile's recorded outputs
(sandbox/gpu_standin.py) and read there by ``/usr/bin/nvidia-smi``
(sandbox/files/nvidia-smi) and ``files/node-init.sh``:

* ``smi-q.txt``: ASSEMBLED, not recorded. NVIDIA's ``-q`` layout (field names, the
  column of the colons, as in tests/fixtures/driver/smi-q-h100-sxm-x8.txt), holding
  only the fields the probe reads, filled from the profile's recorded table (smi.txt:
  bus ids, persistence On/Off) and query (query.csv: names, driver version);
* ``topo.txt``: ASSEMBLED. NVIDIA's ``topo -m`` matrix and legend: NV18 between the
  GPUs of an HGX profile, PCIe links (NODE within a CPU's half, SYS across) otherwise;
* ``proc-version-open`` and ``proc-version-proprietary``: the RECORDED banners
  (tests/fixtures/driver/proc-version-*.txt) with the profile's driver version and the
  node's CPU put in. node-init.sh shows the open one unless a driver state says otherwise.

The states that change them (sandbox/field_states.py: mig-on, the nvswitch-* states,
proprietary-module, library-mismatch) leave files in ``/var/lib/sandbox-gpu`` that the
stand-ins read; the texts here are each profile's healthy node.
"""

from __future__ import annotations

import re
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
DRIVER_FIXTURES = FIXTURES / "driver"
# The profiles whose GPUs are SXM parts on an HGX board: NVLink through NVSwitches (NV18)
# and a fabric state that a running Fabric Manager completes.
HGX_GPUS = ("H100 80GB HBM3", "B200")
# Grace-Blackwell NVL compute-tray parts ("B200" above matches GB200 too: NV18 and a
# completed fabric): their -q Fabric block also names the NVLink domain's clique and cluster,
# as GB200 prints it (kubernetes-sigs/dra-driver-nvidia-gpu#626: "Fabric / State : Completed /
# Status : Success / CliqueId : 2 / ClusterUUID : dc6e40c4-..."; leptonai/gpud#1106: the
# four GPUs of a GB200 tray share one clique_id and cluster_uuid). Stand-in values.
GRACE_BLACKWELL_GPUS = ("GB200", "GB300")
STANDIN_CLIQUE, STANDIN_CLUSTER = "32766", "6a130f54-0000-4000-8000-5a4db0c5a4d0"
# GPUs that can be split with MIG (-q says Disabled, not N/A): data-centre parts.
MIG_GPUS = ("H100", "B200", "RTX PRO 6000 Blackwell Server")
# A row of the recorded table: "|   0  NVIDIA ... On | 00000000:18:00.0 Off |".
TABLE_ROW = re.compile(r"^\|\s+(?P<index>\d+)\s+.*\s(?P<persistence>On|Off) \| (?P<bus_id>[0-9A-F]{8}:[0-9A-F]{2}:"
                       r"[0-9A-F]{2}\.[0-7]) ")
TOPO_LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def recorded(name: str) -> str:
    """A recorded fixture's text after its ``#---`` header (its source notes).

    >>> recorded("proc-version-open.txt").startswith("NVRM version: NVIDIA UNIX Open Kernel Module")
    True
    """
    text = (DRIVER_FIXTURES / name).read_text()
    return text.split("#---\n", 1)[1] if "#---\n" in text else text


def profile_gpus(profile_dir: Path) -> list[dict]:
    """The profile's GPUs: index, name, driver version (query.csv), bus id and persistence
    (smi.txt); [] for a profile whose driver does not answer (driver-failed).

    >>> [(g["name"], g["bus_id"], g["persistence"]) for g in profile_gpus(FIXTURES / "gpus" / "rtx-5090")]
    [('NVIDIA GeForce RTX 5090', '00000000:18:00.0', 'Enabled')]
    """
    rows = {}
    for line in (profile_dir / "smi.txt").read_text().splitlines():
        match = TABLE_ROW.match(line)
        if match:
            rows[int(match["index"])] = match
    gpus = []
    for line in (profile_dir / "query.csv").read_text().splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit() or int(fields[0]) not in rows:
            continue
        row = rows[int(fields[0])]
        gpus.append({"index": int(fields[0]), "name": fields[1], "driver": fields[4], "bus_id": row["bus_id"],
                     "persistence": "Enabled" if row["persistence"] == "On" else "Disabled"})
    return gpus


def cuda_version(profile_dir: Path) -> str:
    """The CUDA version the recorded table's header names ("" when it has none)."""
    match = re.search(r"CUDA Version: (\S+)", (profile_dir / "smi.txt").read_text())
    return match.group(1) if match else ""


def _field(key: str, value: str, depth: int = 1) -> str:
    # nvidia-smi -q puts every colon in column 42, whatever the indent.
    indent = "    " * depth
    return f"{indent}{key.ljust(42 - len(indent))}: {value}"


def smi_query(gpus: list[dict], cuda: str) -> str:
    """``nvidia-smi -q`` of *gpus* (ASSEMBLED: the fields the probe reads, in NVIDIA's layout).

    >>> print(smi_query([{"index": 0, "name": "NVIDIA B200", "driver": "580.82.07", "bus_id": "00000000:18:00.0",
    ...                   "persistence": "Enabled"}], "13.0").splitlines()[7:10])
    ['GPU 00000000:18:00.0', '    Product Name                          : NVIDIA B200', \
'    Persistence Mode                      : Enabled']
    """
    lines = ["==============NVSMI LOG==============", "",
             _field("Timestamp", "Sat Nov 28 10:00:00 2026", 0),
             _field("Driver Version", gpus[0]["driver"], 0), _field("CUDA Version", cuda, 0), "",
             _field("Attached GPUs", str(len(gpus)), 0)]
    for gpu in gpus:
        mig = "Disabled" if any(part in gpu["name"] for part in MIG_GPUS) else "N/A"
        hgx = any(part in gpu["name"] for part in HGX_GPUS)
        lines += [f"GPU {gpu['bus_id']}", _field("Product Name", gpu["name"]),
                  _field("Persistence Mode", gpu["persistence"]), "    MIG Mode",
                  _field("Current", mig, 2), _field("Pending", mig, 2), "    PCI",
                  _field("Bus Id", gpu["bus_id"], 2), "    Fabric",
                  _field("State", "Completed" if hgx else "N/A", 2),
                  _field("Status", "Success" if hgx else "N/A", 2)]
        if any(part in gpu["name"] for part in GRACE_BLACKWELL_GPUS):
            lines += [_field("CliqueId", STANDIN_CLIQUE, 2), _field("ClusterUUID", STANDIN_CLUSTER, 2)]
        if any(part in gpu["name"] for part in MIG_GPUS):
            # Data-centre parts remap rows (NVIDIA's "GPU Memory Error Management"); healthy here,
            # a health state changes them (sandbox/gpu_health_states.py).
            lines += ["    Remapped Rows", _field("Correctable Error", "0", 2), _field("Uncorrectable Error", "0", 2),
                      _field("Pending", "No", 2), _field("Remapping Failure Occurred", "No", 2)]
        lines.append("")
    return "\n".join(lines) + "\n"


def link(a: dict, b: dict, count: int) -> str:
    """The ``topo -m`` link between two GPUs: NV18 on an HGX board, else NODE between GPUs
    of the same half of the node (one CPU's PCIe), SYS across the halves.

    >>> link({"index": 0, "name": "NVIDIA B200"}, {"index": 5, "name": "NVIDIA B200"}, 8)
    'NV18'
    >>> link({"index": 0, "name": "X"}, {"index": 3, "name": "X"}, 8), link({"index": 0, "name": "X"},
    ...      {"index": 4, "name": "X"}, 8)
    ('NODE', 'SYS')
    """
    if all(any(part in gpu["name"] for part in HGX_GPUS) for gpu in (a, b)):
        return "NV18"
    half = max(count // 2, 1)
    return "NODE" if a["index"] // half == b["index"] // half else "SYS"


def topology(gpus: list[dict]) -> str:
    """``nvidia-smi topo -m`` of *gpus* (ASSEMBLED: the matrix and NVIDIA's legend)."""
    count, half = len(gpus), max(len(gpus) // 2, 1)
    header = "\t" + "\t".join(f"GPU{gpu['index']}" for gpu in gpus) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = [header]
    for a in gpus:
        numa = a["index"] // half if count > 1 else 0
        cpus = f"{numa * 48}-{numa * 48 + 47}"
        cells = [" X " if a is b else link(a, b, count) for b in gpus]
        rows.append(f"GPU{a['index']}\t" + "\t".join(cells) + f"\t{cpus}\t{numa}\t\tN/A")
    return "\n".join(rows) + "\n" + TOPO_LEGEND


def banner(flavour: str, version: str, machine: str) -> str:
    """The loaded module's ``/proc/driver/nvidia/version``: the recorded banner of that
    flavour with *version* and the node's CPU put in.

    >>> banner("proprietary", "580.95.05", "x86_64").splitlines()[0]
    'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Mon Sep 12 19:21:56 UTC 2022'
    >>> banner("open", "580.95.05", "aarch64").splitlines()[0].split("  ")[:2]
    ['NVRM version: NVIDIA UNIX Open Kernel Module for aarch64', '580.95.05']
    """
    text = recorded(f"proc-version-{flavour}.txt")
    recorded_version = "565.57.01" if flavour == "open" else "515.76"
    return text.replace(recorded_version, version, 1).replace("x86_64", machine, 1)


def driver_texts(profile_dir: Path, machine: str) -> dict[str, str]:
    """The stand-in's texts of a profile (file name -> text); none for a profile whose
    driver does not answer (its module is not loaded: no banner either)."""
    gpus = profile_gpus(profile_dir)
    if not gpus:
        return {}
    version = gpus[0]["driver"]
    return {"smi-q.txt": smi_query(gpus, cuda_version(profile_dir)), "topo.txt": topology(gpus),
            "driver-version": version + "\n",
            "proc-version-open": banner("open", version, machine),
            "proc-version-proprietary": banner("proprietary", version, machine)}
