"""Parse the raw output of files/probe.sh into the facts document (docs/facts.md).

Pure functions: they take the probe's lines and return plain data, so each one is
tested on recorded outputs. Malformed input raises ValueError; the fact turns it
into pyinfra's FactProcessError so only that host fails. ``PARTS`` maps each key of
the document to the probe sections it is made from, so a narrow fact runs only
those sections and parses only its key.
"""

import json
import re
import shlex
from dataclasses import dataclass, field

from bringup.apt_sources import keyring_fingerprints, source_entries
from facts.driver_layer import driver_layer
from facts.pci import pci_gpus

SECTION_HEADER = re.compile(r"^@@ (?P<name>[a-z-]+) rc=(?P<rc>-?\d+)(?: (?P<key>[a-z_]+)=(?P<value>.*))?$")
# The probe writes every body line behind this mark (files/probe.sh emit): a line a
# program printed can never start a section, whatever it holds.
BODY_MARK = "|"
# Longest piece of a bad line quoted in an error (one line per host, never a dump).
QUOTE_LIMIT = 120
NVCC_RELEASE = re.compile(r"release (\d+\.\d+),")
SMI_HEADER = re.compile(r"Driver Version:\s*(?P<driver>\S+)\s+CUDA Version:\s*(?P<cuda>\S+)")


@dataclass
class Section:
    """One ``@@ name rc=N [key=value]`` block of probe output and its body lines."""

    name: str
    rc: int
    attr: tuple = ()
    lines: list = field(default_factory=list)

    @property
    def text(self):
        return "\n".join(self.lines)

    def attribute(self, key):
        """The header's ``key=value``, which this section must have.

        >>> Section("path", 0, ("role", "venv")).attribute("role")
        'venv'
        """
        if not self.attr or self.attr[0] != key:
            raise ValueError(f"probe section {self.name} has no {key}= in its header")
        return self.attr[1]


def _quoted(line):
    """A line as an error quotes it: repr, cut to QUOTE_LIMIT characters.

    >>> _quoted("x" * 200)[-4:]
    "...'"
    """
    return repr(line[:QUOTE_LIMIT]) if len(line) <= QUOTE_LIMIT else repr(line[:QUOTE_LIMIT])[:-1] + "...'"


def split_sections(lines):
    """Split probe output into Sections: a header (``@@ name rc=N [key=value]``), then
    its body lines, each behind ``|`` (stripped here). An unmarked line, a marked line
    before the first header or a malformed header is an error: no program the probe
    runs can open a section or hide its output among the probe's.

    >>> [(s.name, s.lines) for s in split_sections(["@@ uname rc=0", "|x86_64"])]
    [('uname', ['x86_64'])]
    """
    sections = []
    for number, line in enumerate(lines, 1):
        if line.startswith(BODY_MARK) and sections:
            sections[-1].lines.append(line[len(BODY_MARK):])
        elif line.startswith("@@ "):
            match = SECTION_HEADER.match(line)
            if not match:
                raise ValueError(f"probe output line {number} is a malformed section header: {_quoted(line)}")
            attr = (match["key"], match["value"]) if match["key"] else ()
            sections.append(Section(match["name"], int(match["rc"]), attr))
        elif line.strip():
            where = "does not start with a section header" if not sections else "has a line outside the probe's framing"
            raise ValueError(f"probe output {where} (line {number}): {_quoted(line)}")
    return sections


def parse_os_release(text, machine):
    """``/etc/os-release`` and ``uname -m`` -> ``{"id", "version_id", "arch"}``.

    >>> parse_os_release('ID=debian\\nVERSION_ID="12"', "x86_64")
    {'id': 'debian', 'version_id': '12', 'arch': 'x86_64'}
    """
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            parsed = shlex.split(value) if value else [""]
            values[key.strip()] = parsed[0] if parsed else ""
    return {"id": values.get("ID"), "version_id": values.get("VERSION_ID"), "arch": machine.strip() or None}


def parse_nvcc_release(text):
    """The ``X.Y`` release ``nvcc --version`` prints, or None.

    >>> parse_nvcc_release("Cuda compilation tools, release 12.8, V12.8.93")
    '12.8'
    """
    match = NVCC_RELEASE.search(text or "")
    return match.group(1) if match else None


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


