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

from bringup.findings import BLOCKER, FIX, INFO, WARNING, Finding
from bringup.locks import LOCKS_DIR, read_header
from bringup.plan.model import MIN_PYTHON, SYSTEM_PYTHON, VENV_SYSTEM_PACKAGES, VenvPlan
from bringup.platforms import PythonChoice, distribution, operator_python, venv_python
from bringup.package_index import index_options
from bringup.venv_locks import OMISSIONS, sglang_lock_name, uv_lock_name
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
                    session_bound=layout.helper("session-bound"), releases=layout.releases,
                    root_may_run=layout.helper("root-may-run.sh"))


def _python(context):
    """The CPython the managed venv is built with (bringup.platforms.venv_python), or None
    for an external venv; PYTHON_TOO_OLD when python3 is older than SGLang needs. The
    operator's (``venv_python``) when set: VENV_PYTHON_UNUSABLE when it cannot be used."""
    facts, config, add = context.facts, context.config, context.add
    if not config.venv_managed:
        return None
    if config.venv_python:
        choice, problem = operator_python(config.venv_python, facts.get("venv_python"), MIN_PYTHON)
        if problem:
            add(Finding("VENV_PYTHON_UNUSABLE", BLOCKER, f"venv_python: {problem[0]}", problem[1]))
            return PythonChoice("", "", (), "none")
        return choice
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
                    f"set venv_python to a final CPython >= {MIN_PYTHON} installed root-owned (deadsnakes' "
                    "python3.11 with python3.11-venv, or a build under /opt such as /opt/cpython-3.11/bin/python3.11), "
                    "use Ubuntu 24.04 (CPython 3.12), or an external venv (venv_managed: false)"))
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
                        f"leave venv_lock empty for {sglang_lock_name(config.stack_sglang, *node)}, or "
                        f"generate a lock for CPython {node[0]} on {node[1]} (`make lock`) and set venv_lock to it"))
    else:
        lock = sglang_lock_name(config.stack_sglang, *node)
    uv_lock = uv_lock_name(*(target or node))
    needed = [lock] + ([uv_lock] if config.venv_installer == "uv" else [])
    for path in needed:
        if locks.read(path) is None:
            add(Finding("VENV_LOCK_MISSING", BLOCKER,
                        f"no lock for CPython {node[0]} on {node[1]}: {path} does not exist",
                        _missing_lock_fix(config, locks, path == lock and not config.venv_lock)))
            return lock, uv_lock
    _check_lock_omissions(context, lock)
    return lock, uv_lock


def _missing_lock_fix(config, locks, sglang_lock):
    """The fix of VENV_LOCK_MISSING: for a ``stack_sglang`` with no input yet, the
    upgrade's steps (docs/upgrades.md); else ``make lock``.

    >>> from bringup.config import Config
    >>> from bringup.locks import LockFiles
    >>> _missing_lock_fix(Config(stack_sglang="0.5.99"), LockFiles.of({}), True).split(";")[0]
    'stack_sglang=0.5.99 has no input files/locks/sglang-0.5.99.in'
    """
    source = f"{LOCKS_DIR}/sglang-{config.stack_sglang}.in"
    if sglang_lock and locks.read(source) is None:
        return (f"stack_sglang={config.stack_sglang} has no input {source}; to move to it (docs/upgrades.md): "
                f"`.venv/bin/python -m control.locks new-sglang {config.stack_sglang}` (it copies the newest "
                "sglang-<version>.in), set stack_torch and stack_flashinfer to the releases it pins, run "
                "`make lock`, review `git diff files/locks`, validate, deploy one canary host with "
                "service_rollback: on-failure, then the rest in batches (--limit); or set stack_sglang back")
    return ("run `make lock` (it writes every supported CPython and CPU from files/locks/*.in), "
            "or set venv_lock to a lock made for this node")


def _check_lock_omissions(context, lock):
    """What the venv lock leaves out (its ``omits`` header) and what the node then cannot do."""
    config, add = context.config, context.add
    known = {omission.package: omission for group in OMISSIONS.values() for omission in group}
    for package in read_header(context.locks.read(lock))["omits"]:
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
    """The venv the node has: torch that does not import, or (managed) another stack
    (torch, its CUDA, FlashInfer, and SGLang where the lock is stack_sglang's)."""
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
    # An explicit venv_lock is its own release: stack_sglang names the lock make lock wrote.
    sglang = facts.get("sglang")
    if sglang and not config.venv_lock and parse(sglang.get("version")) != parse(config.stack_sglang):
        drift.append(f"sglang {sglang.get('version')} (want {config.stack_sglang})")
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


