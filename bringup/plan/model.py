"""What a plan holds: the node's plan (``NodePlan``) and the plan of each step, plain
frozen data the tasks act on, and the planner's constants.

    >>> NodePlan(steps=("repo", "env")).uses_apt, NodePlan().ok
    (True, True)
"""

from dataclasses import asdict, dataclass, field

from packaging.version import Version

from bringup import redact
from bringup.findings import BLOCKER
from bringup.layout import LIBEXEC, NodeLayout
from bringup.prewarm import prewarm_gap
from bringup.steps import APT_STEPS

MIN_PYTHON = Version("3.11")  # sglang 0.5.23: Requires-Python >=3.11
# Dev headers and stubs FlashInfer's JIT compiles and links against, beside nvcc.
# cuBLAS headers: FlashInfer 0.7.2's norm module includes cublasLt.h. The toolkit lock
# (files/locks/cuda-X.Y-<distro>-<machine>.txt) pins these and what they depend on.
TOOLKIT_PACKAGES = ("cuda-nvcc", "cuda-cudart-dev", "cuda-crt", "cuda-nvvm", "cuda-cccl",
                    "cuda-driver-dev", "libcurand-dev", "libcublas-dev")


def nvvm_package(cuda_major):
    """NVIDIA's name for the NVVM package (cicc, libNVVM, libdevice) of a CUDA major:
    ``cuda-nvvm-12-X`` up to CUDA 12, ``libnvvm-13-X`` from CUDA 13 (beside
    ``libnvptxcompiler-13-X``). Sources: public pins against NVIDIA's debian12/x86_64
    repository (``libnvvm-13-0=13.0.88-1``, softnanolab/boileroom
    boileroom/models/esmfold2/kit/kit_wheels.sh) and Ubuntu's archive, which packages
    CUDA 13.x under NVIDIA's names (libnvvm-13-1 to libnvvm-13-4, packages.ubuntu.com);
    no public source names a ``cuda-nvvm-13-*``.

    >>> nvvm_package(12), nvvm_package(13)
    ('cuda-nvvm', 'libnvvm')
    """
    return "cuda-nvvm" if int(cuda_major) < 13 else "libnvvm"


def toolkit_packages(cuda):
    """The toolkit's packages for CUDA ``cuda`` (a Version), under NVIDIA's names.

    >>> toolkit_packages(Version("13.0"))[:4]
    ('cuda-nvcc-13-0', 'cuda-cudart-dev-13-0', 'cuda-crt-13-0', 'libnvvm-13-0')
    >>> toolkit_packages(Version("12.8"))[3]
    'cuda-nvvm-12-8'
    """
    suffix = f"{cuda.major}-{cuda.minor}"
    return tuple(f"{nvvm_package(cuda.major) if name == 'cuda-nvvm' else name}-{suffix}" for name in TOOLKIT_PACKAGES)
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
    # The command that resolves the NVIDIA locks against this repository (what deploy
    # names when it does not serve a locked version).
    lock_command: str = ""


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
    # The rule for what root may run (files/root-may-run.sh), asked before root runs the
    # venv's python (which loads the interpreter's prefix).
    root_may_run: str = f"{LIBEXEC}/root-may-run.sh"
    # The service's release records (files/release.sh): the build's cleanup keeps every
    # venv one of them names, so a rollback always finds its venv.
    releases: str = ""


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
    # Compile without a GPU (files/prewarm.py --no-device): the node is GPU-less or its
    # GPUs are declared stand-ins (bringup.plan.prewarm.compiles_without_device).
    no_device: bool = False

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
class ModelFetchPlan:
    """The hub model deploy fetches into the service's hub cache before the unit starts
    (``service_model_fetch``): the venv's own ``hf download``, run as the service user
    with the service's environment (its HF_ENDPOINT, HF_TOKEN), at most ``timeout`` s."""

    model: str
    cache: str
    hf: str
    user: str
    home: str
    env_file: str
    timeout: int = 3600
    base_path: str = ""
    runner: str = ""
    session_bound: str = ""


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
    # The driver's daemons the node has (service.driver_units): the unit wants them and
    # starts after them; none on a node without them.
    after_units: tuple = ()
    # Where deploy's readiness gate asks SGLang's health endpoint (bringup/serving.py)
    # and how long it waits for an answer (service_ready_timeout).
    port: str = "30000"
    ready_timeout: int = 1200
    # What deploy does when the gate fails after a change (service_rollback).
    rollback: str = "never"
    # The key file on the control machine deploy uploads to api_key_file (service_api_key_source),
    # and the node's directory that holds api_key_file.
    api_key_source: str = ""
    api_key_dir: str = ""


@dataclass(frozen=True)
class DriverPlan:
    """NVIDIA's driver as deploy converges it (docs/deploy.md, "The driver step");
    ``manage`` False: the driver step touches nothing. The fields are the issue-23
    contract's: the packages at the lock's versions, the other flavour's to purge, the
    holds, the headers, the units, the files deploy writes, and the reboot policy.
    """

    manage: bool
    branch: str = ""
    version: str = ""
    flavour: str = ""
    lock: str = ""
    install: tuple = ()
    remove: tuple = ()
    hold: tuple = ()
    headers: tuple = ()
    units: tuple = ()
    blacklist_file: str = ""
    blacklist: str = ""
    initramfs: tuple = ()
    unattended_file: str = ""
    unattended: str = ""
    reboot_for: str = ""
    reboot: str = "never"
    reboot_serving: bool = False
    reboot_timeout: int = 900
    service_active: bool = False
    changes: tuple = ()
    # Canonical's driver (bringup/canonical_driver.py): "adopt", "replace" or "" (none on the node),
    # its packages as found ("name=version") and why it is replaced.
    canonical: str = ""
    canonical_packages: tuple = ()
    canonical_reason: str = ""