def parse_assignments(text):
    """``KEY=value`` lines -> dict, empty values kept as None.

    >>> parse_assignments("CUDA_HOME=\\nvia=PATH")
    {'CUDA_HOME': None, 'via': 'PATH'}
    """
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value or None
    return values


def toolkit_entry(section):
    """A ``toolkit``/``resolved-nvcc`` section -> ``{"home", "version", "nvcc_ok", ...}``."""
    home = section.attr[1] if section.attr else None
    version = parse_nvcc_release(section.text) if section.rc == 0 else None
    entry = {"home": home, "version": version, "nvcc_ok": version is not None}
    if section.rc == 127 and not section.lines:
        entry["error"] = "no bin/nvcc"
    elif version is None:
        entry["error"] = (section.text.strip().splitlines() or [f"nvcc exited {section.rc}"])[-1]
    return entry


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


def resolution(by_name, torch):
    """What FlashInfer resolves in the service environment (see files/probe.sh)."""
    service = by_name.get("service-env")
    values = parse_assignments(service.text) if service else {}
    home, via = values.get("home"), values.get("via") or "none"
    nvcc = by_name.get("resolved-nvcc")
    version = parse_nvcc_release(nvcc.text) if nvcc and nvcc.rc == 0 else None
    result = {
        "cuda_home": home,
        "version": version,
        "via": via,
        "nvcc_ok": version is not None,
        "env_file": values.get("env_file") == "present",
        "env_file_refused": values.get("env_file") == "refused",
        "path": values.get("PATH"),
        "arch_list_env": values.get("FLASHINFER_CUDA_ARCH_LIST"),
        "workspace_base": values.get("FLASHINFER_WORKSPACE_BASE"),
    }
    if version is None and torch and torch.get("cuda"):
        # get_cuda_version() falls back to torch.version.cuda when nvcc cannot run.
        result["version"] = torch["cuda"]
        result["via"] = f"{via}+torch-fallback"
    return result


def service_env_values(section):
    """The asked-for keys' values as the service's env file sets them (absent keys omitted).

    >>> service_env_values(Section("service-env", 0, (), ["home=/x", "env.CUDA_HOME=/opt/cuda-12.8"]))
    {'CUDA_HOME': '/opt/cuda-12.8'}
    """
    if section is None:
        return {}
    return {key[len("env."):]: value or "" for key, value in parse_assignments(section.text).items()
            if key.startswith("env.")}


def login_path_nvcc(by_name):
    """The first nvcc on a login shell's PATH, with the release it reports."""
    section = by_name.get("path-nvcc")
    if section is None:
        return None
    return {"path": section.attribute("path"), "version": parse_nvcc_release(section.text) if section.rc == 0 else None}


def venv_stack(section):
    """torch/flashinfer/sglang of the venv, or (None, None, None) without a venv."""
    if section is None or section.rc == 127:
        return None, None, None
    if section.rc != 0:
        return {"error": section.text.strip()}, None, None
    try:
        data = json.loads(section.lines[-1])
    except (IndexError, json.JSONDecodeError) as error:
        raise ValueError(f"venv probe printed no JSON: {_quoted(section.text)}") from error
    if not isinstance(data, dict):
        raise ValueError(f"venv probe printed no JSON object: {_quoted(section.lines[-1])}")
    torch = data.get("torch") or ({"error": data["torch_error"]} if "torch_error" in data else None)
    flashinfer = {"version": data["flashinfer"]} if data.get("flashinfer") else None
    sglang = {"version": data["sglang"]} if data.get("sglang") else None
    return torch, flashinfer, sglang


def prewarm_state(section):
    """The pre-warm manifest and the modules ninja would rebuild, or None without one."""
    if section is None or section.rc != 0:
        return None
    try:
        state = json.loads(section.lines[-1])
    except (IndexError, json.JSONDecodeError) as error:
        raise ValueError(f"prewarm probe printed no JSON: {_quoted(section.text)}") from error
    if not isinstance(state, dict) or not isinstance(state.get("manifest"), dict) or \
            not isinstance(state.get("stale"), list):
        raise ValueError(f"prewarm probe printed no manifest and stale list: {_quoted(section.lines[-1])}")
    return state


