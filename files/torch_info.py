"""What a venv holds (torch, FlashInfer, SGLang), read without importing torch.

Run with the venv's own python (as the venv's owner: root never runs code another
user could change):

    python torch_info.py [--record FILE] [--import]
    python torch_info.py --emit-record       # the record itself (imports torch)

prints one JSON line: ``{"flashinfer", "sglang", "torch": {"version", "cuda",
"arch_list", "arch_list_from"}}`` (``torch_error`` instead of ``torch`` when torch's
arch list had to be computed and torch did not import).

Versions come from the packages' dist-info directory names (one listing, no
importlib.metadata) and torch's CUDA build from torch/version.py (read, not
imported). Only torch's compiled arch list needs an import (seconds); it is
kept in a record written beside the venv when the venv is built or first seen by a
deploy (files/build-venv.sh, tasks/sglang_venv.py), stamped with torch's installation
(its dist-info RECORD: name, size, mtime, inode: any reinstall writes a new one). A
record whose stamp is torch's as installed now is used (``arch_list_from: record``);
otherwise, or with ``--import``, torch is imported (``arch_list_from: import``).
Shipped inside the node probe (facts/node.py) and installed as a helper.
"""

import json
import os
import re
import sys

ASSIGNMENT = r"^{name}\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]"


def site_packages():
    """The venv's site-packages directories (sys.path, as -I leaves it)."""
    return [path for path in sys.path if path.endswith("site-packages") and os.path.isdir(path)]


def normalized(name):
    """A distribution name as its dist-info directory spells it, compared loosely.

    >>> normalized("flashinfer-python") == normalized("flashinfer_python")
    True
    """
    return re.sub(r"[-_.]+", "_", name).lower()


def dist_infos(directories):
    """normalized name -> (version, dist-info path), from one listing per directory
    (no importlib.metadata: this is the probe's hot path)."""
    found = {}
    for directory in directories:
        for entry in os.listdir(directory):
            if entry.endswith(".dist-info") and "-" in entry:
                name, _, version = entry[: -len(".dist-info")].partition("-")
                found.setdefault(normalized(name), (version, os.path.join(directory, entry)))
    return found


def torch_build(package_dir):
    """(version, cuda) from torch/version.py, read as text."""
    with open(os.path.join(package_dir, "torch", "version.py"), encoding="utf-8") as handle:
        text = handle.read()
    found = {}
    for name in ("__version__", "cuda"):
        match = re.search(ASSIGNMENT.format(name=name), text, re.M)
        found[name] = match.group(1) if match else None
    return found["__version__"], found["cuda"]


def stamp_of(dist_info):
    """torch's installation, as a string that changes when torch is installed again:
    its dist-info directory and the stat of its RECORD, which installers write anew."""
    try:
        stat = os.stat(os.path.join(dist_info, "RECORD"))
    except OSError:
        return ""
    return f"{os.path.basename(dist_info)}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}"


def read_record(path, stamp):
    """The recorded arch list when ``path`` holds one for ``stamp``, else None."""
    if not path or not stamp:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    if record.get("stamp") != stamp or not isinstance(record.get("arch_list"), list):
        return None
    return record["arch_list"]


def imported_arch_list():
    import torch

    flags = getattr(torch._C, "_cuda_getArchFlags", lambda: "")() or ""
    return flags.split()


def torch_of(found):
    """(version, cuda, stamp) of the venv's torch, or None without one."""
    if "torch" not in found:
        return None
    dist_version, dist_info = found["torch"]
    version, cuda = torch_build(os.path.dirname(dist_info))
    return version or dist_version, cuda, stamp_of(dist_info)


def emit_record():
    """The record a deploy writes: torch's stamp and arch list, torch imported."""
    version, cuda, stamp = torch_of(dist_infos(site_packages()))
    return {"stamp": stamp, "torch": version, "cuda": cuda, "arch_list": imported_arch_list()}


def main(argv):
    if "--emit-record" in argv:
        print(json.dumps(emit_record()))
        return 0
    record_path = argv[argv.index("--record") + 1] if "--record" in argv else ""
    found = dist_infos(site_packages())
    out = {"flashinfer": found.get("flashinfer_python", (None,))[0], "sglang": found.get("sglang", (None,))[0]}
    try:
        torch = torch_of(found)
        if torch is None:
            # As an import would say: a venv without torch cannot serve.
            raise ModuleNotFoundError("No module named 'torch'")
        version, cuda, stamp = torch
        arch_list = None if "--import" in argv else read_record(record_path, stamp)
        source = "record"
        if arch_list is None:
            arch_list, source = imported_arch_list(), "import"
        out["torch"] = {"version": version, "cuda": cuda, "arch_list": arch_list, "arch_list_from": source}
    except Exception as error:  # what the service would meet: torch cannot be read or imported
        out["torch_error"] = repr(error)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
