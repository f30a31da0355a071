"""The node plan: facts + settings -> every decision the deploy acts on, with findings.

    python -m bringup.plan FACTS.json [--config CONFIG.yaml]

prints the NodePlan as JSON (``ok``, ``findings``, ``toolkit``, ``arch_list``, ``env``,
``repo``, ``layout``, ``venv``, ``prewarm``, ``service``). FACTS.json is a facts
document (docs/facts.md) or a ``reports/<host>.json`` (``{"facts": ...}``). Run it from
the repository root: the venv and toolkit locks are read from files/locks/ there.

The tasks (tasks/) take the NodePlan and nothing else: every path, version, package,
option and file content they need is in it, decided here once.
"""

import argparse
import ipaddress
import json
import posixpath
import re
import shlex
import sys
from dataclasses import asdict, dataclass, field, replace
from urllib.parse import urlparse

import yaml
from packaging.version import Version

from bringup import cuda as cuda_table
from bringup import checks, explain, facts_schema, redact, systemd, yamlload
from bringup.caches import cache_env
from bringup.deep_gemm import deep_gemm_decision, deep_gemm_request
from bringup.driver_layer import driver_layer_findings
from bringup import flashinfer as fi
from bringup import locks as lockfiles
from bringup.config import Config, ConfigError
from bringup.findings import BLOCKER, FIX, INFO, WARNING, Finding
from bringup.layout import DEFAULT_SERVICE_USER, LIBEXEC, SERVICE_ACCOUNT_MARK, SERVICE_BASE_PATH, NodeLayout
from bringup.platforms import distribution, repo_arch, repo_distro, repo_evidence, repo_location, venv_python
from bringup.prewarm import prewarm_gap, prewarm_request
from bringup.steps import APT_STEPS, DEPLOY_STEPS
from bringup.torch_builds import arch_list_for_build, covers_sm
from bringup.venv import index_options
from bringup.versions import major_minor, parse, same_major_minor

MIN_PYTHON = Version("3.11")  # sglang 0.5.23: Requires-Python >=3.11
# Dev headers and stubs FlashInfer's JIT compiles and links against, beside nvcc.
# cuBLAS headers: FlashInfer 0.7.2's norm module includes cublasLt.h. The toolkit lock
# (files/locks/cuda-X.Y-<distro>-<machine>.txt) pins these and what they depend on.
TOOLKIT_PACKAGES = ("cuda-nvcc", "cuda-cudart-dev", "cuda-crt", "cuda-nvvm", "cuda-cccl",
                    "cuda-driver-dev", "libcurand-dev", "libcublas-dev")
# What the managed venv's build needs from the distribution: venv support, and the
# host compiler FlashInfer's JIT uses (CXX in the service env).
VENV_SYSTEM_PACKAGES = ("python3-venv", "g++")
HOST_CXX = "/usr/bin/g++"
SYSTEM_PYTHON = "/usr/bin/python3"
# Packages the repository step needs to fetch and check the key.
KEY_TOOLS = ("ca-certificates", "curl", "gpg")


@dataclass(frozen=True)
class RepoPlan:
    """NVIDIA's CUDA apt repository (or a mirror) as the node will use it."""

    url: str
    key_url: str
    fingerprint: str
    distro: str
    arch: str
    keyring: str
    source_file: str
    preference_file: str
    pin_origin: str
    key_tools: tuple = KEY_TOOLS
    # A source of the node's own serves the repository with the pinned key: deploy
    # uses it (and its keyring) instead of adding a second one.
    adopt: bool = False
    # Files whose entries for ``url`` deploy disables first (they would conflict).
    disable: tuple = ()
    evidence: str = ""


@dataclass(frozen=True)
class ToolkitPlan:
    """The toolkit matching torch's CUDA build: ``version`` X.Y, its ``home`` and packages.

    ``lock`` is the toolkit lock the versions come from ("" without one); ``pins`` are
    apt's arguments, ``name=version`` for every locked package (a bare name otherwise).
    """

    version: str
    home: str
    packages: tuple
    lock: str = ""
    pins: tuple = ()
    # The pins dpkg did not have (at that version) when the node was probed; None when
    # the probe could not tell (no dpkg-query): deploy then asks dpkg itself.
    missing: tuple = None


@dataclass(frozen=True)
class VenvPlan:
    """The SGLang venv: built from ``lock`` (a control-side file) with ``python`` (CPython
    ``python_version``) into ``dirs/<lock digest>`` and linked at ``path`` when
    ``managed``; only used otherwise."""

    managed: bool
    path: str
    dirs: str
    locks: str
    tools: str
    cache: str
    python: str
    lock: str
    uv_lock: str
    installer: str
    sources: tuple
    builder: str
    system_packages: tuple = VENV_SYSTEM_PACKAGES
    python_version: str = ""
    # torch's arch list is recorded here, inside the venv (files/torch_info.py), and
    # whether the probe found a current record (then deploy checks nothing more).
    torch_record: str = ""
    torch_recorded: bool = False
    torch_info: str = f"{LIBEXEC}/torch_info.py"
    # Runs the build so that it dies with its SSH session (files/session-bound).
    session_bound: str = f"{LIBEXEC}/session-bound"


@dataclass(frozen=True)
class PrewarmPlan:
    """FlashInfer's JIT modules to compile before the service starts, and where.

    ``gap`` says why the node's cache does not hold them at planning time ("" when
    it does); the deploy re-checks with ``gap_for`` when it gets there.
    """

    request: dict
    flashinfer: str
    arch_list: str
    venv: str
    env_file: str
    cache_dir: str
    manifest: str
    user: str
    home: str
    base_path: str
    runner: str
    script: str
    gap: str = ""
    # Runs the pre-warm so that it dies with its SSH session (files/session-bound).
    session_bound: str = f"{LIBEXEC}/session-bound"

    def gap_for(self, state, toolchain=None):
        """Why ``state`` (the JitCache fact's ``prewarm``) does not hold the request, or "";
        ``toolchain`` is its ``toolchain``.

        >>> PrewarmPlan({"modules": ["norm"]}, "0.7.2", "12.0f", "/v", "/e", "/c", "/c/m", "u", "/h",
        ...             "/p", "/r", "/s").gap_for(None)
        'no pre-warm manifest'
        """
        return prewarm_gap(state, self.request, Version(self.flashinfer), self.arch_list, toolchain)


@dataclass(frozen=True)
class DeepGemmPlan:
    """DeepGEMM's kernels for the service's model (bringup/deep_gemm.py): whether deploy
    compiles them here (``run``) and why, the request its manifest records, and the
    command, run as the service user with the service's environment."""

    run: bool
    why: str
    request: dict
    manifest: str
    command: tuple
    user: str
    home: str
    env_file: str
    base_path: str
    runner: str
    unit: str
    session_bound: str


@dataclass(frozen=True)
class ServicePlan:
    """The SGLang service: its account, environment file content and unit."""

    user: str
    home: str
    env_file: str
    env: dict
    unit: str
    exec_start: tuple
    exec_line: str
    description: str
    enable: bool
    # Where it listens (sglang serve --host) and the node's file with its API key,
    # given as --config (empty: no key); the key itself is in no plan or report.
    host: str = "127.0.0.1"
    api_key_file: str = ""