def jit_cache(section, prewarm=None, toolchain=None):
    """Compiled JIT modules under the service's FlashInfer workspace, the pre-warm state
    and the digest of the service's JIT toolchain (files/probe.sh probe_jit_cache)."""
    cache_dir = section.attr[1] if section is not None and section.attr else None
    modules = []
    if section is not None and section.rc == 0:
        for line in section.lines:
            parts = line.strip().lstrip("./").split("/")
            if len(parts) == 5 and parts[2] == "cached_ops":
                modules.append({"flashinfer": parts[0], "arch": parts[1], "module": parts[3]})
    digest = toolchain.lines[0].strip() if toolchain is not None and toolchain.rc == 0 and toolchain.lines else None
    return {"base": cache_dir, "modules": modules, "prewarm": prewarm, "toolchain": digest}


def path_chains(by_name):
    """``path`` sections -> {role: [{"path", "user", "mode", "kind"}, ...]} from the path up to /.

    >>> path_chains({"path": [Section("path", 0, ("role", "venv"), ["root 755 directory|/opt", "root 755 directory|/"])]})
    {'venv': [{'path': '/opt', 'user': 'root', 'mode': '755', 'kind': 'directory'}, {'path': '/', 'user': 'root', \
'mode': '755', 'kind': 'directory'}]}
    """
    chains = {}
    for section in by_name.get("path", []):
        role = section.attribute("role")
        if role in chains:
            raise ValueError(f"probe output has two path sections for {role}")
        chain = []
        for line in section.lines:
            if "|" not in line:
                continue
            chain.append(_stat_line(line, f"path line for {role}"))
        chains[role] = chain
    return chains


def service_unit(by_name):
    """The ``unit``/``unit-journal`` sections -> the service unit's state and, when the
    probe read it, the end of its journal; None where systemd does not run or the
    unit is not loaded.

    >>> service_unit({"unit": Section("unit", 0, ("name", "sglang.service"), ["LoadState=loaded",
    ...     "ActiveState=failed", "SubState=failed", "Result=exit-code", "NRestarts=0"]),
    ...     "unit-journal": Section("unit-journal", 0, (), ["RuntimeError: x"])})["journal"]
    ['RuntimeError: x']
    """
    section = by_name.get("unit")
    if section is None or section.rc != 0 or not section.attr:
        return None
    values = parse_assignments(section.text)
    if values.get("LoadState") in (None, "not-found"):
        return None
    restarts = values.get("NRestarts") or ""
    journal = by_name.get("unit-journal")
    lines = list(journal.lines) if journal else []
    while lines and not lines[-1]:
        lines.pop()
    return {
        "name": section.attr[1],
        "active_state": values.get("ActiveState") or "",
        "sub_state": values.get("SubState") or "",
        "result": values.get("Result") or "",
        "restarts": int(restarts) if restarts.isdigit() else 0,
        "journal": lines,
    }


def _file_state(text, what):
    """``owner mode kind`` (``stat -L -c '%U %a %F'``) -> {"user", "mode", "kind"}; None
    for "" (nothing there).

    >>> _file_state("root 755 regular file", "script")
    {'user': 'root', 'mode': '755', 'kind': 'regular file'}
    """
    if not text:
        return None
    fields = text.split(" ", 2)
    if len(fields) != 3 or not fields[1].isdigit():
        raise ValueError(f"unexpected {what} state: {_quoted(text)}")
    return dict(zip(("user", "mode", "kind"), fields))


def entry_point(section):
    """The ``entry-point`` section -> the unit's ExecStart program as the kernel runs it
    (files/probe.sh probe_entry_point): the script, its first line, the interpreter it
    names and that interpreter's state; None when the probe did not look.

    >>> found = entry_point(Section("entry-point", 0, ("path", "/v/bin/sglang"), ["script=root 755 regular file",
    ...     "format=script", "line=#!/old/venv/bin/python", "wrapper=", "interpreter=/old/venv/bin/python", "interpreter_file=",
    ...     "interpreter_owner=", "interpreter_dir=", "venv_bin=/v/bin"]))
    >>> found["interpreter"], found["interpreter_file"], found["venv_bin"]
    ('/old/venv/bin/python', None, '/v/bin')
    """
    if section is None:
        return None
    path = section.attribute("path")
    values = parse_assignments(section.text) if section.rc == 0 else {}
    return {
        "path": path,
        "script": _file_state(values.get("script"), f"{path}"),
        "format": values.get("format"),
        "first_line": values.get("line"),
        "wrapper": values.get("wrapper"),
        "interpreter": values.get("interpreter"),
        "interpreter_file": _file_state(values.get("interpreter_file"), f"{path}'s interpreter"),
        "interpreter_owner": values.get("interpreter_owner"),
        "interpreter_dir": values.get("interpreter_dir"),
        "venv_bin": values.get("venv_bin"),
    }


