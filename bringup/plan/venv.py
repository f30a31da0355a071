"""The SGLang venv: for a managed one, the CPython it is built with and its locks; the
venv the node has (broken, another stack, unreadable to the service user).

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> from bringup.locks import LockFiles
    >>> found = []
    >>> venv = venv_plan(PlanContext.of({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"},
    ...                                  "python": {"version": "3.11.2"}}, Config(), LockFiles(), found.append))
    >>> venv.python, venv.lock, found
    ('/usr/bin/python3', 'files/locks/sglang-0.5.23-cp311-x86_64.txt', [])
"""

import re

from bringup import locks as lockfiles
from bringup.findings import BLOCKER, FIX, INFO, Finding
from bringup.plan.model import MIN_PYTHON, SYSTEM_PYTHON, VENV_SYSTEM_PACKAGES, VenvPlan
from bringup.platforms import distribution, venv_python
from bringup.venv import index_options
from bringup.versions import parse, same_major_minor


def venv_plan(context):
    """The venv deploy builds (managed) or uses: the CPython and locks it is built with
    (PYTHON_TOO_OLD, VENV_LOCK_MISMATCH, VENV_LOCK_MISSING, LOCK_OMITS_PACKAGE), its
    paths and the helpers that build it."""
    config, layout = context.config, context.layout
    python = _python(context)
    lock, uv_lock = _venv_locks(context, python)
    recorded = (context.facts.get("torch") or {}).get("arch_list_from") == "record"
    return VenvPlan(managed=config.venv_managed, path=layout.venv, dirs=layout.venvs, locks=layout.venv_locks,
                    tools=layout.venv_tools, cache=layout.venv_download_cache,
                    python=python.path if python and python.path else SYSTEM_PYTHON,
                    lock=lock, uv_lock=uv_lock, installer=config.venv_installer,
                    sources=tuple(index_options(config.venv_index_url, config.venv_extra_index_urls,
                                                config.venv_find_links, config.venv_no_index)),
                    builder=layout.helper("build-venv.sh"),
                    system_packages=VENV_SYSTEM_PACKAGES + (python.packages if python else ()),
                    python_version=python.version if python else "",
                    torch_record=layout.torch_record, torch_info=layout.helper("torch_info.py"),
                    torch_recorded=recorded,
                    session_bound=layout.helper("session-bound"))


def _python(context):
    """The CPython the managed venv is built with (bringup.platforms.venv_python), or None
    for an external venv; PYTHON_TOO_OLD when python3 is older than SGLang needs."""
    facts, config, add = context.facts, context.config, context.add
    if not config.venv_managed:
        return None
    os_facts = facts.get("os") or {}
    dist = distribution(os_facts.get("id"), os_facts.get("version_id"))
    python3 = (facts.get("python") or {}).get("version")
    found = {entry["path"]: entry["version"] for entry in facts.get("python_interpreters") or []}
    choice = venv_python(dist, python3, found, MIN_PYTHON)
    seen = f"python3 {python3}" if python3 else "no python3"
    if choice.source == "none":
        where = f"{dist.name}'s archive has" if dist else "this OS is not in this release's table and has"
        add(Finding("PYTHON_TOO_OLD", BLOCKER,
                    f"the node has {seen}; SGLang needs CPython >= {MIN_PYTHON} and {where} none",
                    "use Debian 12/13 or Ubuntu 22.04/24.04 (their archives have CPython >= 3.11), or an "
                    "external venv (venv_managed: false)"))
    elif choice.unusable:
        add(Finding("PYTHON_UNUSABLE", BLOCKER,
                    f"the node has {seen}; the CPython {dist.name}'s archive adds for SGLang, {choice.path}, cannot run "
                    f"the stack: {choice.unusable}",
                    "use Ubuntu 24.04 (CPython 3.12), or an external venv (venv_managed: false) built with a final "
                    "CPython >= 3.11"))
    elif choice.source == "install":
        note = f" ({choice.note})" if choice.note else ""
        add(Finding("PYTHON_TOO_OLD", FIX,
                    f"the node has {seen}; SGLang needs CPython >= {MIN_PYTHON}",
                    f"deploy installs {', '.join(choice.packages)} from {dist.name}'s archive and builds the venv "
                    f"with {choice.path}{note}"))
    return choice