@dataclass
class NodePlan:
    """What a node needs. ``ok`` is False when any finding is a blocker."""

    findings: list = field(default_factory=list)
    toolkit: ToolkitPlan = None
    arch_list: str = ""
    env: dict = field(default_factory=dict)
    repo: RepoPlan = None
    torch_cuda: str = ""
    session_path: str = ""
    layout: NodeLayout = None
    venv: VenvPlan = None
    prewarm: PrewarmPlan = None
    deep_gemm: DeepGemmPlan = None
    service: ServicePlan = None
    manage_alternative: bool = True
    steps: tuple = ()
    # Who held apt's locks when the node was probed, and how long deploy waits for them.
    apt_locks: list = field(default_factory=list)
    apt_lock_timeout: int = 300

    def runs(self, step):
        """Whether deploy.py runs ``step`` (bringup.steps.DEPLOY_STEPS) on this node."""
        return step in self.steps

    @property
    def uses_apt(self):
        """Whether a step deploy.py runs here installs packages (and so needs apt's locks)."""
        return any(step in self.steps for step in APT_STEPS)

    @property
    def ok(self):
        return not self.blockers

    @property
    def blockers(self):
        return [finding for finding in self.findings if finding.severity == BLOCKER]

    def codes(self, severity=None):
        return [f.code for f in self.findings if severity is None or f.severity == severity]

    def as_dict(self):
        """The plan as plain data, as it is printed and saved (reports, the summary, the
        planner's JSON): the env values that are not the plan's own and URL credentials
        redacted (bringup/redact.py). The tasks act on the NodePlan itself, real values."""
        service = asdict(self.service) if self.service else {}
        if service:
            service["env"] = redact.env(service["env"])
        return redact.data({
            "ok": self.ok,
            "findings": [finding.as_dict() for finding in self.findings],
            "toolkit": asdict(self.toolkit) if self.toolkit else {},
            "arch_list": self.arch_list,
            "env": redact.env(self.env),
            "repo": asdict(self.repo) if self.repo else {},
            "torch_cuda": self.torch_cuda,
            "session_path": self.session_path,
            "manage_alternative": self.manage_alternative,
            "layout": self.layout.as_dict() if self.layout else {},
            "venv": asdict(self.venv) if self.venv else {},
            "prewarm": asdict(self.prewarm) if self.prewarm else {},
            "deep_gemm": asdict(self.deep_gemm) if self.deep_gemm else {},
            "service": service,
            "steps": list(self.steps),
            "apt_locks": list(self.apt_locks),
            "apt_lock_timeout": self.apt_lock_timeout,
        })


def plan(facts, config, locks=None):
    """Decide what a node needs.

    + facts: the facts document (docs/facts.md)
    + config: a validated ``Config``
    + locks: where the control side's lock files are read (``bringup.locks.LockFiles``;
      default: the current directory, the repository root)

    >>> facts = {"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [],
    ...          "python": {"version": "3.11.2"}}
    >>> plan(facts, Config()).codes(BLOCKER)
    ['NO_GPU']
    """
    facts_schema.check(facts)
    locks = locks if locks is not None else lockfiles.LockFiles()
    node = NodePlan(layout=config.layout, manage_alternative=config.cuda_manage_alternative,
                    steps=tuple(step for step in DEPLOY_STEPS if step in config.deploy_steps),
                    apt_locks=list(facts.get("apt_locks") or []), apt_lock_timeout=config.deploy_apt_lock_timeout)
    add = node.findings.append
    _check_apt_locks(node, add)
    machine = (facts.get("os") or {}).get("arch")
    node.repo = _repo(facts, config, add)
    sms = _target_sms(facts, config, add)
    torch_cuda = _torch_cuda(facts, config)
    node.torch_cuda = str(torch_cuda)
    home = f"/usr/local/cuda-{torch_cuda}"
    node.toolkit = _toolkit(torch_cuda, home, node.repo, machine, locks, add, config.cuda_toolkit_lock)
    node.toolkit = replace(node.toolkit, missing=_missing_pins(node.toolkit.pins, facts.get("cuda_packages")))
    _check_toolkit_lock(facts, node.toolkit, add)
    _check_driver(facts, torch_cuda, add)
    driver_layer_findings(facts, config, add)
    targets = _check_sms(sms, facts, config, torch_cuda, add)
    node.arch_list = " ".join(targets)
    python = _check_python(facts, config, add)
    venv_lock, uv_lock = _venv_locks(config, python, machine, locks, add)
    _check_venv(facts, config, add)
    _check_toolkits(facts, home, torch_cuda, add)
    _check_resolution(facts, config, home, torch_cuda, sms, targets, add)
    _check_login_path(facts, home, add)
    _check_symlink(facts, config, home, add)
    _check_paths(facts, config, add)
    _check_venv_readable(facts, config, add)
    _check_service_account(facts.get("account"), config.service_user, config.layout.service_home, add)
    # SSH sessions get the toolkit but not the venv; the service gets both.
    node.session_path = f"{home}/bin:{SERVICE_BASE_PATH}"
    node.env = service_env(config, home, node.arch_list)
    _check_service_env(facts, config, node.env, add)
    node.venv = _venv(config, node.layout, python, venv_lock, uv_lock,
                      recorded=(facts.get("torch") or {}).get("arch_list_from") == "record")
    node.prewarm = _prewarm(facts, config, node.arch_list, add)
    node.service = _service(config, node.env)
    node.findings.extend(exposure_findings(node.service, config.service_args, config.service_port))
    # The GPUs' own SMs only: an image builder's target_sms have no GPU to compile on.
    node.deep_gemm = _deep_gemm(config, sms if facts.get("gpus") else [], add)
    _check_service_unit(facts, config, node, add)
    return node


def _check_apt_locks(node, add):
    if not node.apt_locks:
        return
    held = "; ".join(f"pid {h['pid']} ({h.get('command') or '?'}) holds {h['lock']}" for h in node.apt_locks)
    add(Finding("APT_LOCKED", WARNING, f"apt is in use: {held}",
                f"nothing to do: deploy waits up to {node.apt_lock_timeout} s (deploy_apt_lock_timeout) for it "
                "before it changes anything, and fails this host alone if it is still held"))


def service_env(config, home, arch_list):
    """What the service's environment file holds: the toolkit, the arch list, every
    cache under service_cache_dir (bringup/caches.py), the host compiler, then the
    operator's ``service_env``."""
    layout = config.layout
    return {
        "CUDA_HOME": home,
        "PATH": f"{home}/bin:{layout.venv}/bin:{SERVICE_BASE_PATH}",
        "FLASHINFER_CUDA_ARCH_LIST": arch_list,
        **cache_env(layout.cache_dir),
        "CXX": HOST_CXX,
        **dict(config.service_env),
    }


def managed_env_keys(config):
    """The keys of the service env file whose values the probe reports: those the plan
    decides itself. Never ``service_env``'s (deploy manages them too, but their values
    are the operator's secrets: pyinfra prints a fact's output at -vvv), so a changed
    one is reset without being reported.

    >>> managed_env_keys(Config(service_env=(("HF_TOKEN", "hf_x"),)))[:3], "HF_TOKEN" in managed_env_keys(
    ...     Config(service_env=(("HF_TOKEN", "hf_x"),)))
    (('CUDA_HOME', 'PATH', 'FLASHINFER_CUDA_ARCH_LIST'), False)
    """
    operators = dict(config.service_env)
    return tuple(key for key in service_env(config, "", "") if key not in operators)