def _runnable_by(state, user):
    """Whether ``user`` may execute a file of this ``state`` ({"user", "mode", "kind"}):
    a regular file with its owner's x bit for its owner, else the group's or others'
    (the group may hold ``user``: not counted against it).

    >>> _runnable_by({"user": "root", "mode": "755", "kind": "regular file"}, "sglang")
    True
    >>> _runnable_by({"user": "root", "mode": "700", "kind": "regular file"}, "sglang")
    False
    """
    mode = int(state["mode"], 8)
    needed = 0o100 if state["user"] == user else 0o011
    return state["kind"] == "regular file" and bool(mode & needed)


def entry_point_problem(entry, service_user, enabled=True):
    """What keeps the unit's ExecStart program (the ``entry_point`` fact) from starting as
    systemd starts it, as (severity, what is wrong), or None when nothing does. The
    kernel runs a script's "#!" interpreter: a venv copied from another path names the
    old venv's python there, and systemd fails with status=203/EXEC. A venv without
    bin/sglang (torch and FlashInfer only, for the pre-warm) is a blocker only where
    deploy would enable the unit (``enabled``), else a warning.

    >>> script = {"user": "root", "mode": "755", "kind": "regular file"}
    >>> entry_point_problem({"path": "/v/bin/sglang", "script": script, "format": "script",
    ...     "first_line": "#!/old/bin/python",
    ...     "wrapper": None, "interpreter": "/old/bin/python", "interpreter_file": None,
    ...     "interpreter_owner": None, "interpreter_dir": None, "venv_bin": "/v/bin"}, "sglang")[1]
    '/v/bin/sglang starts /old/bin/python (its #! line), which does not exist on this node'
    >>> entry_point_problem({"path": "/v/bin/sglang", "script": script, "format": "script",
    ...     "first_line": "#!/v/bin/python",
    ...     "wrapper": None, "interpreter": "/v/bin/python", "interpreter_file": script,
    ...     "interpreter_owner": None, "interpreter_dir": "/v/bin", "venv_bin": "/v/bin"}, "sglang") is None
    True
    """
    path, script, interpreter = entry["path"], entry["script"], entry["interpreter"]
    if script is None:
        if enabled:
            return BLOCKER, f"{path} does not exist: the unit's ExecStart runs it"
        return WARNING, f"{path} does not exist: the unit's ExecStart runs it (not enabled now), it cannot start"
    if not _runnable_by(script, service_user):
        return BLOCKER, (f"{path} ({script['kind']}, owner {script['user']}, mode {script['mode']}) cannot be "
                         f"executed by the service user {service_user}")
    if interpreter is None:
        if entry.get("format") == "elf":
            return None  # a program of its own: the kernel runs it directly
        return BLOCKER, f"{path} is neither a script with a #! line nor an executable (ELF) the kernel can start"
    named = f"{path} starts {interpreter} (its #! line{', through ' + entry['wrapper'] if entry['wrapper'] else ''})"
    state = entry["interpreter_file"]
    if state is None:
        return BLOCKER, f"{named}, which does not exist on this node"
    if not _runnable_by(state, service_user):
        return BLOCKER, (f"{named}, which the service user {service_user} cannot execute ({state['kind']}, owner "
                         f"{state['user']}, mode {state['mode']})")
    if interpreter.rsplit("/", 1)[-1].startswith("python") and entry["interpreter_dir"] != entry["venv_bin"]:
        return BLOCKER, (f"{named}: another venv's python (its directory is {entry['interpreter_dir']}, the "
                         f"venv's bin is {entry['venv_bin']})")
    owner = entry["interpreter_owner"]
    if owner == "nobody":
        return BLOCKER, f"{named}, which a user other than root may change (it, or a directory above it)"
    if owner:
        return WARNING, f"{named}, which {owner} may change (it, or a directory above it): {owner} decides what " \
            "the service runs"
    return None


def check_entry_point(context):
    """An external venv's bin/sglang, the unit's ExecStart, starts as systemd will run
    it (SERVICE_ENTRY_POINT_BROKEN): validate and the venv's python answering prove
    nothing of the interpreter its "#!" names. A managed venv is built on the node by
    files/build-venv.sh, its scripts naming its own python; an older report has no
    ``entry_point``; a missing venv is reported elsewhere."""
    facts, config = context.facts, context.config
    entry = facts.get("entry_point")
    if config.venv_managed or entry is None or facts.get("torch") is None:
        return
    problem = entry_point_problem(entry, config.service_user, bool(config.service_model) and config.service_enable)
    if problem is None:
        return
    severity, message = problem
    if "may change" in message:
        fix = (f"use an interpreter only root can change for the venv at {config.venv_path} (build the venv from "
               "the distribution's python3), or let deploy build a managed venv (venv_managed: true)")
    else:
        fix = (f"systemd fails such a unit with status=203/EXEC (\"bad interpreter\" from a shell). A venv's "
               "scripts name its interpreter by absolute path, so a venv copied from another path or node keeps "
               f"that path: build the venv at {config.venv_path} on this node (its scripts then name its own "
               "python), or let deploy build a managed venv (venv_managed: true)")
    context.add(Finding("SERVICE_ENTRY_POINT_BROKEN", severity, message, fix))
