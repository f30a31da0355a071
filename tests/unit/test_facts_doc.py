"""docs/facts.md documents the facts document exactly: every key the parser emits has
a row, and every row is a key the parser emits; every field the planner's schema checks
(bringup/facts_keys.py, from the sections' declarations) has a row, the driver layer's
exactly its rows. The top-level table itself is generated (tests/unit/test_probe_sections.py);
the tables below it are prose, held here."""

import json
import re
from pathlib import Path

from bringup.facts_keys import SCHEMA
from bringup.facts_kinds import Items, Optional, Values
from facts.probe_output import build_document

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "facts.md").read_text()

# Probe output that reaches every branch that adds a key: a broken toolkit beside a
# working one, a login nvcc, a venv with torch, a pre-warm manifest and a module, a
# unit that keeps restarting with its journal.
FULL_OUTPUT = """\
@@ os-release rc=0
ID=debian
VERSION_ID="12"
@@ uname rc=0
x86_64
@@ smi-query rc=0
0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, 97887, 580.95.05
@@ smi-header rc=0
| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |
@@ pci-gpus rc=0
0000:18:00.0 0x10de 0x2bb5 0x030200
@@ toolkit rc=0 home=/usr/local/cuda-13.0
Cuda compilation tools, release 13.0, V13.0.88
@@ toolkit rc=127 home=/usr/local/cuda-12.8
@@ cuda-link rc=0
/usr/local/cuda-13.0
@@ login-env rc=0
CUDA_HOME=/usr/local/cuda-13.0
CUDA_PATH=
PATH=/usr/local/cuda-13.0/bin:/usr/bin
nvcc=/usr/local/cuda-13.0/bin/nvcc
@@ path-nvcc rc=0 path=/usr/local/cuda-13.0/bin/nvcc
Cuda compilation tools, release 13.0, V13.0.88
@@ service-env rc=0
env_file=present
CUDA_HOME=/usr/local/cuda-13.0
CUDA_PATH=
PATH=/usr/local/cuda-13.0/bin:/usr/bin
FLASHINFER_CUDA_ARCH_LIST=12.0f
FLASHINFER_WORKSPACE_BASE=/var/cache/sglang
home=/usr/local/cuda-13.0
via=CUDA_HOME
env.CUDA_HOME=/usr/local/cuda-13.0
@@ resolved-nvcc rc=0 home=/usr/local/cuda-13.0
Cuda compilation tools, release 13.0, V13.0.88
@@ python rc=0
Python 3.11.2
@@ python-alt rc=0 path=/usr/bin/python3.11
Python 3.11.2
@@ venv-python rc=0 path=/opt/cpython-3.11/bin/python3.11
file=root 755 regular file
owner=
real=/opt/cpython-3.11/bin/python3.11
ran=0
version=3.11.2
releaselevel=final
pip=22.3.1
venv=ok
@@ deb-packages rc=0
ii |cuda-nvcc-13-0|13.0.88-1
@@ venv rc=0
{"flashinfer": "0.7.2", "sglang": "0.5.23", "torch": {"version": "2.14.1+cu130", "cuda": "13.0", "arch_list": ["sm_120"], \
"arch_list_from": "record"}}
@@ entry_point rc=0 path=/opt/sglang/venv/bin/sglang
script=root 755 regular file
format=script
line=#!/bin/sh
wrapper=/bin/sh
interpreter=/opt/sglang/venvs/0a1b/bin/python
interpreter_file=root 755 regular file
interpreter_owner=alice
interpreter_dir=/opt/sglang/venvs/0a1b/bin
venv_bin=/opt/sglang/venvs/0a1b/bin
@@ prewarm rc=0
{"manifest": {"flashinfer": "0.7.2"}, "stale": []}
@@ jit-cache rc=0 base=/var/cache/sglang
./0.7.2/120f/cached_ops/sampling/sampling.so
@@ path rc=0 role=venv
root 777 symbolic link|/opt/sglang/venv
root 755 directory|/opt/sglang
@@ path rc=0 role=venv_target
root 755 directory|/opt/sglang/venvs/0123456789abcdef
root 755 directory|/opt/sglang/venvs
@@ path rc=0 role=python
root 755 regular file|/usr/bin/python3.11
root 755 directory|/usr/bin
@@ path rc=0 role=env_file
root 755 directory|/etc
@@ path rc=0 role=cache_dir
sglang 755 directory|/var/cache/sglang
@@ apt-source rc=0 file=/etc/apt/sources.list.d/cuda-debian12-x86_64.list
deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://r/debian12/x86_64/ /
@@ apt-source rc=0 file=/etc/apt/sources.list.d/nvidia-cuda.sources
Types: deb
URIs: https://r/debian12/x86_64/
Suites: /
Signed-By: /etc/apt/keyrings/nvidia-cuda.gpg
@@ apt-keyring rc=1 file=/usr/share/keyrings/cuda-archive-keyring.gpg
@@ unit rc=0 name=sglang.service
LoadState=loaded
ActiveState=activating
SubState=auto-restart
Result=exit-code
NRestarts=2
@@ unit-journal rc=0
RuntimeError: FlashInfer requires GPUs with sm75 or higher
@@ apt_locks rc=0
/var/lib/dpkg/lock-frontend 812 /usr/bin/python3 /usr/bin/unattended-upgrade
@@ account rc=0 user=sglang
sglang:x:998:998:gpu-bringup service account:/var/lib/sglang:/usr/sbin/nologin
@@ account-login rc=0
ops
@@ account-home rc=0 path=/var/lib/sglang
sglang 755 directory
@@ model rc=0 model=/srv/models/qwen3
kind=path
offline=
token=unset
endpoint=https://huggingface.co
path=/srv/models/qwen3
dir=root 755 directory
config=root 644 regular file
readable=yes
chain=root root 644 regular file|/srv/models/qwen3/config.json
chain=root root 755 directory|/srv/models/qwen3
hub_status=200
@@ driver-proc-version rc=0
NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-A24-9-2)
@@ driver-sys-version rc=0
580.95.05
@@ driver-modinfo rc=0
version:        580.95.05
license:        Dual MIT/GPL
@@ driver-nvml rc=0
/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05
@@ driver-packages rc=0
hi |nvidia-driver-580-open|580.95.05-1
@@ driver-nouveau rc=0
loaded=no
blacklist=/etc/modprobe.d/nvidia-blacklists-nouveau.conf
@@ driver-nvswitch rc=0
4
@@ driver-units rc=0
Id=nvidia-fabricmanager.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled
@@ driver-smi-q rc=0
GPU 00000000:18:00.0
    Persistence Mode                      : Enabled
    MIG Mode
        Current                           : Disabled
    PCI
        Bus Id                            : 00000000:18:00.0
    Fabric
        State                             : Completed
        Status                            : Success
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 0
        Pending                           : No
        Remapping Failure Occurred        : No
@@ driver-topo rc=0
	GPU0	GPU1	CPU Affinity
GPU0	 X 	NV18	0-47
GPU1	NV18	 X 	0-47
@@ driver-kernel rc=0
release=6.1.0-26-amd64
headers=yes
installed=6.1.0-26-amd64|yes|current
installed=6.1.0-28-amd64|no|stale
@@ driver-dkms rc=0
nvidia/580.95.05, 6.1.0-26-amd64, x86_64: installed
@@ driver-reboot rc=0
required=yes
nvidia-kernel-common-580
@@ driver-cmdline rc=0
iommu=pt
@@ driver-pci-paths rc=0
0000:18:00.0 0000:15:01.0 0000:17:00.0
@@ driver-acs rc=0
0000:17:00.0 SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
@@ infiniband rc=0
device|mlx5_0||
state|mlx5_0|1|4: ACTIVE
phys_state|mlx5_0|1|5: LinkUp
rate|mlx5_0|1|400 Gb/sec (4X NDR)
link_layer|mlx5_0|1|InfiniBand
net|mlx5_0||ibp24s0
@@ nvidia-peermem rc=0
loaded=yes
@@ route-address rc=0 to=gpu-head-01
10.20.0.11
@@ route rc=0 format=json
[{"dst":"10.20.0.11","gateway":"10.20.0.1","dev":"ens1f0np0","prefsrc":"10.20.0.12","flags":[],"uid":0,"cache":[]}]
@@ imex-unit rc=0
Id=nvidia-imex.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled
@@ imex-packages rc=0
hi |nvidia-imex|580.95.05-1
@@ imex-nodes rc=0
peers=18
@@ imex-channels rc=0
registered=yes
channel=channel0
@@ dcgm-unit rc=0
Id=nvidia-dcgm.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled
MainPID=4242
@@ dcgm-engine rc=0
started_ticks=100000
btime=1700000000
hz=100
unpacked=1700000100
@@ health-query rc=0
0, 00000000:18:00.0, 0, 0, [N/A], 1, 5, 16, 16, Active, Not Active, Not Active, Not Active, Not Active, 32, 55
@@ health-xid rc=0 source=journal
NVRM: Xid (PCI:0000:18:00): 94, pid=1234, name=python3, Contained ECC error
@@ gpu-diag-busy rc=0
@@ gpu-diag rc=226 level=2
{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": [
{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3, "status": "Fail", "warnings": [{"error_category": 10,
"error_id": 4, "error_severity": 2, "warning": "Detected 2 volatile double-bit ECC error(s) in GPU 3."}]}],
"test_summary": {"status": "Fail"}}]}]}, "metadata": {"version": "4.2.3"}}
"""
# A hub model's section: its snapshot judged (files/probe.d/model.sh SNAPSHOT_STATE).
HUB_MODEL = """@@ model rc=0 model=Qwen/Qwen3-0.6B
kind=hub
offline=1
token=unset
endpoint=https://huggingface.co
cache=/var/cache/sglang/xdg/huggingface/hub
via=XDG_CACHE_HOME
entry=/var/cache/sglang/xdg/huggingface/hub/models--Qwen--Qwen3-0.6B
revision=c1899de289a04d12100db370d81485cdf75e47ca
refs_main=unread
snapshot_files=3
snapshot_weights=1
snapshot_incomplete=0
snapshot_shards_missing=0
snapshot_fetching=no
record=present
record_repo=Qwen/Qwen3-0.6B
record_revision=c1899de289a04d12100db370d81485cdf75e47ca
record_files=3
record_missing=0
config=
"""
BROKEN_TORCH = '@@ os-release rc=0\nID=debian\n@@ venv rc=0\n{"flashinfer": null, "sglang": null, "torch_error": "E"}\n'