def _check_service_env(facts, config, env, add):
    """A managed key the operator changed in the env file is reset by deploy: say so first.
    The values of keys that are not the plan's own (``service_env``'s: tokens) are never
    shown, neither the file's nor the setting's (bringup/redact.py)."""
    found = facts.get("service_env") or {}
    shown_found, shown_env = redact.env(found), redact.env(env)
    changed = [f"{key}={shown_found[key]} (deploy sets {shown_env[key]})" for key in env
               if key in found and found[key] != env[key]]
    if changed:
        add(Finding("SERVICE_ENV_OVERRIDDEN", FIX,
                    f"{config.service_env_file} sets {'; '.join(changed)}",
                    "deploy resets these keys to the plan's values; your own keys stay. To keep another "
                    "value, change the setting that decides it, or add keys of your own through service_env"))


def _venv(config, layout, python, lock, uv_lock, recorded=False):
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


def _toolkit(torch_cuda, home, repo, machine, locks, add, explicit=""):
    """The toolkit's packages, at the versions of its lock: ``cuda_toolkit_lock`` when
    set, else the one for this repository distro and CPU."""
    suffix = f"{torch_cuda.major}-{torch_cuda.minor}"
    planned = tuple(f"{name}-{suffix}" for name in TOOLKIT_PACKAGES)
    if repo is None:
        return ToolkitPlan(str(torch_cuda), home, planned, pins=planned)
    name = explicit or lockfiles.toolkit_lock_name(str(torch_cuda), repo.distro, machine)
    release = lockfiles.toolkit_input_name(str(torch_cuda))
    regenerate = (f"make lock CUDA_REPO_URL=<NVIDIA's repos or your mirror> CUDA_PLATFORMS={repo.distro}-{machine} "
                  f"(the release is {release})")
    text = locks.read(name)
    if text is None:
        add(Finding("TOOLKIT_UNLOCKED", WARNING,
                    f"no toolkit lock {name}: deploy would install whichever CUDA {torch_cuda} release "
                    f"{repo.url} offers (its newest)", f"generate it: {regenerate}"))
        return ToolkitPlan(str(torch_cuda), home, planned, pins=planned)
    try:
        locked = lockfiles.parse_toolkit_lock(text)
    except lockfiles.LockError as error:
        add(Finding("TOOLKIT_UNLOCKED", BLOCKER, f"{name} cannot be read: {error}", f"regenerate it: {regenerate}"))
        return ToolkitPlan(str(torch_cuda), home, planned, lock=name, pins=planned)
    unlocked = [package for package in planned if package not in locked]
    if unlocked:
        add(Finding("TOOLKIT_UNLOCKED", WARNING,
                    f"{name} holds no version of {', '.join(unlocked)}: deploy would install the repository's newest",
                    f"add them to {release} and regenerate: {regenerate}"))
    packages = planned + tuple(package for package in locked if package not in planned)
    pins = tuple(f"{package}={locked[package]}" if package in locked else package for package in packages)
    return ToolkitPlan(str(torch_cuda), home, packages, lock=name, pins=pins)


def _missing_pins(pins, installed):
    """The pins (``name`` or ``name=version``) the probe's ``cuda_packages`` lacks, or None
    when the probe could not list packages.

    >>> _missing_pins(("a=1-1", "b=2-1", "c"), {"a": "1-1", "b": "1-1"})
    ('b=2-1', 'c')
    >>> _missing_pins(("a=1-1",), None) is None
    True
    """
    if installed is None:
        return None
    missing = []
    for pin in pins:
        name, _, version = pin.partition("=")
        if name not in installed or (version and installed[name] != version):
            missing.append(pin)
    return tuple(missing)


def _check_toolkit_lock(facts, toolkit, add):
    """Installed toolkit packages at other versions than the lock's (deploy moves them)."""
    installed = facts.get("cuda_packages")
    locked = dict(pin.split("=", 1) for pin in toolkit.pins if "=" in pin)
    if installed is None or not locked or not any(package in installed for package in locked):
        return
    drift = [f"{package} {installed[package]} (lock {version})" if package in installed
             else f"{package} not installed (lock {version})"
             for package, version in locked.items() if installed.get(package) != version]
    if drift:
        add(Finding("TOOLKIT_LOCK_DRIFT", FIX,
                    f"the CUDA {toolkit.version} packages differ from {toolkit.lock}: {', '.join(drift)}",
                    "deploy installs the lock's versions (downgrades included); to move to another release on "
                    f"purpose, edit {lockfiles.toolkit_input_name(toolkit.version)} and run make lock"))


def _venv_locks(config, python, machine, locks, add):
    """The venv lock and uv's bootstrap lock for the CPython the venv is built with and
    the node's CPU: the explicit ``venv_lock``, else the one ``make lock`` wrote for them."""
    if not config.venv_managed or python is None or not python.path:
        return config.venv_lock, ""
    node = (python.version, machine)
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
    _check_lock_omissions(lock, locks.read(lock), config, add)
    return lock, uv_lock


def _check_lock_omissions(lock, text, config, add):
    """What the venv lock leaves out (its ``omits`` header) and what the node then cannot do."""
    known = {omission.package: omission for group in lockfiles.OMISSIONS.values() for omission in group}
    for package in lockfiles.read_header(text)["omits"]:
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


def _prewarm(facts, config, arch_list, add):
    """The pre-warm request and whether the node's cache already holds it (JIT_CACHE_COLD)."""
    layout = config.layout
    installed = parse((facts.get("flashinfer") or {}).get("version"))
    # The FlashInfer that will serve: the stack's for a managed venv (deploy builds it),
    # the venv's own otherwise.
    serving = config.flashinfer if config.venv_managed else (installed or config.flashinfer)
    prewarm = PrewarmPlan(request=prewarm_request(config), flashinfer=str(serving), arch_list=arch_list,
                          venv=layout.venv, env_file=layout.env_file, cache_dir=layout.cache_dir,
                          manifest=layout.manifest,
                          user=layout.service_user, home=layout.service_home, base_path=SERVICE_BASE_PATH,
                          runner=layout.helper("with-service-env"), script=layout.helper("prewarm.py"),
                          session_bound=layout.helper("session-bound"))
    if not arch_list:
        return prewarm
    jit = facts.get("jit_cache") or {}
    gap = prewarm.gap_for(jit.get("prewarm"), jit.get("toolchain"))
    if gap:
        where = f"{layout.flashinfer_cache}/{serving}/{fi.workspace_dir_name(arch_list.split())}"
        add(Finding("JIT_CACHE_COLD", FIX,
                    f"FlashInfer's JIT cache under {where} is not ready ({gap}): the first requests would compile",
                    f"deploy pre-warms {', '.join(config.prewarm_modules)} for {arch_list} as {config.service_user}"))
    return PrewarmPlan(**{**asdict(prewarm), "gap": gap})


