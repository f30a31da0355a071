"""The facts document's shape (docs/facts.md), checked at the planner's door: a document
from another release, a hand-edited report or a broken probe gets one line naming the
field, never a traceback deep in the planner.

``SCHEMA`` mirrors docs/facts.md's tables (tests/unit/test_facts_doc.py keeps them
together): a key maps to its type, or to a nested schema; ``Optional`` marks a value
that may be null, ``Items`` a list of that schema, ``Values`` an object of any keys whose
values fit that schema, ``VERSION`` a string ``packaging.version`` parses (the planner
compares every version so: "three point eleven" must not read as an old python); keys
not listed are allowed (a newer probe may add some).
"""

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from bringup.setting_checks import shown


class FactsError(ValueError):
    """The facts document does not have the documented shape."""


@dataclass(frozen=True)
class Optional:
    kind: object


@dataclass(frozen=True)
class Items:
    kind: object


@dataclass(frozen=True)
class Values:
    kind: object


STR, INT, BOOL, ANY = str, int, bool, object
VERSION = "version"
OPT_STR, OPT_VERSION = Optional(STR), Optional(VERSION)

SCHEMA = {
    "os": {"id": OPT_STR, "version_id": OPT_STR, "arch": OPT_STR},
    "driver": Optional({"version": VERSION, "cuda_version": OPT_VERSION}),
    "nvidia_smi": {"present": BOOL, "error": OPT_STR},
    "gpus": Items({"index": INT, "name": STR, "compute_cap": STR, "memory_total_mib": Optional(INT)}),
    # The NVIDIA GPUs on PCI (docs/facts.md): absent in an older report, null where sysfs
    # could not be read.
    "pci_gpus": Optional(Items({"bus_id": STR, "vendor": STR, "device": STR, "class": STR})),
    "toolkits": Items({"home": STR, "version": OPT_VERSION, "nvcc_ok": BOOL}),
    "cuda_symlink": OPT_STR,
    "path_nvcc": Optional({"path": STR, "version": OPT_VERSION}),
    "login_env": Values(OPT_STR),
    "resolution": {"cuda_home": OPT_STR, "version": OPT_VERSION, "via": STR, "nvcc_ok": BOOL, "env_file": BOOL,
                   "arch_list_env": OPT_STR},
    "service_env": Optional(Values(OPT_STR)),
    "python": Optional({"version": VERSION}),
    "python_interpreters": Items({"path": STR, "version": VERSION}),
    # The operator's CPython (venv_python): null when the setting is empty; version and
    # the rest only from one that ran (root's alone).
    "venv_python": Optional({"path": STR, "file": Optional({"user": STR, "mode": STR, "kind": STR}),
                             "owner": OPT_STR, "blocked": OPT_STR, "real": OPT_STR, "ran": Optional(INT), "version": OPT_STR,
                             "releaselevel": OPT_STR, "pip": OPT_STR, "venv": OPT_STR}),
    "cuda_packages": Optional(Values(STR)),
    "torch": Optional({"version": VERSION, "cuda": OPT_VERSION, "arch_list": Items(STR), "arch_list_from": STR,
                       "error": STR}),
    "flashinfer": Optional({"version": VERSION}),
    "sglang": Optional({"version": VERSION}),
    # The unit's ExecStart program and the interpreter its "#!" line names: absent from
    # an older report.
    "entry_point": Optional({"path": STR, "script": Optional({"user": STR, "mode": STR, "kind": STR}),
                             "format": OPT_STR, "first_line": OPT_STR, "wrapper": OPT_STR, "interpreter": OPT_STR,
                             "interpreter_file": Optional({"user": STR, "mode": STR, "kind": STR}),
                             "interpreter_owner": OPT_STR, "interpreter_dir": OPT_STR, "venv_bin": OPT_STR}),
    "paths": Optional({role: Items({"path": STR, "user": STR, "mode": STR, "kind": STR})
                       for role in ("venv", "venv_target", "python", "env_file", "cache_dir")}),
    "apt": Optional({"sources": Items({"file": STR, "format": STR, "uris": Items(STR), "suites": Items(STR),
                                       "signed_by": OPT_STR, "trusted": BOOL}),
                     # keyring_paths (keyring -> its path chain, as in paths) is not listed: an
                     # older report has none; bringup/plan/repository.py reads it as "not probed" unless it
                     # has the documented shape, and then adopts no source.
                     "keyrings": Values(Optional(Items(STR)))}),
    "service_unit": Optional({"name": STR, "active_state": STR, "sub_state": STR, "result": STR,
                              "restarts": INT, "journal": Items(STR)}),
    "apt_locks": Items({"lock": STR, "pid": INT, "command": STR}),
    "account": Optional({"user": STR, "entry": Optional({"uid": INT, "gid": INT, "gecos": STR, "home": STR,
                                                         "shell": STR}),
                         "login_user": OPT_STR, "home": Optional({"path": STR, "user": STR, "mode": STR,
                                                                  "kind": STR})}),
    # The driver layer (docs/facts.md; the contract the driver findings read): absent or
    # null in an older report.
    "driver_layer": Optional({
        "module": {"loaded": BOOL, "version": OPT_VERSION, "flavour": OPT_STR, "banner": OPT_STR},
        "installed_module": Optional({"version": OPT_VERSION, "license": OPT_STR, "flavour": OPT_STR}),
        "nvml_libraries": Items(VERSION),
        "packages": Items({"name": STR, "version": STR, "held": BOOL}),
        "nouveau": {"loaded": BOOL, "blacklisted": BOOL},
        "nvswitch_count": INT,
        "units": Values({"load_state": STR, "active_state": STR, "unit_file_state": STR}),
        "gpus": Items({"index": INT, "bus_id": OPT_STR, "persistence_mode": OPT_STR, "mig_mode": OPT_STR,
                       "fabric_state": OPT_STR, "fabric_status": OPT_STR}),
        "kernel": {"release": STR, "headers": BOOL,
                   "installed": Items({"release": STR, "headers": BOOL, "initramfs": STR})},
        "dkms": Optional(Items({"module": STR, "version": STR, "kernel": STR, "status": STR})),
        "reboot_required": {"required": BOOL, "packages": Items(STR)},
        "iommu_args": Items(STR),
        "acs": Optional(Items({"gpu_bus_id": STR, "bridge": STR, "ctl": STR, "redirect": BOOL})),
        "topology": Optional(Items({"a": INT, "b": INT, "link": STR})),
    }),
    # Where service_model comes from (absent from an older report, null without a model).
    "model": Optional({"model": STR, "kind": STR, "path": OPT_STR, "dir": Optional({"user": STR, "mode": STR, "kind": STR}),
                       "cache": OPT_STR, "cache_via": OPT_STR, "entry": OPT_STR, "revision": OPT_STR, "refs_main": OPT_STR,
                       # Whether that snapshot is whole (null: no snapshot named).
                       "snapshot": Optional({"files": INT, "weights": INT, "incomplete": INT, "shards_missing": INT,
                                             "fetching": BOOL, "record": STR,
                                             "record_repo": OPT_STR, "record_revision": OPT_STR,
                                             "record_files": INT, "record_missing": INT}),
                       "config": Optional({"user": STR, "mode": STR, "kind": STR}), "readable": OPT_STR,
                       "chain": Items({"path": STR, "user": STR, "group": STR, "mode": STR, "kind": STR}),
                       "endpoint": OPT_STR, "offline": OPT_STR, "offline_by": OPT_STR, "token": BOOL,
                       "hub": Optional({"status": Optional(INT), "error": OPT_STR})}),
    "jit_cache": Optional({"base": OPT_STR, "modules": Items({"flashinfer": STR, "arch": STR, "module": STR}),
                           # The manifest is the service user's file: its shape is the
                           # planner's to judge (bringup/prewarm.py), a gap, not a refusal.
                           "prewarm": Optional({"manifest": ANY, "stale": ANY}), "toolchain": OPT_STR}),
}
# Keys a document must have; the others may be absent (an older report).
REQUIRED = ("os", "gpus")
# Keys of a nested object that may be absent: torch is either its versions or an error;
# venv_python's blocked is absent from an older report.
PARTIAL = {"torch", "toolkits", "resolution", "jit_cache", "driver", "paths", "venv_python"}