def _chain_line(line):
    """``owner group mode kind|path`` (probe.sh probe_model: stat -c '%U %G %a %F|%n') ->
    {"path", "user", "group", "mode", "kind"}.

    >>> _chain_line("root root 755 directory|/srv/models")
    {'path': '/srv/models', 'user': 'root', 'group': 'root', 'mode': '755', 'kind': 'directory'}
    """
    attributes, _, path = line.partition("|")
    fields = attributes.split(" ", 3)
    if len(fields) != 4 or not fields[2].isdigit():
        raise ValueError(f"unexpected model path line: {_quoted(line)}")
    return {"path": path, **dict(zip(("user", "group", "mode", "kind"), fields))}


SNAPSHOT_COUNTS = ("files", "weights", "incomplete", "shards_missing")
RECORD_COUNTS = ("files", "missing")


def _count(values, key):
    value = values.get(key) or ""
    if not value.strip().isdigit():
        raise ValueError(f"unexpected model snapshot count {key}: {_quoted(value)}")
    return int(value.strip())


def model_snapshot(values):
    """The snapshot lines of the ``model`` section (probe.sh SNAPSHOT_STATE, read as the
    cache's reader) -> {"files", "weights", "incomplete", "shards_missing", "fetching", "record"
    (none, present, refused), and the record's "record_repo", "record_revision", "record_files",
    "record_missing" (None and 0 without one)}; None without them (no snapshot named, a
    local model, an older probe).

    >>> model_snapshot({"snapshot_files": "3", "snapshot_weights": "1", "snapshot_incomplete": "0",
    ...                 "snapshot_shards_missing": "0", "snapshot_fetching": "no", "record": "none"})
    {'files': 3, 'weights': 1, 'incomplete': 0, 'shards_missing': 0, 'fetching': False, 'record': 'none', \
'record_repo': None, 'record_revision': None, 'record_files': 0, 'record_missing': 0}
    >>> model_snapshot({"revision": "ab"}) is None
    True
    """
    if "snapshot_files" not in values:
        return None
    found = {key: _count(values, f"snapshot_{key}") for key in SNAPSHOT_COUNTS}
    if values.get("snapshot_fetching") not in ("yes", "no"):
        raise ValueError(f"unexpected model snapshot_fetching: {_quoted(values.get('snapshot_fetching') or '')}")
    found["fetching"] = values["snapshot_fetching"] == "yes"
    record = values.get("record") or "refused"
    if record not in ("none", "present", "refused"):
        raise ValueError(f"unexpected model snapshot record: {_quoted(record)}")
    found["record"] = record
    present = record == "present"
    found.update({"record_repo": values.get("record_repo") if present else None,
                  "record_revision": values.get("record_revision") if present else None,
                  **{f"record_{key}": _count(values, f"record_{key}") if present else 0 for key in RECORD_COUNTS}})
    return found


def model_source(section):
    """The ``model`` section -> where ``service_model`` would come from (files/probe.sh
    probe_model): a local directory or a hub id, its config.json's state and whether
    the service user reads it, the hub cache and snapshot, and what the hub answered;
    None without a model (or from an older probe).

    >>> found = model_source(Section("model", 0, ("model", "Qwen/Qwen3-0.6B"), ["kind=hub", "offline=", "token=unset",
    ...     "endpoint=https://huggingface.co", "cache=/var/lib/sglang/.cache/huggingface/hub", "via=default",
    ...     "entry=/var/lib/sglang/.cache/huggingface/hub/models--Qwen--Qwen3-0.6B", "revision=", "config=",
    ...     "hub_error=[Errno -2] Name or service not known"]))
    >>> found["kind"], found["config"], found["hub"]
    ('hub', None, {'status': None, 'error': '[Errno -2] Name or service not known'})
    """
    if section is None or section.rc != 0:
        return None
    values = parse_assignments("\n".join(line for line in section.lines if not line.startswith("chain=")))
    if values.get("kind") not in ("path", "hub"):
        raise ValueError(f"unexpected model kind: {_quoted(values.get('kind') or '')}")
    status = values.get("hub_status")
    if status is not None and not status.isdigit():
        raise ValueError(f"unexpected hub status: {_quoted(status)}")
    asked = "hub_status" in values or "hub_error" in values
    return {
        "model": section.attribute("model"),
        "kind": values["kind"],
        "path": values.get("path"),
        "dir": _file_state(values.get("dir"), "model directory"),
        "cache": values.get("cache"),
        "cache_via": values.get("via"),
        "entry": values.get("entry"),
        "revision": values.get("revision"),
        "refs_main": values.get("refs_main"),
        "snapshot": model_snapshot(values),
        "config": _file_state(values.get("config"), "model config.json"),
        "readable": values.get("readable"),
        "chain": [_chain_line(line[len("chain="):]) for line in section.lines if line.startswith("chain=")],
        "endpoint": values.get("endpoint"),
        "offline": values.get("offline"),
        "offline_by": values.get("offline_by"),
        "token": values.get("token") == "set",
        "hub": {"status": int(status) if status else None,
                "error": values.get("hub_error") or (None if status else "no answer")} if asked else None,
    }