def _deep_gemm(config, gpu_sms, add):
    """Whether deploy compiles DeepGEMM's kernels (prewarm_deep_gemm): for the unit's
    model and server arguments, on the GPUs the node reports (``gpu_sms``)."""
    layout = config.layout
    run, why = deep_gemm_decision(config.prewarm_deep_gemm, config.service_model, gpu_sms)
    # The unit's model and server arguments (--tp-size, --quantization... shape the
    # kernels); its server listens on loopback only, on the service's port (the service
    # is stopped meanwhile).
    server_args = ("--model-path", config.service_model, *shlex.split(config.service_args))
    command = (f"{layout.venv}/bin/python", "-m", "sglang.compile_deep_gemm", *server_args,
               "--host", "127.0.0.1", "--port", config.service_port,
               "--timeout", str(config.prewarm_deep_gemm_timeout))
    deep_gemm = DeepGemmPlan(run=run, why=why,
                             request=deep_gemm_request(config.stack_sglang, config.service_model, server_args, gpu_sms),
                             manifest=layout.deep_gemm_manifest, command=command, user=layout.service_user,
                             home=layout.service_home, env_file=layout.env_file, base_path=SERVICE_BASE_PATH,
                             runner=layout.helper("with-service-env"), unit=posixpath.basename(layout.unit),
                             session_bound=layout.helper("session-bound"))
    if not config.prewarm_deep_gemm:
        return deep_gemm
    if run:
        add(Finding("DEEP_GEMM_PRECOMPILE", INFO,
                    f"{why}: deploy compiles DeepGEMM's kernels for {config.service_model} with "
                    f"python -m sglang.compile_deep_gemm (the model loaded on the GPUs, at most "
                    f"{config.prewarm_deep_gemm_timeout} s; the service is stopped meanwhile), unless "
                    f"{layout.deep_gemm_manifest} records this model, release, arguments and GPUs",
                    "nothing to do; the first start then finds the kernels in SGLANG_DG_CACHE_DIR"))
    elif gpu_sms and config.service_model:
        add(Finding("DEEP_GEMM_NOT_PRECOMPILED", INFO, f"prewarm_deep_gemm is set, but {why}",
                    "nothing to do: the service never compiles DeepGEMM here (or set prewarm_deep_gemm=false)"))
    else:
        add(Finding("DEEP_GEMM_NOT_PRECOMPILED", WARNING, f"prewarm_deep_gemm is set, but {why}",
                    "set service_model and deploy on the GPU node itself; until then the service's first start "
                    "compiles DeepGEMM's kernels (10-20 minutes, SGLang says)"))
    return deep_gemm


def _service(config, env):
    """The unit runs the release's entry point, ``sglang serve`` (0.5.23's launch_server.py:70-77
    calls ``python -m sglang.launch_server`` legacy), as a language model server
    (``--model-type llm``: sglang/cli/serve.py otherwise asks the Hugging Face hub
    whether the model is a diffusion one); without a model, no ``--model-path`` (never
    an empty argument): the unit is written but not enabled."""
    layout = config.layout
    model = ("--model-path", config.service_model) if config.service_model else ()
    # The API key comes in a YAML file SGLang reads itself (--config): never the key
    # on the command line, which systemctl show and ps print to every user.
    key = ("--config", config.service_api_key_file) if config.service_api_key_file else ()
    exec_start = (f"{layout.venv}/bin/sglang", "serve", "--model-type", "llm", *model, "--host", config.service_host,
                  "--port", config.service_port, *key, *shlex.split(config.service_args))
    return ServicePlan(user=config.service_user, home=layout.service_home, env_file=layout.env_file, env=env,
                       unit=layout.unit, exec_start=exec_start, exec_line=systemd.exec_line(exec_start),
                       description=f"SGLang server ({config.service_model or 'no model configured'})",
                       enable=bool(config.service_model) and config.service_enable,
                       host=listen_address(exec_start), api_key_file=config.service_api_key_file)


def listen_address(argv):
    """The address ``sglang serve`` binds with ``argv``: its last ``--host`` (argparse
    keeps the last; ``service_args`` may name one after the plan's), SGLang's own
    default 127.0.0.1 without one.

    >>> listen_address(["sglang", "serve", "--host", "127.0.0.1", "--tp", "8", "--host=0.0.0.0"])
    '0.0.0.0'
    >>> listen_address(["sglang", "serve"])
    '127.0.0.1'
    """
    address = "127.0.0.1"
    for at, word in enumerate(argv):
        if word == "--host" and at + 1 < len(argv):
            address = argv[at + 1]
        elif word.startswith("--host="):
            address = word.partition("=")[2]
    return address


def loopback_only(address):
    """Whether ``address`` reaches this node's own loopback only.

    >>> [loopback_only(a) for a in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "::", "10.0.0.5")]
    [True, True, True, False, False, False]
    """
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def exposure_findings(service, service_args, port):
    """What the service exposes: SERVICE_OPEN (a warning) when it listens beyond
    loopback with no API key; SERVICE_ARGS_CONFLICT (a blocker) when service_args has
    a --config of its own beside service_api_key_file (SGLang takes one). The key's
    value is never read here: only whether a file names it.

    >>> [f.code for f in exposure_findings(ServicePlan("u", "/h", "/e", {}, "/u", (), "", "", True, "0.0.0.0"), "", "30000")]
    ['SERVICE_OPEN']
    >>> exposure_findings(ServicePlan("u", "/h", "/e", {}, "/u", (), "", "", True, "0.0.0.0", "/etc/sglang/k.yaml"), "", "1")
    []
    """
    own_config = "--config" in [word.split("=", 1)[0] for word in shlex.split(service_args)]
    if service.api_key_file and own_config:
        return [Finding("SERVICE_ARGS_CONFLICT", BLOCKER,
                        f"service_args has a --config of its own and service_api_key_file is {service.api_key_file}: "
                        "SGLang refuses a second --config file",
                        f"move the options of your --config file into {service.api_key_file} (SGLang reads options "
                        "and api-key from it) and remove --config from service_args, or leave "
                        "service_api_key_file empty and put api-key in your own file")]
    if loopback_only(service.host) or service.api_key_file or own_config:
        return []
    return [Finding("SERVICE_OPEN", WARNING,
                    f"sglang serve listens on {service.host}:{port} with no API key: anyone who reaches the port "
                    "can use the GPUs",
                    "set service_api_key_file to a YAML file on the node holding `api-key: <key>` (owned "
                    f"root:{service.user}, mode 0640; SGLang reads it with --config), or service_host: 127.0.0.1 "
                    "behind a proxy on the node that authenticates")]


def _check_service_unit(facts, config, node, add):
    """A unit that failed or keeps restarting: name the cause its journal shows (the
    signatures of bringup/explain.py, the ones ``python -m bringup.explain`` uses), with
    that cause's fix in this node's terms. A warning: the cause may be one deploy
    repairs (then another finding says so too) or one it cannot (the driver)."""
    unit = facts.get("service_unit")
    if not explain.unit_failing(unit):
        return
    state = explain.unit_state_text(unit)
    journal = unit.get("journal") or []
    matches = explain.explain(journal)
    if not matches:
        add(Finding("SERVICE_FAILED", WARNING,
                    f"{state}; no known cause in the last {len(journal)} line(s) of its journal",
                    f"read `journalctl -u {unit['name']} -o cat`; `python -m bringup.explain` names the causes "
                    "it knows (README, \"Explain a failed start\")"))
        return
    context = explain.Context(home=node.toolkit.home, cuda=node.toolkit.version, env_file=config.service_env_file,
                              arch_list=node.arch_list)
    causes = "; ".join(f"{match.signature.code} ({match.signature.title}: \"{explain.shorten(match.line)}\")"
                       for match in matches)
    # One fix per cause code: the trap's two lines (the refused SM, then the sm75 error)
    # have one fix.
    fixes, codes = [], set()
    for match in matches:
        if match.signature.code not in codes:
            codes.add(match.signature.code)
            fixes.append(match.fix(context))
    add(Finding("SERVICE_FAILED", WARNING, f"{state}; its journal shows {causes}", "; also ".join(fixes)))


