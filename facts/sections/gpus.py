"""The ``gpus`` section: nvidia-smi's GPU rows and header -> ``driver``, ``nvidia_smi``, ``gpus``.

Its shell fragment is files/probe.d/gpus.sh (``probe_gpus``); docs/facts.md
documents what it parses into.
"""

import re

from bringup.facts_kinds import BOOL, INT, OPT_STR, OPT_VERSION, STR, VERSION, Items, Optional
from facts.probe_framing import Key, ProbeSection

SMI_HEADER = re.compile(r"Driver Version:\s*(?P<driver>\S+)\s+CUDA Version:\s*(?P<cuda>\S+)")


def parse_gpu_rows(lines):
    """Rows of ``nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version``.

    >>> parse_gpu_rows(["0, NVIDIA B200, 10.0, 183359, 580.82.07"])[0]["compute_cap"]
    '10.0'
    """
    gpus = []
    for line in lines:
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 5:
            raise ValueError(f"unexpected nvidia-smi row: {line!r}")
        index, name, compute_cap, memory, driver = cells
        gpus.append({
            "index": int(index),
            "name": name,
            "compute_cap": compute_cap,
            "memory_total_mib": int(memory) if memory.isdigit() else None,
            "driver_version": driver,
        })
    return gpus


def parse_smi_header(text):
    """Driver version and the newest CUDA it supports, from plain ``nvidia-smi``.

    >>> parse_smi_header("| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |")
    {'version': '580.95.05', 'cuda_version': '13.0'}
    """
    match = SMI_HEADER.search(text or "")
    if not match:
        return None
    return {"version": match["driver"], "cuda_version": match["cuda"]}


def gpu_and_driver(by_name):
    """GPUs, driver and nvidia-smi status from the ``smi-*`` sections."""
    query = by_name.get("smi-query")
    smi = {"present": query is not None and query.rc != 127, "error": None}
    if not smi["present"]:
        smi["error"] = "nvidia-smi not found"
        return [], None, smi
    if query.rc != 0:
        smi["error"] = query.text.strip() or f"nvidia-smi exited {query.rc}"
        return [], None, smi
    gpus = parse_gpu_rows(query.lines)
    header = by_name.get("smi-header")
    driver = parse_smi_header(header.text) if header else None
    if driver is None and gpus:
        driver = {"version": gpus[0]["driver_version"], "cuda_version": None}
    for gpu in gpus:
        del gpu["driver_version"]
    return gpus, driver, smi


SECTION = ProbeSection(
    name="gpus",
    group=1,
    raw=("smi-query", "smi-header"),
    keys={
        "driver": Key(
            parse=lambda by_name: gpu_and_driver(by_name)[1],
            schema=Optional({"version": VERSION, "cuda_version": OPT_VERSION}),
            meaning="the loaded NVIDIA driver; null without one",
            example={"version": "580.95.05", "cuda_version": "13.0"},
            partial=True,
        ),
        "nvidia_smi": Key(
            parse=lambda by_name: gpu_and_driver(by_name)[2],
            schema={"present": BOOL, "error": OPT_STR},
            meaning="whether `nvidia-smi` exists and what it said when it failed",
            example={"present": True, "error": None},
        ),
        "gpus": Key(
            parse=lambda by_name: gpu_and_driver(by_name)[0],
            schema=Items({"index": INT, "name": STR, "compute_cap": STR, "memory_total_mib": Optional(INT)}),
            meaning="one object per GPU `nvidia-smi` lists; `[]` without",
            required=True,
        ),
    },
)