# Sections that appear once per item (a toolkit, a path chain, an apt file or keyring).
REPEATED = ("toolkit", "path", "python-alt", "apt-source", "apt-keyring")


def _stat_line(line, what):
    """``owner mode kind|path`` (probe.sh's path_chain: stat -c '%U %a %F|%n') ->
    {"path", "user", "mode", "kind"}; ``what`` names the line in the error.

    >>> _stat_line("root 755 directory|/opt", "path line")
    {'path': '/opt', 'user': 'root', 'mode': '755', 'kind': 'directory'}
    """
    attributes, _, path = line.partition("|")
    fields = attributes.split(" ", 2)
    if len(fields) != 3 or not fields[1].isdigit():
        raise ValueError(f"unexpected {what}: {_quoted(line)}")
    user, mode, kind = fields
    return {"path": path, "user": user, "mode": mode, "kind": kind}


def apt_keyring(section):
    """An ``apt-keyring`` section -> (its primary-key fingerprints, None when unreadable;
    its path chain from the keyring up to /, [] from a probe that did not read it).

    >>> apt_keyring(Section("apt-keyring", 1, ("file", "/k.gpg"), ["alice 644 regular file|/k.gpg",
    ...                                                             "root 755 directory|/"]))
    (None, [{'path': '/k.gpg', 'user': 'alice', 'mode': '644', 'kind': 'regular file'}, \
{'path': '/', 'user': 'root', 'mode': '755', 'kind': 'directory'}])
    """
    chain = [_stat_line(line, f"keyring path line for {section.attribute('file')}") for line in section.lines
             if "|" in line]
    keys = [line.strip() for line in section.lines if line.strip() and "|" not in line]
    fingerprints = keyring_fingerprints(keys[-1]) if section.rc == 0 and keys else None
    return fingerprints, chain


def apt_state(by_name):
    """The node's apt sources (every enabled entry), the fingerprints of the keyrings
    they name (None for one that could not be read) and who may change each keyring."""
    files = {section.attribute("file"): section.text for section in by_name.get("apt-source", [])}
    keyrings = {section.attribute("file"): apt_keyring(section) for section in by_name.get("apt-keyring", [])}
    return {"sources": source_entries(files), "keyrings": {path: keys for path, (keys, _) in keyrings.items()},
            "keyring_paths": {path: chain for path, (_, chain) in keyrings.items()}}


def index_sections(lines):
    """Probe output lines -> {section name: Section}, toolkits as a list under "toolkit".
    A second section of a name the probe writes once is an error (never "the last wins").

    >>> sorted(index_sections(["@@ uname rc=0", "|x86_64", "@@ toolkit rc=127 home=/opt/cuda-12.8"]))
    ['apt-keyring', 'apt-source', 'path', 'python-alt', 'toolkit', 'uname']
    """
    by_name = {name: [] for name in REPEATED}
    for section in split_sections(lines):
        if section.name in REPEATED:
            by_name[section.name].append(section)
        elif section.name in by_name:
            raise ValueError(f"probe output has two {section.name} sections")
        else:
            by_name[section.name] = section
    return by_name


def _os(by_name):
    if "os-release" not in by_name:
        raise ValueError("probe output has no os-release section")
    return parse_os_release(by_name["os-release"].text, by_name.get("uname", Section("uname", 0)).text)