def _repo(facts, config, add):
    os_facts = facts.get("os") or {}
    distro = config.cuda_repo_distro or repo_distro(os_facts.get("id"), os_facts.get("version_id"))
    arch = repo_arch(os_facts.get("arch"))
    if distro is None or arch is None:
        seen = f"{os_facts.get('id')} {os_facts.get('version_id')} on {os_facts.get('arch')}"
        add(Finding("UNSUPPORTED_OS", BLOCKER,
                    f"NVIDIA's CUDA repository has no build for {seen}",
                    "use Ubuntu 22.04/24.04 or Debian 12/13 on x86_64 or aarch64, or set "
                    "cuda_repo_distro to a distro directory your mirror carries"))
        return None
    url = repo_location(config.cuda_repo_url, distro, arch)
    fingerprint = config.cuda_repo_fingerprint.replace(" ", "").upper()
    layout = config.layout
    evidence = repo_evidence(distro, arch)
    if evidence == "unverified":
        add(Finding("REPO_UNVERIFIED", WARNING,
                    f"this release found no evidence that NVIDIA serves {distro}/{arch} (only other directories "
                    "of it are known)",
                    f"check that {url}Packages serves the toolkit before deploying: `make lock "
                    f"CUDA_PLATFORMS={distro}-{os_facts.get('arch')}` fails when it does not"))
    repo = RepoPlan(url=url, key_url=config.cuda_repo_key_url or f"{url}{fingerprint[-8:].lower()}.pub",
                    fingerprint=fingerprint, distro=distro, arch=arch, keyring=layout.apt_keyring,
                    source_file=layout.apt_source, preference_file=layout.apt_preference,
                    pin_origin=urlparse(url).hostname or "", evidence=evidence)
    return _existing_sources(facts, repo, add)


def _same_uri(left, right):
    return left.rstrip("/") == right.rstrip("/")


def _existing_sources(facts, repo, add):
    """Converge on exactly one source for the repository (apt refuses every source when
    two name it with different Signed-By): adopt a source the node already has when its
    keyring holds the pinned key and nothing else and root alone can change it (NVIDIA's
    cuda-keyring package installs one), else disable the others (their files kept,
    renamed) and write ours."""
    apt = facts.get("apt") or {}
    serving = [entry for entry in apt.get("sources") or [] if any(_same_uri(uri, repo.url) for uri in entry["uris"])]
    others = [entry for entry in serving if entry["file"] != repo.source_file]
    adopted = next((entry for entry in others if _why_not_pinned(entry, apt, repo.fingerprint) is None), None)
    if adopted:
        conflicting = [entry for entry in serving if entry["signed_by"] != adopted["signed_by"]]
        add(Finding("APT_SOURCE_CONFLICT", INFO,
                    f"{adopted['file']} already serves {repo.url}, signed by {adopted['signed_by']} which holds only "
                    f"the pinned key {repo.fingerprint} and that only root can change",
                    "deploy adopts that source and keyring instead of adding a second source"))
        repo = replace(repo, adopt=True, source_file=adopted["file"], keyring=adopted["signed_by"])
    else:
        conflicting = others
    if conflicting:
        files = sorted({entry["file"] for entry in conflicting})
        reasons = "; ".join(f"{entry['file']}: " + (_why_not_pinned(entry, apt, repo.fingerprint) or
                                                     f"signed by {entry['signed_by']} (the pinned key, another "
                                                     "keyring file)")
                            for entry in conflicting)
        add(Finding("APT_SOURCE_CONFLICT", FIX,
                    f"{', '.join(files)} also serve{'s' if len(files) == 1 else ''} {repo.url} ({reasons}): a second "
                    "source with another Signed-By makes apt refuse every source",
                    "deploy disables those entries first (a file of them only is renamed to "
                    "<file>.disabled-by-gpu-bringup, a shared file gets the lines commented out), then adds its own"
                    if not adopted else "deploy disables those entries and keeps the adopted source"))
        repo = replace(repo, disable=tuple(files))
    return repo


def _keyring_chain(apt, keyring):
    """The keyring's path chain as the probe read it (files/probe.sh probe_apt), or []
    when it did not (an older report) or the facts do not have the documented shape."""
    chain = (apt.get("keyring_paths") or {}).get(keyring) if isinstance(apt.get("keyring_paths"), dict) else None
    fields = ("path", "user", "mode", "kind")
    if not isinstance(chain, list) or not all(isinstance(item, dict) and all(isinstance(item.get(name), str)
                                                                            for name in fields) for item in chain):
        return []
    return chain


def _unsafe_keyring(keyring, chain):
    """Why someone other than root could change ``keyring`` (README, Security), or None:
    it must be a regular file (no link), and it and every directory above it owned by
    root and writable by no group or other user.

    >>> _unsafe_keyring("/k/a.gpg", [{"path": "/k/a.gpg", "user": "root", "mode": "644", "kind": "regular file"},
    ...                              {"path": "/k", "user": "root", "mode": "1777", "kind": "directory"}])
    '/k is writable by others (mode 1777)'
    """
    parent = keyring.rsplit("/", 1)[0] or "/"
    if len(chain) < 2 or chain[0]["path"] != keyring or chain[1]["path"] != parent:
        return "who may change it was not probed (validate again with this release)"
    if chain[0]["kind"] != "regular file":
        return f"it is a {chain[0]['kind']}, not a regular file"
    for item in chain:
        if item["user"] != "root":
            return f"{item['path']} is owned by {item['user']}, not root"
        try:
            mode = int(item["mode"], 8)
        except ValueError:
            return f"{item['path']} has mode {item['mode']!r}"
        if mode & 0o022:
            who = "others" if mode & 0o002 else "its group"
            return f"{item['path']} is writable by {who} (mode {item['mode']})"
    return None


def _why_not_pinned(entry, apt, fingerprint):
    """Why the source ``entry`` cannot be adopted, or None when it can: checked by the
    pinned key alone, in a keyring that holds nothing else (subkeys of that key aside)
    and that only root can change."""
    if entry["trusted"]:
        return "trusted=yes, no key checked"
    if not entry["signed_by"]:
        return "no Signed-By (any key apt trusts)"
    if entry["signed_by"] == "inline":
        return "an inline key"
    keyrings = apt.get("keyrings") or {}
    found = keyrings.get(entry["signed_by"]) if isinstance(keyrings, dict) else None
    chain = _keyring_chain(apt, entry["signed_by"])
    unsafe = _unsafe_keyring(entry["signed_by"], chain)
    if not isinstance(found, list) or not all(isinstance(key, str) for key in found):
        return f"signed by {entry['signed_by']}, " + (unsafe if chain and unsafe else "unreadable")
    others = [key for key in dict.fromkeys(found) if key != fingerprint]
    held = ", ".join(others[:2]) + (f" and {len(others) - 2} more" if len(others) > 2 else "") if others else "no key"
    if fingerprint not in found:
        return f"signed by {entry['signed_by']}, which holds {held}, not {fingerprint}"
    if others:
        return f"signed by {entry['signed_by']}, which holds the pinned key and also {held} (apt trusts those too)"
    if unsafe:
        return f"signed by {entry['signed_by']}, the pinned key, but not only root can change it: {unsafe}"
    return None