@dataclass(frozen=True)
class DcgmPlan:
    """NVIDIA's DCGM as deploy installs it (``gpu_diag_install``; docs/deploy.md, "The DCGM
    step"); ``install`` False: the DCGM step touches nothing. ``pins`` are the lock's
    ``name=version`` lines, ``unit`` the host engine's unit deploy enables and starts;
    ``restart``: the running engine predates DCGM's installed packages (a run stopped
    between apt and the restart), so deploy restarts it even when apt changes nothing."""

    install: bool
    lock: str = ""
    pins: tuple = ()
    unit: str = ""
    restart: bool = False


@dataclass(frozen=True)
class GroupPlan:
    """This node's place in its serving group (issue 38, bringup/group.py): the group's name,
    its rank (0: the head), every member in rank order, the head's rendezvous address, the
    arguments appended to the unit's command and the environment the group puts in its env file."""

    name: str
    rank: int
    members: tuple
    dist_init_addr: str
    args: tuple
    env: dict = field(default_factory=dict)


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
    # The hub model deploy fetches before the unit starts (service_model_fetch), or None.
    model_fetch: ModelFetchPlan = None
    # Env keys deploy writes for a reason of its own (HF_HUB_OFFLINE: the hub does not answer,
    # the cache holds the model), recorded beside the env file (bringup/planned_env.py), and
    # those it wrote before whose reason is gone: taken back (key -> the value it wrote).
    env_owned: dict = field(default_factory=dict)
    env_drop: dict = field(default_factory=dict)
    # The model judged (its fact names service_model): deploy's record then says what it owns
    # now, also where an interrupted take-back left it naming a key the file no longer holds.
    env_settled: bool = False
    driver: DriverPlan = field(default_factory=lambda: DriverPlan(manage=False))
    dcgm: DcgmPlan = field(default_factory=lambda: DcgmPlan(install=False))
    manage_alternative: bool = True
    steps: tuple = ()
    # Who held apt's locks when the node was probed, how long deploy waits for them, and
    # how long for another deploy's lock on the node (tasks/deploy_lock.py).
    apt_locks: list = field(default_factory=list)
    apt_lock_timeout: int = 300
    deploy_lock_timeout: int = 600
    # A serving group's member: its place and what the group decides for it; None serves alone.
    group: GroupPlan = None

    def runs(self, step):
        """Whether deploy.py runs ``step`` (bringup.steps.DEPLOY_STEPS) on this node."""
        return step in self.steps

    @property
    def uses_apt(self):
        """Whether a step deploy.py runs here installs packages (and so needs apt's locks)."""
        return any(step in self.steps for step in APT_STEPS)

    def locked_pins(self):
        """``{lock file: [name=version, ...]}`` of the steps deploy runs here that install
        NVIDIA's packages at a lock's versions (the driver step only with ``driver_manage``, the DCGM
        step only with ``gpu_diag_install``).

        >>> node = NodePlan(steps=("toolkit",), toolkit=ToolkitPlan("13.0", "/opt/toolkit", (), lock="t.txt",
        ...                                                         pins=("cuda-nvcc-13-0=13.0.88-1",)),
        ...                 driver=DriverPlan(manage=True, lock="d.txt", install=("nvidia-open=580.95.05-1",)))
        >>> node.locked_pins()
        {'t.txt': ['cuda-nvcc-13-0=13.0.88-1']}
        """
        locks = {}
        if self.runs("driver") and self.driver.manage and self.driver.lock:
            locks[self.driver.lock] = [pin for pin in self.driver.install if "=" in pin]
        if self.runs("toolkit") and self.toolkit is not None and self.toolkit.lock:
            locks[self.toolkit.lock] = [pin for pin in self.toolkit.pins if "=" in pin]
        if self.runs("dcgm") and self.dcgm.install and self.dcgm.lock:
            locks[self.dcgm.lock] = [pin for pin in self.dcgm.pins if "=" in pin]
        return {lock: pins for lock, pins in locks.items() if pins}

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
            "model_fetch": asdict(self.model_fetch) if self.model_fetch else {},
            "env_owned": dict(self.env_owned),
            "env_drop": dict(self.env_drop),
            "driver": asdict(self.driver) if self.driver else {},
            "dcgm": asdict(self.dcgm) if self.dcgm else {},
            "steps": list(self.steps),
            "apt_locks": list(self.apt_locks),
            "apt_lock_timeout": self.apt_lock_timeout,
            "deploy_lock_timeout": self.deploy_lock_timeout,
            # Only a member's: the plan of a host serving alone is what it was before groups.
            # Its env values are interface and HCA names from the probe, never secrets.
            **({"group": asdict(self.group)} if self.group else {}),
        })