def framed(text):
    """Raw sections as files/probe.d/lib.sh emits them: headers as they are, each body line behind "|"."""
    return [line if line.startswith("@@ ") else f"|{line}" for line in text.splitlines()]


# Objects whose keys are data, not the document's keys: the manifest, package names.
OPAQUE = ("jit_cache.prewarm.manifest", "cuda_packages", "apt.keyrings", "apt.keyring_paths", "service_env")


def key_paths(value, prefix=""):
    """Dotted key paths of a document (``[]`` for list items); an opaque object stops."""
    paths = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            if path not in OPAQUE:
                paths |= key_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, f"{prefix}[]")
    return paths


# A heading's ``<role>`` stands for each role of ``paths``, ``<unit>`` for each of the
# driver's daemons in ``driver_layer.units``.
PLACEHOLDERS = {"<role>": ("venv", "venv_target", "python", "env_file", "cache_dir"),
                "<unit>": ("nvidia-persistenced", "nvidia-fabricmanager", "nvlsm")}


def expand(name):
    """A heading's name, each placeholder in it replaced by each of its values.

    >>> expand("driver_layer.units.<unit>")[-1]
    'driver_layer.units.nvlsm'
    """
    for mark, values in PLACEHOLDERS.items():
        if mark in name:
            return [name.replace(mark, value) for value in values]
    return [name]