def _target_sms(facts, config, add):
    gpus = facts.get("gpus") or []
    smi = facts.get("nvidia_smi") or {}
    if gpus:
        for gpu in gpus:
            if parse(gpu["compute_cap"]) is None:
                add(Finding("SM_UNKNOWN", BLOCKER,
                            f"GPU {gpu['index']} ({gpu['name']}) reports compute capability {gpu['compute_cap']!r}",
                            "check the GPU with nvidia-smi -q (a GPU in a bad state or a driver too old to "
                            "know it reports [N/A]); nothing can be built for it until it reports X.Y"))
        sms = sorted({parse(gpu["compute_cap"]) for gpu in gpus if parse(gpu["compute_cap"])})
        if len(sms) > 1:
            add(Finding("MIXED_GPUS", WARNING,
                        f"GPUs of SMs {', '.join(str(sm) for sm in sms)} share this node",
                        "nothing to do: every SM is in the arch list"))
        return sms
    if config.target_sms:
        sms = sorted({Version(sm) for sm in config.target_sms})
        add(Finding("TARGET_SMS_FROM_CONFIG", INFO,
                    f"no GPU visible; building for target_sms {' '.join(str(sm) for sm in sms)}",
                    "nothing to do on an image builder"))
        return sms
    if smi.get("present") and smi.get("error"):
        add(Finding("DRIVER_NOT_LOADED", BLOCKER,
                    f"nvidia-smi fails: {smi['error']}",
                    "install or reload the NVIDIA driver (check dmesg, nvidia kernel module), or "
                    "set target_sms for a GPU-less image builder"))
    else:
        reason = smi.get("error") or "nvidia-smi lists no GPU"
        add(Finding("NO_GPU", BLOCKER, f"no NVIDIA GPU visible ({reason})",
                    "install the NVIDIA driver on a GPU node, or set target_sms (e.g. [\"12.0\"]) "
                    "to build for a GPU-less image builder"))
    return []


def _torch_cuda(facts, config):
    """The CUDA build that decides the toolkit: the configured stack for a managed
    venv (that is what runs after the deploy), the venv's own torch otherwise."""
    torch = facts.get("torch") or {}
    if not config.venv_managed and parse(torch.get("cuda")):
        return major_minor(torch["cuda"])
    return major_minor(config.stack_torch_cuda)


def _check_driver(facts, torch_cuda, add):
    driver = facts.get("driver")
    if not driver:
        return
    if not cuda_table.driver_runs_cuda(driver["version"], torch_cuda):
        floor = cuda_table.driver_floor_for_cuda(torch_cuda)
        add(Finding("DRIVER_TOO_OLD", BLOCKER,
                    f"driver {driver['version']} cannot run CUDA {torch_cuda} code (needs >= {floor})",
                    f"upgrade the NVIDIA driver to {floor} or newer, or use a torch build "
                    f"for an older CUDA (stack_torch_cuda)"))
    for name in sorted({gpu["name"] for gpu in facts.get("gpus") or []}):
        floor = cuda_table.driver_floor_for_gpu(name)
        if floor and parse(driver["version"]) and parse(driver["version"]) < floor:
            add(Finding("DRIVER_TOO_OLD", BLOCKER,
                        f"driver {driver['version']} is below the {name} floor {floor}",
                        f"upgrade the NVIDIA driver to {floor} or newer"))
    driver_cuda = parse(driver.get("cuda_version"))
    if driver_cuda and driver_cuda < torch_cuda and cuda_table.driver_runs_cuda(driver["version"], torch_cuda):
        add(Finding("DRIVER_CUDA_BELOW_TOOLKIT", WARNING,
                    f"driver {driver['version']} supports CUDA {driver_cuda}, toolkit is {torch_cuda}: "
                    "runs under minor-version compatibility, without PTX JIT of newer code",
                    f"upgrade the driver to {cuda_table.GA_DRIVER_FOR_CUDA.get(torch_cuda, 'the toolkit GA driver')} "
                    "for full support"))


def _check_sms(sms, facts, config, torch_cuda, add):
    targets = []
    arch_list = _torch_arch_list(facts, config, torch_cuda)
    for sm in sms:
        if sm not in cuda_table.FIRST_CUDA_FOR_SM:
            add(Finding("SM_UNKNOWN", BLOCKER, f"compute capability {sm} is not in this release's tables",
                        "upgrade this tool, or report the GPU model"))
            continue
        if not cuda_table.cuda_supports_sm(torch_cuda, sm):
            first = cuda_table.FIRST_CUDA_FOR_SM[sm]
            add(Finding("SM_NEEDS_NEWER_CUDA", BLOCKER,
                        f"SM {sm} needs CUDA >= {first}; torch is built for CUDA {torch_cuda}",
                        f"use a torch build for CUDA {first} or newer (stack_torch_cuda)"))
            continue
        if arch_list is not None and not covers_sm(arch_list, sm):
            add(Finding("TORCH_LACKS_SM", BLOCKER,
                        f"torch (CUDA {torch_cuda}) carries {' '.join(arch_list)}, nothing for SM {sm}",
                        "use a torch build whose arch list covers this GPU"))
        try:
            targets.append(fi.normalize_arch(config.flashinfer, torch_cuda, sm))
        except fi.ArchError as error:
            add(Finding("SM_NEEDS_NEWER_CUDA", BLOCKER, f"FlashInfer {config.flashinfer}: {error}",
                        "use a torch build (and so a toolkit) for CUDA 12.9 or newer"))
    return targets


def _torch_arch_list(facts, config, torch_cuda):
    torch = facts.get("torch") or {}
    if not config.venv_managed and torch.get("arch_list"):
        return torch["arch_list"]
    return arch_list_for_build(torch_cuda)


def _check_python(facts, config, add):
    """The CPython the managed venv is built with (bringup.platforms.venv_python), or None
    for an external venv; PYTHON_TOO_OLD when python3 is older than SGLang needs."""
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
    elif choice.source == "install":
        note = f" ({choice.note})" if choice.note else ""
        add(Finding("PYTHON_TOO_OLD", FIX,
                    f"the node has {seen}; SGLang needs CPython >= {MIN_PYTHON}",
                    f"deploy installs {', '.join(choice.packages)} from {dist.name}'s archive and builds the venv "
                    f"with {choice.path}{note}"))
    return choice


def _check_venv(facts, config, add):
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


def _check_toolkits(facts, home, torch_cuda, add):
    toolkits = facts.get("toolkits") or []
    chosen = [tk for tk in toolkits if tk.get("home") == home and same_major_minor(tk.get("version"), str(torch_cuda))]
    if not chosen:
        seen = ", ".join(f"{tk['home']} ({tk.get('version') or 'broken nvcc'})" for tk in toolkits) or "none"
        add(Finding("TOOLKIT_MISSING", FIX,
                    f"no CUDA {torch_cuda} toolkit at {home} (installed: {seen})",
                    f"deploy installs cuda-nvcc-{torch_cuda.major}-{torch_cuda.minor} and the JIT headers "
                    "from NVIDIA's repository"))
    others = [tk["home"] for tk in toolkits if tk.get("home") != home]
    if others:
        add(Finding("OTHER_TOOLKITS", INFO, f"also installed: {', '.join(others)}",
                    "nothing to do: they stay installed and stop resolving after deploy"))


def _check_resolution(facts, config, home, torch_cuda, sms, targets, add):
    resolved = facts.get("resolution") or {}
    resolved_home, via = resolved.get("cuda_home"), resolved.get("via", "none")
    detected = major_minor(resolved.get("version"))
    where = f"{resolved_home or 'nothing'} (via {via})"
    if resolved.get("nvcc_ok") and detected != torch_cuda:
        add(Finding("TOOLKIT_TORCH_MISMATCH", FIX,
                    f"the service environment resolves CUDA {detected} at {where}; "
                    f"torch is built for CUDA {torch_cuda}",
                    f"deploy sets CUDA_HOME={home} and its bin first on PATH for the service and login shells"))
    elif resolved_home != home or via != "CUDA_HOME":
        add(Finding("CUDA_HOME_NOT_EXPLICIT", FIX,
                    f"the service environment resolves {where}, not CUDA_HOME={home}",
                    f"deploy writes CUDA_HOME={home} into {config.service_env_file}"))
    if not sms:
        return
    # What runs now: the venv's FlashInfer when there is one, else the stack's.
    installed = parse((facts.get("flashinfer") or {}).get("version"))
    flashinfer_now = installed or config.flashinfer
    prediction = fi.predict(flashinfer_now, detected or torch_cuda, sms,
                            resolved.get("arch_list_env"), bool(resolved.get("nvcc_ok")))
    wanted = tuple(targets)
    if prediction.outcome == "ok" and prediction.targets == wanted:
        return
    add(Finding("FLASHINFER_ARCH_TRAP", FIX, _trap_message(prediction, flashinfer_now, detected, wanted, where),
                f"deploy installs CUDA {torch_cuda}, sets CUDA_HOME={home} and "
                f"FLASHINFER_CUDA_ARCH_LIST=\"{' '.join(wanted)}\" for the service"))