def _python(by_name):
    python = by_name.get("python")
    return {"version": python.text.split()[-1]} if python and python.rc == 0 and python.text.strip() else None


def python_interpreters(sections):
    """``python-alt`` sections -> [{"path", "version"}] of the interpreters that answered.

    >>> python_interpreters([Section("python-alt", 0, ("path", "/usr/bin/python3.11"), ["Python 3.11.0rc1"])])
    [{'path': '/usr/bin/python3.11', 'version': '3.11.0rc1'}]
    """
    return [{"path": s.attribute("path"), "version": s.text.split()[-1]}
            for s in sections if s.rc == 0 and s.text.strip()]


def venv_python(section):
    """The ``venv-python`` section -> the operator's CPython (``venv_python``) as the probe
    found it (files/probe.sh probe_venv_python): its state, who may change it and the
    first path that lets them (``blocked``: it, a link on its way, a directory above them
    or a file it loads from its prefix, files/root-may-run.sh; None: root alone), and,
    only when it ran, what it said; None when the setting is empty.

    >>> found = venv_python(Section("venv-python", 0, ("path", "/opt/py/bin/python3.11"), [
    ...     "file=root 755 regular file", "owner=", "real=/opt/py/bin/python3.11", "ran=0", "version=3.11.2",
    ...     "releaselevel=final", "pip=22.3.1", "venv=ok"]))
    >>> found["file"]["user"], found["owner"], found["ran"], found["version"], found["venv"]
    ('root', None, 0, '3.11.2', 'ok')
    """
    if section is None:
        return None
    values = parse_assignments(section.text)
    ran = values.get("ran")
    return {
        "path": section.attribute("path"),
        "file": _file_state(values.get("file"), f"{section.attribute('path')}"),
        "owner": values.get("owner"),
        "blocked": values.get("blocked"),
        "real": values.get("real"),
        "ran": int(ran) if ran and ran.isdigit() else None,
        "version": values.get("version"),
        "releaselevel": values.get("releaselevel"),
        "pip": values.get("pip"),
        "venv": values.get("venv"),
    }


def deb_packages(section):
    """``dpkg-query`` lines (``status|name|version``) -> {name: version} of installed
    packages (``ii``, or ``hi`` when held); None where dpkg-query does not exist.

    >>> deb_packages(Section("deb-packages", 0, (), ["ii |cuda-nvcc-13-0|13.0.88-1", "rc |cuda-nvcc-12-8|12.8.93-1"]))
    {'cuda-nvcc-13-0': '13.0.88-1'}
    """
    if section is None or section.rc != 0:
        return None
    packages = {}
    for line in section.lines:
        fields = line.strip().split("|")
        if len(fields) == 3 and fields[0].strip() in ("ii", "hi"):
            packages[fields[1]] = fields[2]
    return packages


def _cuda_symlink(by_name):
    link = by_name.get("cuda-link")
    return (link.text.strip() or None) if link else None


def _login_env(by_name):
    return parse_assignments(by_name["login-env"].text) if "login-env" in by_name else {}


def _venv_part(index):
    return lambda by_name: venv_stack(by_name.get("venv"))[index]


def apt_lock_holders(section):
    """The ``apt-locks`` section: ``<lock file> <pid> <command line>`` per holder.

    >>> apt_lock_holders(Section("apt-locks", 0, (), ["/var/lib/dpkg/lock-frontend 812 /usr/bin/python3 "
    ...                                                "/usr/bin/unattended-upgrade"]))
    [{'lock': '/var/lib/dpkg/lock-frontend', 'pid': 812, 'command': '/usr/bin/python3 /usr/bin/unattended-upgrade'}]
    """
    holders = []
    for line in section.lines if section else []:
        lock, _, rest = line.strip().partition(" ")
        pid, _, command = rest.partition(" ")
        if lock and pid.isdigit():
            holders.append({"lock": lock, "pid": int(pid), "command": command.strip()})
    return holders