def _type_name(kind):
    return {str: "a string", int: "an integer", bool: "true or false"}.get(kind, "an object")


def _check(value, kind, where, partial):
    if kind == VERSION:
        try:
            Version(value if isinstance(value, str) else "")
        except InvalidVersion:
            raise FactsError(f"{where}: expected a version such as 3.11.2 or 580.95.05 (packaging.version), got "
                             f"{type(value).__name__} {shown(value)}") from None
        return
    if isinstance(kind, Values):
        if not isinstance(value, dict):
            raise FactsError(f"{where}: expected an object, got {type(value).__name__}")
        for key, item in value.items():
            _check(item, kind.kind, f"{where}[{shown(key)}]", partial)
        return
    if isinstance(kind, Optional):
        if value is not None:
            _check(value, kind.kind, where, partial)
        return
    if isinstance(kind, Items):
        if not isinstance(value, list):
            raise FactsError(f"{where}: expected a list, got {type(value).__name__}")
        for index, item in enumerate(value):
            _check(item, kind.kind, f"{where}[{index}]", partial)
        return
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            raise FactsError(f"{where}: expected an object, got {type(value).__name__}")
        for key, sub in kind.items():
            if key in value:
                _check(value[key], sub, f"{where}.{key}", partial)
            elif not partial:
                raise FactsError(f"{where}: missing {key!r}")
        return
    if kind is ANY:
        return
    # bool is an int in Python: keep them apart.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FactsError(f"{where}: expected {_type_name(kind)}, got {type(value).__name__} {shown(value)}")


def check(document):
    """Raise FactsError naming the first field that does not fit docs/facts.md.

    >>> check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [{"index": 0}]})
    Traceback (most recent call last):
    ...
    bringup.facts_schema.FactsError: facts.gpus[0]: missing 'name'
    >>> check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [], "driver": {"version": 580}})
    Traceback (most recent call last):
    ...
    bringup.facts_schema.FactsError: facts.driver.version: expected a version such as 3.11.2 or 580.95.05 \
(packaging.version), got int 580
    >>> check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [],
    ...        "apt": {"sources": [], "keyrings": {"/k.gpg": 5}}})
    Traceback (most recent call last):
    ...
    bringup.facts_schema.FactsError: facts.apt.keyrings['/k.gpg']: expected a list, got int
    """
    if not isinstance(document, dict):
        raise FactsError(f"facts: expected an object (docs/facts.md), got {type(document).__name__}")
    for key in REQUIRED:
        if key not in document:
            raise FactsError(f"facts: missing {key!r} (is this a facts document or a validate report?)")
    for key, kind in SCHEMA.items():
        if key in document:
            _check(document[key], kind, f"facts.{key}", partial=key in PARTIAL)