def _trap_message(prediction, flashinfer_now, detected, wanted, where):
    head = f"FlashInfer {flashinfer_now} with CUDA {detected} from {where}"
    if prediction.outcome == "empty_arch_set":
        return (f"{head} raises \"{prediction.detail}\" during arch detection and swallows it: the "
                "target set stays empty and every JIT build fails with \"FlashInfer requires GPUs "
                "with sm75 or higher\"")
    if prediction.outcome == "ptxas_failure":
        return f"{head}: {prediction.detail}; ptxas fails"
    if prediction.outcome == "import_failure":
        return f"{head}: FLASHINFER_CUDA_ARCH_LIST makes the import fail: {prediction.detail}"
    if prediction.outcome == "no_nvcc":
        return f"{head}: no nvcc runs there, so no JIT module can build"
    return (f"{head} builds {' '.join(prediction.targets)} instead of {' '.join(wanted)}"
            " (works, but not the planned build)")


def _writable_by_others(entry):
    """Whether a path component lets a non-root user change what is below it."""
    return entry["user"] != "root" or int(entry["mode"], 8) & 0o022


# stat's %F for a regular file (an empty one is named apart).
REGULAR_FILE = ("regular file", "regular empty file")


def _described(entry):
    """A path component as a finding names it.

    >>> _described({"path": "/etc/sglang", "user": "root", "mode": "755", "kind": "directory"})
    '/etc/sglang (directory, owner root, mode 755)'
    """
    return f"{entry['path']} ({entry['kind']}, owner {entry['user']}, mode {entry['mode']})"


def _unsafe_ancestor(chain, path):
    """The first component above ``path`` (``path`` itself left out) that a non-root
    user could change, or None.

    >>> _unsafe_ancestor([{"path": "/data/c", "user": "sglang", "mode": "755", "kind": "directory"},
    ...                   {"path": "/data", "user": "root", "mode": "1777", "kind": "directory"}], "/data/c")["path"]
    '/data'
    """
    return next((entry for entry in chain if entry["path"] != path and _writable_by_others(entry)), None)


def env_file_problem(entry, path):
    """Why root may not read the service env file found at ``path`` (its ``paths``
    entry), or None: it must be a regular file of root's that group and others cannot
    write (root loads it; a link would be followed).

    >>> env_file_problem({"path": "/etc/sglang/sglang.env", "user": "sglang", "mode": "666",
    ...                   "kind": "regular file"}, "/etc/sglang/sglang.env")
    'writable by a non-root user: root would load what that user wrote'
    >>> env_file_problem({"path": "/etc/sglang/sglang.env", "user": "root", "mode": "640",
    ...                   "kind": "regular file"}, "/etc/sglang/sglang.env") is None
    True
    """
    if entry is None or entry["path"] != path:
        return None
    if entry["kind"] == "symbolic link":
        return "a symbolic link: root would read whatever it points at"
    if entry["kind"] not in REGULAR_FILE:
        return "not a regular file"
    if _writable_by_others(entry):
        return "writable by a non-root user: root would load what that user wrote"
    return None


def cache_dir_problem(entry, path, service_user):
    """Why deploy may not hand ``path`` (its ``paths`` entry) to the service user as its
    JIT cache, or None: a link there would give its target away (``install -d -o``
    follows it), and a directory another user owns or anyone may write lets others
    plant the modules the service loads.

    >>> cache_dir_problem({"path": "/data/c", "user": "bob", "mode": "777", "kind": "symbolic link"},
    ...                   "/data/c", "sglang")
    'a symbolic link: deploy would hand whatever it points at to sglang'
    >>> cache_dir_problem({"path": "/var/cache/sglang", "user": "sglang", "mode": "755", "kind": "directory"},
    ...                   "/var/cache/sglang", "sglang") is None
    True
    """
    if entry is None or entry["path"] != path:
        return None
    if entry["kind"] == "symbolic link":
        return f"a symbolic link: deploy would hand whatever it points at to {service_user}"
    if entry["kind"] != "directory":
        return "not a directory"
    if entry["user"] not in ("root", service_user):
        return f"another user's, who could plant the modules {service_user} loads"
    if int(entry["mode"], 8) & 0o002:
        return f"writable by any user, who could plant the modules {service_user} loads"
    return None


def _check_paths(facts, config, add):
    """Root builds the managed venv and writes (and reads) the env file, and hands the
    cache directory to the service user: no non-root user may be able to change
    (rename, replace, plant) the env file or any directory on the way to them."""
    chains = facts.get("paths") or {}
    roles = [("env_file", config.service_env_file, "the service env file"),
             ("cache_dir", config.service_cache_dir, f"the JIT cache deploy gives to {config.service_user}")]
    if config.venv_managed:
        roles.append(("venv", config.venv_path, "the managed venv"))
    for role, setting, what in roles:
        # The path itself may not exist yet (its parent is then first), or be the venv's
        # link: its directories matter; the env file and the cache dir are judged below.
        entry = _unsafe_ancestor(chains.get(role, []), setting)
        if entry:
            add(Finding("UNSAFE_PATH", BLOCKER,
                        f"{_described(entry)} lets a non-root user change {setting}, where root builds {what}"
                        if role == "venv" else
                        f"{_described(entry)} lets a non-root user change {setting}, {what}",
                        f"use a path whose directories only root can write (the default is under "
                        f"/opt/sglang, /etc/sglang and /var/cache), or make {entry['path']} root's and not "
                        "group/other-writable"))
    first = (chains.get("env_file") or [None])[0]
    problem = env_file_problem(first, config.service_env_file)
    if problem:
        add(Finding("UNSAFE_PATH", BLOCKER,
                    f"the service env file {_described(first)} is {problem}; the probe did not read it",
                    f"make it a regular file owned by root and not group/other-writable "
                    f"(rm {config.service_env_file} if it is a link, then "
                    f"chown root {config.service_env_file} && chmod go-w {config.service_env_file}; deploy writes "
                    "a missing one), or set service_env_file to such a file"))
    first = (chains.get("cache_dir") or [None])[0]
    problem = cache_dir_problem(first, config.service_cache_dir, config.service_user)
    if problem:
        add(Finding("UNSAFE_PATH", BLOCKER,
                    f"the cache directory {_described(first)} is {problem}",
                    f"remove {config.service_cache_dir} (deploy creates it, owned by {config.service_user}) or make "
                    f"it a directory of {config.service_user}'s that others cannot write, or set service_cache_dir "
                    "elsewhere (the default is /var/cache/sglang)"))