def documented_paths():
    """Key paths from the doc: each table's rows under the heading that names its parent
    (PLACEHOLDERS)."""
    paths, parents = set(), [""]
    for line in DOC.splitlines():
        heading = re.match(r"^(?:## |)(?P<names>`[^`]+`(?: and `[^`]+`)*):?$", line) or re.match(r"^## ", line)
        if heading:
            parents = re.findall(r"`([^`]+)`", line) or [""]
            parents = [expanded for name in parents for expanded in expand(name)]
            continue
        row = re.match(r"^\| `(?P<key>[^`]+)` \|", line)
        if row:
            paths |= {f"{parent}.{row['key']}" if parent else row["key"] for parent in parents}
    return paths


def emitted_paths():
    documents = [build_document(framed(FULL_OUTPUT)), build_document(framed(BROKEN_TORCH), ["torch"]),
                 build_document(framed(HUB_MODEL), ["model"]),
                 json.loads((ROOT / "tests" / "fixtures" / "facts" / "incident.json").read_text())]
    paths = set()
    for document in documents:
        paths |= key_paths(document)
    return paths


def test_every_emitted_key_is_documented():
    missing = emitted_paths() - documented_paths()
    assert not missing, f"keys the parser emits without a row in docs/facts.md: {sorted(missing)}"