def service_account(by_name):
    """The ``account``/``account-login``/``account-home`` sections -> the service account as
    found: its passwd entry (None: no such account), the user the probe ran for, and what
    is at its planned home (None: nothing). None when the probe did not look.

    >>> found = service_account({"account": Section("account", 0, ("user", "sshd"),
    ...     ["sshd:x:101:65534::/run/sshd:/usr/sbin/nologin"]), "account-login": Section("account-login", 0, (),
    ...     ["ops"]), "account-home": Section("account-home", 1, ("path", "/var/lib/sshd"))})
    >>> found["entry"], found["login_user"], found["home"]
    ({'uid': 101, 'gid': 65534, 'gecos': '', 'home': '/run/sshd', 'shell': '/usr/sbin/nologin'}, 'ops', None)
    """
    section = by_name.get("account")
    if section is None or not section.attr:
        return None
    entry = None
    if section.rc == 0 and section.lines:
        fields = section.lines[0].split(":")
        if len(fields) != 7 or not fields[2].isdigit() or not fields[3].isdigit():
            raise ValueError(f"unexpected passwd entry for {section.attr[1]}: {section.lines[0]!r}")
        entry = {"uid": int(fields[2]), "gid": int(fields[3]), "gecos": fields[4], "home": fields[5],
                 "shell": fields[6]}
    login = by_name.get("account-login")
    home_section = by_name.get("account-home")
    home = None
    if home_section is not None and home_section.rc == 0 and home_section.lines and home_section.attr:
        user, mode, kind = (home_section.lines[0].split(" ", 2) + ["", ""])[:3]
        home = {"path": home_section.attr[1], "user": user, "mode": mode, "kind": kind}
    return {"user": section.attr[1], "entry": entry, "login_user": (login.text.strip() or None) if login else None,
            "home": home}


# key of the facts document -> (probe sections it needs, how it is parsed)
PARTS = {
    "os": (("os",), _os),
    "driver": (("gpus",), lambda by_name: gpu_and_driver(by_name)[1]),
    "nvidia_smi": (("gpus",), lambda by_name: gpu_and_driver(by_name)[2]),
    "gpus": (("gpus",), lambda by_name: gpu_and_driver(by_name)[0]),
    "pci_gpus": (("pci",), pci_gpus),
    "toolkits": (("toolkits",), lambda by_name: [toolkit_entry(s) for s in by_name["toolkit"]]),
    "cuda_symlink": (("toolkits",), _cuda_symlink),
    "path_nvcc": (("login",), login_path_nvcc),
    "login_env": (("login",), _login_env),
    "resolution": (("service", "venv"), lambda by_name: resolution(by_name, venv_stack(by_name.get("venv"))[0])),
    "service_env": (("service",), lambda by_name: service_env_values(by_name.get("service-env"))),
    "python": (("python",), _python),
    "python_interpreters": (("python",), lambda by_name: python_interpreters(by_name["python-alt"])),
    "venv_python": (("python",), lambda by_name: venv_python(by_name.get("venv-python"))),
    "cuda_packages": (("packages",), lambda by_name: deb_packages(by_name.get("deb-packages"))),
    "torch": (("venv",), _venv_part(0)),
    "flashinfer": (("venv",), _venv_part(1)),
    "sglang": (("venv",), _venv_part(2)),
    "entry_point": (("entry_point",), lambda by_name: entry_point(by_name.get("entry-point"))),
    "paths": (("paths",), path_chains),
    "apt": (("apt",), apt_state),
    "service_unit": (("unit",), service_unit),
    "apt_locks": (("apt_locks",), lambda by_name: apt_lock_holders(by_name.get("apt-locks"))),
    "account": (("account",), service_account),
    "driver_layer": (("driver_layer",), driver_layer),
    "model": (("model",), lambda by_name: model_source(by_name.get("model"))),
    "jit_cache": (("prewarm", "jit_cache"),
                  lambda by_name: jit_cache(by_name.get("jit-cache"), prewarm_state(by_name.get("prewarm")),
                                            by_name.get("toolchain"))),
}


def sections_for(*keys):
    """The probe sections that produce these keys of the document, in probe order.

    >>> sections_for("gpus", "driver")
    ('gpus',)
    """
    wanted = {section for key in keys for section in PARTS[key][0]}
    order = [section for sections, _ in PARTS.values() for section in sections]
    return tuple(dict.fromkeys(section for section in order if section in wanted))


def build_document(lines, keys=None):
    """Probe output lines (files/probe.sh) -> the facts document (docs/facts.md),
    or only ``keys`` of it (from the sections ``sections_for(*keys)`` ran)."""
    by_name = index_sections(lines)
    return {key: PARTS[key][1](by_name) for key in (keys or PARTS)}