def _check_venv_readable(facts, config, add):
    """The service runs (and the pre-warm builds with) an external venv as the service
    user: every directory on the way must let others through (the incident's venv was
    under /root, 0700)."""
    if config.venv_managed or not facts.get("torch"):
        return
    for entry in (facts.get("paths") or {}).get("venv", []):
        if entry["kind"] != "directory" or entry["user"] == config.service_user:
            continue
        needed = 0o005 if entry["path"] == config.venv_path else 0o001
        if int(entry["mode"], 8) & needed != needed:
            add(Finding("VENV_UNREADABLE", BLOCKER,
                        f"{entry['path']} (owner {entry['user']}, mode {entry['mode']}) keeps the service user "
                        f"{config.service_user} out of {config.venv_path}",
                        f"build the venv where {config.service_user} can read it (a venv's scripts name its path, "
                        f"so moving it breaks them), open {entry['path']} to others (chmod o+{'rx' if needed == 5 else 'x'}) "
                        "if that is acceptable, or let deploy build a managed venv (venv_managed: true)"))
            return


def service_account_problem(account, user, home):
    """Why deploy may not make ``user`` (home ``home``) its service account, or None: the
    account it runs as (the SSH user; a lockout: its shell set to nologin, its home moved),
    an account it did not create (no ``SERVICE_ACCOUNT_MARK`` in its GECOS: ``sshd``,
    ``nobody``, an operator's), or a home already there that is not the account's
    (``/var/lib/dpkg`` for ``dpkg``). ``account`` is the facts' ``account`` (None: not
    probed, nothing to say).

    >>> ours = {"uid": 998, "gid": 998, "gecos": SERVICE_ACCOUNT_MARK, "home": "/var/lib/sglang",
    ...         "shell": "/usr/sbin/nologin"}
    >>> service_account_problem({"user": "sglang", "entry": ours, "login_user": "root",
    ...     "home": {"path": "/var/lib/sglang", "user": "sglang", "mode": "755", "kind": "directory"}},
    ...     "sglang", "/var/lib/sglang") is None
    True
    >>> service_account_problem({"user": "sshd", "entry": {"uid": 101, "gid": 65534, "gecos": "",
    ...     "home": "/run/sshd", "shell": "/usr/sbin/nologin"}, "login_user": "root", "home": None},
    ...     "sshd", "/var/lib/sshd")
    'service_user sshd is an existing account gpu-bringup did not create (uid 101, shell /usr/sbin/nologin, home /run/sshd, GECOS empty): deploy would change its shell and home'
    """
    if not account:
        return None
    entry, found = account.get("entry"), account.get("home")
    if account.get("login_user") == user:
        where = f" (uid {entry['uid']}, shell {entry['shell']}, home {entry['home']})" if entry else ""
        return (f"service_user {user} is the account this deploy logs in as{where}: deploy would set its shell "
                "to nologin and move its home (a lockout)")
    if entry and entry.get("gecos") != SERVICE_ACCOUNT_MARK and not _earlier_install(entry, user, home):
        gecos = repr(entry["gecos"]) if entry.get("gecos") else "empty"
        return (f"service_user {user} is an existing account gpu-bringup did not create (uid {entry['uid']}, "
                f"shell {entry['shell']}, home {entry['home']}, GECOS {gecos}): deploy would change its shell and "
                "home")
    if found and (not entry or found.get("user") != user or found.get("kind") != "directory"):
        return (f"the service home {home} is already there ({found.get('kind')}, owner {found.get('user')}, mode "
                f"{found.get('mode')}) and is not {'the account' if entry else 'an account'} gpu-bringup created: "
                "deploy would make it the service user's")
    return None


def _earlier_install(entry, user, home):
    """Whether an unmarked account is the one an earlier release made before accounts were
    marked: the default name, a system uid, the planned home, nologin and an empty GECOS,
    exactly what ``server.user(system=True)`` gave it. The next deploy marks it; every
    other unmarked account (``sshd``, ``nobody``, an operator's, another service's) stays
    refused.

    >>> old = {"uid": 998, "gid": 998, "gecos": "", "home": "/var/lib/sglang", "shell": "/usr/sbin/nologin"}
    >>> _earlier_install(old, "sglang", "/var/lib/sglang"), _earlier_install(old, "redis", "/var/lib/redis")
    (True, False)
    >>> _earlier_install({**old, "uid": 1000}, "sglang", "/var/lib/sglang")
    False
    """
    return (user == DEFAULT_SERVICE_USER and 0 < entry.get("uid", 0) < 1000 and entry.get("home") == home
            and entry.get("shell") == "/usr/sbin/nologin" and not entry.get("gecos"))


def _check_service_account(account, user, home, add):
    problem = service_account_problem(account, user, home)
    if problem:
        add(Finding("SERVICE_USER_FOREIGN", BLOCKER, problem,
                    f"set service_user to a name of its own that no account or /var/lib directory has yet (the "
                    f"default is {DEFAULT_SERVICE_USER}); if {user} is an earlier gpu-bringup install's account "
                    f"(made before accounts were marked {SERVICE_ACCOUNT_MARK!r}), remove it first "
                    f"(userdel {user})"))


def _check_login_path(facts, home, add):
    path_nvcc = facts.get("path_nvcc")
    if path_nvcc and path_nvcc.get("path") != f"{home}/bin/nvcc":
        add(Finding("PATH_SHADOWS_CUDA_HOME", FIX,
                    f"a login shell's first nvcc is {path_nvcc['path']} "
                    f"(CUDA {path_nvcc.get('version') or 'unknown'}), not {home}/bin/nvcc",
                    f"deploy puts {home}/bin first on PATH in /etc/profile.d"))


def _check_symlink(facts, config, home, add):
    link = facts.get("cuda_symlink")
    if link and link != home:
        severity = FIX if config.cuda_manage_alternative else WARNING
        fix = ("deploy points the cuda alternative at it" if config.cuda_manage_alternative
               else "nothing resolves through it after deploy; set cuda_manage_alternative to move it")
        add(Finding("CUDA_SYMLINK_DRIFT", severity, f"/usr/local/cuda points at {link}, not {home}", fix))


def load_facts(path):
    """Read a facts document, or the ``facts`` of a validate report."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return data["facts"] if isinstance(data, dict) and "facts" in data and "gpus" not in data else data


def load_settings(path):
    """Settings from a YAML file (a mapping of bringup.config keys)."""
    with open(path, encoding="utf-8") as handle:
        settings = yamlload.load(handle) or {}  # an alias bomb is refused as it loads
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: expected a mapping of settings, got {type(settings).__name__}")
    return settings


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bringup.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("facts", help="facts JSON (a facts document or reports/<host>.json)")
    parser.add_argument("--config", help="YAML settings (the keys of bringup.config.Config)")
    parser.add_argument("--host", default="node", help="host name used in messages")
    args = parser.parse_args(argv)
    try:
        config = Config.from_data(load_settings(args.config) if args.config else {}, host=args.host)
        node = plan(load_facts(args.facts), config)
    except OSError as error:
        print(f"error: {args.host}: {error.strerror}: {error.filename}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as error:
        print(f"error: {args.host}: {args.facts} is not JSON ({error})", file=sys.stderr)
        return 2
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        print(f"error: {args.host}: {args.config} is not valid YAML"
              f"{f' (line {where.line + 1})' if where else ''}: {getattr(error, 'problem', error)}", file=sys.stderr)
        return 2
    except facts_schema.FactsError as error:
        print(f"error: {args.host}: {args.facts}: {error}; give a facts document (docs/facts.md) or a "
              "reports/<host>.json", file=sys.stderr)
        return 2
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"error: {args.host}: {checks.cut(str(error))}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - one line, never a traceback (control/host_plan.py does the same)
        print(f"error: {args.host}: planning failed: {type(error).__name__}: {checks.cut(' '.join(str(error).split()))}"
              "; this is a bug of this tool: report it with the facts document", file=sys.stderr)
        return 2
    print(json.dumps(node.as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