def test_every_documented_key_is_emitted():
    extra = documented_paths() - emitted_paths()
    assert not extra, (f"rows in docs/facts.md the parser never emits: {sorted(extra)} (a new section's raw "
                       "output belongs in FULL_OUTPUT above)")


def schema_paths(kind, prefix):
    """Dotted key paths of a schema (bringup/facts_keys.py), as key_paths spells a document's:
    a ``Values`` object under a placeholder of PLACEHOLDERS stands for each of its keys."""
    while isinstance(kind, Optional):
        kind = kind.kind
    if isinstance(kind, Items):
        return schema_paths(kind.kind, f"{prefix}[]")
    if isinstance(kind, Values):
        names = PLACEHOLDERS["<unit>"] if prefix == "driver_layer.units" else ()
        return {path for name in names for path in {f"{prefix}.{name}"} | schema_paths(kind.kind, f"{prefix}.{name}")}
    if isinstance(kind, dict):
        return {path for key, sub in kind.items() for path in {f"{prefix}.{key}"} | schema_paths(sub, f"{prefix}.{key}")}
    return set()


def test_every_field_the_schema_checks_is_documented():
    """A field renamed in a section's schema but not in its table below is found; the
    tables may document more (fields the planner reads as "not probed" when absent)."""
    checked = {path for key, kind in SCHEMA.items() for path in {key} | schema_paths(kind, key)}
    assert sorted(checked - documented_paths()) == []


def test_the_driver_layer_schema_is_the_documented_one():
    """bringup/facts_keys.py checks exactly the driver_layer fields docs/facts.md documents."""
    documented = {path for path in documented_paths() if path.startswith("driver_layer.")}
    assert schema_paths(SCHEMA["driver_layer"], "driver_layer") == documented


def test_the_narrower_facts_named_are_the_ones_facts_node_defines():
    # A narrow fact is kept only where an operator asks for it alone or a task reads it
    # (docs/contributing.md): the page lists each, and none that is gone.
    from facts import node

    listed = DOC.split("A narrower fact (", 1)[1].split(")", 1)[0]
    defined = [name for name, value in vars(node).items()
               if isinstance(value, type) and issubclass(value, node.NodeFacts) and value is not node.NodeFacts]
    assert sorted(re.findall(r"`(\w+)`", listed)) == sorted(defined)