def _venv_locks(context, python):
    """The venv lock and uv's bootstrap lock for the CPython the venv is built with and
    the node's CPU: the explicit ``venv_lock``, else the one ``make lock`` wrote for them."""
    config, locks, add = context.config, context.locks, context.add
    if not config.venv_managed or python is None or not python.path:
        return config.venv_lock, ""
    node = (python.version, context.machine)
    target = config.lock_target
    if config.venv_lock:
        lock = config.venv_lock
        if target and target != node:
            add(Finding("VENV_LOCK_MISMATCH", BLOCKER,
                        f"{lock} is resolved for CPython {target[0]} on {target[1]}; "
                        f"the venv is built with CPython {node[0]} ({python.path}) on {node[1]}",
                        f"leave venv_lock empty for {lockfiles.sglang_lock_name(config.stack_sglang, *node)}, or "
                        f"generate a lock for CPython {node[0]} on {node[1]} (`make lock`) and set venv_lock to it"))
    else:
        lock = lockfiles.sglang_lock_name(config.stack_sglang, *node)
    uv_lock = lockfiles.uv_lock_name(*(target or node))
    needed = [lock] + ([uv_lock] if config.venv_installer == "uv" else [])
    for path in needed:
        if locks.read(path) is None:
            add(Finding("VENV_LOCK_MISSING", BLOCKER,
                        f"no lock for CPython {node[0]} on {node[1]}: {path} does not exist",
                        "run `make lock` (it writes every supported CPython and CPU from files/locks/*.in), "
                        "or set venv_lock to a lock made for this node"))
            return lock, uv_lock
    _check_lock_omissions(context, lock)
    return lock, uv_lock


def _check_lock_omissions(context, lock):
    """What the venv lock leaves out (its ``omits`` header) and what the node then cannot do."""
    config, add = context.config, context.add
    known = {omission.package: omission for group in lockfiles.OMISSIONS.values() for omission in group}
    for package in lockfiles.read_header(context.locks.read(lock))["omits"]:
        omission = known.get(package)
        if omission is None:
            add(Finding("LOCK_OMITS_PACKAGE", INFO, f"{lock} omits {package}", "nothing to do unless you need it"))
            continue
        if re.search(omission.service_args, config.service_args):
            add(Finding("LOCK_OMITS_PACKAGE", BLOCKER,
                        f"service_args {config.service_args!r} need {package}, which {lock} omits "
                        f"({omission.reason}): {omission.unavailable} is unavailable on this node",
                        f"drop {omission.unavailable} from service_args (the default grammar backend, xgrammar, "
                        "works), or use a node whose CPython has the wheel"))
        else:
            add(Finding("LOCK_OMITS_PACKAGE", INFO,
                        f"{lock} omits {package} ({omission.reason}): {omission.unavailable} is unavailable "
                        "on this node", f"nothing to do unless you need {omission.unavailable}"))


def check_venv(context):
    """The venv the node has: torch that does not import, or (managed) another stack."""
    facts, config, add = context.facts, context.config, context.add
    torch, flashinfer = facts.get("torch"), facts.get("flashinfer")
    if torch and torch.get("error"):
        add(Finding("VENV_BROKEN", FIX if config.venv_managed else BLOCKER,
                    f"torch in {config.venv_path} does not import: {torch['error']}",
                    "deploy rebuilds the managed venv" if config.venv_managed else "repair the external venv"))
        return
    if not config.venv_managed or not torch:
        return
    drift = []
    if parse(torch.get("version")) is None or parse(torch["version"]).public != config.stack_torch:
        drift.append(f"torch {torch.get('version')} (want {config.stack_torch})")
    if not same_major_minor(torch.get("cuda"), config.stack_torch_cuda):
        drift.append(f"torch CUDA {torch.get('cuda')} (want {config.stack_torch_cuda})")
    if flashinfer and parse(flashinfer["version"]) != config.flashinfer:
        drift.append(f"flashinfer {flashinfer['version']} (want {config.stack_flashinfer})")
    if drift:
        add(Finding("VENV_STACK_DRIFT", FIX, f"{config.venv_path} has {', '.join(drift)}",
                    "deploy rebuilds the venv from the configured stack"))


def check_venv_readable(context):
    """The service runs (and the pre-warm builds with) an external venv as the service
    user: every directory on the way must let others through (the incident's venv was
    under /root, 0700)."""
    facts, config = context.facts, context.config
    if config.venv_managed or not facts.get("torch"):
        return
    for entry in (facts.get("paths") or {}).get("venv", []):
        if entry["kind"] != "directory" or entry["user"] == config.service_user:
            continue
        needed = 0o005 if entry["path"] == config.venv_path else 0o001
        if int(entry["mode"], 8) & needed != needed:
            context.add(Finding(
                "VENV_UNREADABLE", BLOCKER,
                f"{entry['path']} (owner {entry['user']}, mode {entry['mode']}) keeps the service user "
                f"{config.service_user} out of {config.venv_path}",
                f"build the venv where {config.service_user} can read it (a venv's scripts name its path, "
                f"so moving it breaks them), open {entry['path']} to others (chmod o+{'rx' if needed == 5 else 'x'}) "
                "if that is acceptable, or let deploy build a managed venv (venv_managed: true)"))
            return
