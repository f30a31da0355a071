"""Where everything lives on a node: the one module that spells a node path.

Three roots are settings (``venv_path``, ``service_env_file``, ``service_cache_dir``)
and the service user names its home; everything else is fixed here or derived from
those. The planner puts a ``NodeLayout`` into every plan, the tasks read their paths
from the plan, the probe and the node-side scripts receive them as environment
(``probe_inputs``; the node facts take one ready ``ProbeInputs``), and the node suite
checks the same layout.

Sources for the paths that are not ours:
- systemd.exec(5), "Environment variables in spawned processes": the ``PATH`` a
  service gets before its ``Environment=``/``EnvironmentFile=`` (Debian 12's systemd 252).
- flashinfer/jit/env.py (0.7.2): the JIT cache is
  ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<archs>/cached_ops``.
- pam_env(8): ``/etc/environment`` is read for every PAM session (SSH included).
"""

import ipaddress
import posixpath
import re
from dataclasses import asdict, dataclass

# Defaults of the three settings that place the stack (bringup.config uses them).
DEFAULT_VENV = "/opt/sglang/venv"
DEFAULT_ENV_FILE = "/etc/sglang/sglang.env"
DEFAULT_CACHE_DIR = "/var/cache/sglang"
DEFAULT_SERVICE_USER = "sglang"

# systemd's default PATH for services: what the unit sees before its env file.
SERVICE_BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Helper scripts the deploy installs, root-owned, beside nothing else.
LIBEXEC = "/usr/local/libexec/gpu-bringup"
HELPERS = ("service-env.sh", "with-service-env", "build-venv.sh", "prewarm.py", "torch_info.py", "session-bound",
           "root-may-run.sh")

# Files the deploy writes that no setting moves.
SERVICE_UNIT = "/etc/systemd/system/sglang.service"
PROFILE_SCRIPT = "/etc/profile.d/zz-cuda-home.sh"
PAM_ENVIRONMENT = "/etc/environment"
APT_KEYRING = "/etc/apt/keyrings/nvidia-cuda.gpg"
APT_SOURCE = "/etc/apt/sources.list.d/nvidia-cuda.sources"
APT_PREFERENCE = "/etc/apt/preferences.d/nvidia-cuda"
# The GECOS of the service account deploy creates: an account without it is not ours,
# and the deploy never takes it over (bringup/plan/account.py, tasks/service_account.py).
SERVICE_ACCOUNT_MARK = "gpu-bringup service account"
# One deploy at a time on a node (tasks/deploy_lock.py, files/deploy_lock.py): the lock
# and its record (<lock>.json) in a directory only root writes, gone at reboot.
DEPLOY_LOCK = "/run/gpu-bringup/deploy.lock"

# Node paths the tasks and facts name beside the layout's own (tests/unit/test_node_paths.py
# keeps every module outside bringup/ from spelling one of them).
# The link the ``cuda`` alternative manages (update-alternatives): the deploy points it
# at the plan's toolkit, and FlashInfer falls back to it (flashinfer/jit/cpp_ext.py).
CUDA_LINK = "/usr/local/cuda"
# apt's one-line list: the deploy may disable a duplicate NVIDIA entry in it, written whole.
APT_SOURCES_LIST = "/etc/apt/sources.list"
# Where a service account's home lies (FHS /var/lib: never under a cache cleaning may wipe).
SERVICE_HOMES = "/var/lib"
# Below the SSH user's own home: files travel there before root moves them into place.
UPLOAD_STAGE = ".cache/gpu-bringup-upload"
# In a built venv (venvs/<digest>/), written last by files/build-venv.sh: the lock's digest.
VENV_COMPLETE = ".complete"

# Below service_cache_dir: what files/prewarm.py records, and FlashInfer's own tree.
MANIFEST = "prewarm/manifest.json"
DEEP_GEMM_MANIFEST = "prewarm/deep_gemm.json"
FLASHINFER_CACHE = ".cache/flashinfer"
# Inside a managed venv (root's, built by us, never changed after): torch's compiled
# arch list, recorded when the venv is built or first seen (files/torch_info.py). An
# external venv is never written to: its torch is imported each time it is probed.
TORCH_RECORD = ".torch-arch.json"


@dataclass(frozen=True)
class LayoutDirectory:
    """One directory the deploy creates: its mode and owner are decided here, never by
    a umask (a script under ``umask 077`` that ran ``mkdir -p`` made a bare node's venv
    root 0700 once, and the service user could not reach its venv: issue 32).

    ``owner`` is ``root`` or the service user (its group is its own); ``reached``: the
    service user must traverse it (the unit and the pre-warm run there as that user), so
    deploy repairs a missing x bit for others on it (tasks/operations/files.py
    ``directory_if_missing``) and validate reports it (SERVICE_PATH_UNREACHABLE, a fix).

    >>> LayoutDirectory("venv root", "/opt/sglang", "0755", "root", True).reached
    True
    """

    role: str
    path: str
    mode: str
    owner: str
    reached: bool


@dataclass(frozen=True)
class NodeLayout:
    """Every path of one node's bring-up.

    >>> layout = NodeLayout.for_settings("/opt/sglang/venv", "/etc/sglang/sglang.env", "/var/cache/sglang", "sglang")
    >>> layout.venvs, layout.manifest, layout.service_home
    ('/opt/sglang/venvs', '/var/cache/sglang/prewarm/manifest.json', '/var/lib/sglang')
    """

    venv: str
    venv_root: str
    venvs: str
    venv_locks: str
    venv_tools: str
    venv_download_cache: str
    env_file: str
    cache_dir: str
    manifest: str
    deep_gemm_manifest: str
    flashinfer_cache: str
    torch_record: str
    service_user: str
    service_home: str
    unit: str
    libexec: str
    profile_script: str
    pam_environment: str
    apt_keyring: str
    apt_source: str
    apt_preference: str

    @classmethod
    def for_settings(cls, venv, env_file, cache_dir, service_user, managed=True):
        root = posixpath.dirname(venv)
        return cls(
            venv=venv,
            venv_root=root,
            venvs=f"{root}/venvs",
            venv_locks=f"{root}/locks",
            venv_tools=f"{root}/tools",
            venv_download_cache=f"{root}/cache",
            env_file=env_file,
            cache_dir=cache_dir,
            manifest=f"{cache_dir}/{MANIFEST}",
            deep_gemm_manifest=f"{cache_dir}/{DEEP_GEMM_MANIFEST}",
            flashinfer_cache=f"{cache_dir}/{FLASHINFER_CACHE}",
            torch_record=f"{venv}/{TORCH_RECORD}" if managed else "",
            service_user=service_user,
            service_home=f"{SERVICE_HOMES}/{service_user}",
            unit=SERVICE_UNIT,
            libexec=LIBEXEC,
            profile_script=PROFILE_SCRIPT,
            pam_environment=PAM_ENVIRONMENT,
            apt_keyring=APT_KEYRING,
            apt_source=APT_SOURCE,
            apt_preference=APT_PREFERENCE,
        )

    @property
    def helpers(self):
        """The helper scripts the deploy installs into ``libexec``."""
        return HELPERS

    def helper(self, name):
        """The node path of a helper script (``HELPERS``)."""
        return f"{self.libexec}/{name}"

    # The directories and names the tasks derive from the layout's files: here, so that
    # no task takes a path apart.
    @property
    def env_dir(self):
        """The env file's directory (root's: the env step makes it).

        >>> DEFAULT_LAYOUT.env_dir
        '/etc/sglang'
        """
        return posixpath.dirname(self.env_file)

    @property
    def releases(self):
        """Where deploy records the service's releases (files/release.sh: what was live,
        the venv link's target with the unit and env file that went with it), root's only.

        >>> DEFAULT_LAYOUT.releases
        '/opt/sglang/releases'
        """
        return f"{self.venv_root}/releases"

    @property
    def entry_point(self):
        """The program the unit's ExecStart runs: the venv's ``sglang`` script, whose ``#!``
        line names the interpreter the kernel starts (files/probe.d/entry_point.sh probe_entry_point).

        >>> DEFAULT_LAYOUT.entry_point
        '/opt/sglang/venv/bin/sglang'
        """
        return f"{self.venv}/bin/sglang"

    @property
    def unit_name(self):
        """The service's systemd unit by name (what systemctl takes).

        >>> DEFAULT_LAYOUT.unit_name
        'sglang.service'
        """
        return posixpath.basename(self.unit)

    @property
    def stage_dirs(self):
        """The directories the deploy's stage files land in (tasks/operations/files.py:
        beside each file it writes whole), which the deploy lock cleans of a killed run's.

        >>> DEFAULT_LAYOUT.stage_dirs[:3]
        ('/etc', '/etc/apt', '/etc/apt/keyrings')
        """
        files = (self.env_file, self.profile_script, self.pam_environment, self.apt_keyring, self.apt_source,
                 self.apt_preference, self.unit, APT_SOURCES_LIST)
        return tuple(sorted({*(posixpath.dirname(path) for path in files), self.libexec, self.venv_locks}))

    def managed_paths(self, managed=True):
        """What root manages outside the service's cache, as role -> (path, the setting
        that places it): the venv (and, for a managed one, its root with venvs/, locks/,
        tools/ and cache/), the env file and its directory, the helpers, the unit, the
        service's home, and the files of the toolkit's environment and apt source. No
        path of these may lie in the cache, nor the cache in one (the service user owns it).

        >>> sorted(DEFAULT_LAYOUT.managed_paths())[:3]
        ['PAM environment', 'apt keyring', 'apt preference']
        >>> DEFAULT_LAYOUT.managed_paths()["venv root"]
        ('/opt/sglang', 'venv_path')
        """
        paths = {"venv": (self.venv, "venv_path")}
        if managed:
            paths |= {"venv root": (self.venv_root, "venv_path"), "venvs": (self.venvs, "venv_path"),
                      "venv locks": (self.venv_locks, "venv_path"), "venv tools": (self.venv_tools, "venv_path"),
                      "venv download cache": (self.venv_download_cache, "venv_path")}
        paths |= {
            "env file": (self.env_file, "service_env_file"),
            "env file's directory": (self.env_dir, "service_env_file"),
            "helpers directory": (self.libexec, "fixed"),
            "unit": (self.unit, "fixed"),
            "service home": (self.service_home, "service_user"),
            "profile script": (self.profile_script, "fixed"),
            "PAM environment": (self.pam_environment, "fixed"),
            "apt keyring": (self.apt_keyring, "fixed"),
            "apt source": (self.apt_source, "fixed"),
            "apt preference": (self.apt_preference, "fixed"),
        }
        return paths

    def directories(self, managed=None):
        """Every directory the deploy creates, with its mode, owner and whether the
        service user must reach it (``LayoutDirectory``): the one table the tasks take
        modes from. The venv root's (venvs/, locks/, tools/, cache/, releases/) only for a
        managed venv (``managed``; None: the layout's own, which records torch's arch
        list only in a managed venv); the service's home is useradd's (its owner's).

        >>> [(d.path, d.mode, d.owner, d.reached) for d in DEFAULT_LAYOUT.directories()][:2]
        [('/opt/sglang', '0755', 'root', True), ('/opt/sglang/venvs', '0755', 'root', True)]
        >>> [d.role for d in DEFAULT_LAYOUT.directories(managed=False)]
        ['env directory', 'helpers directory', 'service cache']
        """
        venv = (LayoutDirectory("venv root", self.venv_root, "0755", "root", True),
                LayoutDirectory("venvs", self.venvs, "0755", "root", True),
                LayoutDirectory("venv locks", self.venv_locks, "0755", "root", False),
                LayoutDirectory("venv tools", self.venv_tools, "0755", "root", False),
                LayoutDirectory("venv download cache", self.venv_download_cache, "0755", "root", False),
                LayoutDirectory("releases", self.releases, "0700", "root", False))
        if managed is None:
            managed = bool(self.torch_record)
        if not managed:
            venv = ()
        return (*venv,
                # systemd reads the env file as root: the service user never opens it.
                LayoutDirectory("env directory", self.env_dir, "0755", "root", False),
                LayoutDirectory("helpers directory", self.libexec, "0755", "root", True),
                LayoutDirectory("service cache", self.cache_dir, "0755", self.service_user, True))

    def directory(self, role):
        """The ``LayoutDirectory`` of ``role``.

        >>> DEFAULT_LAYOUT.directory("releases").mode
        '0700'
        """
        return next(entry for entry in self.directories(managed=True) if entry.role == role)

    def probe_inputs(self):
        """The environment the probe (files/probe.d/) reads: what to look at on the node.

        >>> sorted(NodeLayout.for_settings("/v/venv", "/e", "/c", "u").probe_inputs())[:3]
        ['PROBE_CACHE_DIR', 'PROBE_ENTRY_POINT', 'PROBE_ENV_FILE']
        """
        return {
            "PROBE_VENV": self.venv,
            "PROBE_ENTRY_POINT": self.entry_point,
            "PROBE_ENV_FILE": self.env_file,
            "PROBE_CACHE_DIR": self.cache_dir,
            "PROBE_MANIFEST": self.manifest,
            "PROBE_JIT_ROOT": self.flashinfer_cache,
            "PROBE_SERVICE_PATH": SERVICE_BASE_PATH,
            "PROBE_UNIT": self.unit_name,
            "PROBE_TORCH_RECORD": self.torch_record,
            "PROBE_SERVICE_USER": self.service_user,
            "PROBE_SERVICE_HOME": self.service_home,
        }

    def as_dict(self):
        return asdict(self)


# The service's settings that decide where huggingface_hub looks for a model and asks for
# it (huggingface_hub 1.33.0, constants.py: the cache's HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
# HF_HOME, XDG_CACHE_HOME; ENDPOINT from HF_ENDPOINT; HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE):
# no secret among them (HF_TOKEN is not one; the probe says only whether it is set).
MODEL_ENV_KEYS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_ENDPOINT",
                  "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
# Where huggingface_hub keeps a model (huggingface_hub 1.33.0, constants.py: HF_HUB_CACHE
# defaults to HUGGINGFACE_HUB_CACHE, which defaults to $HF_HOME/hub, HF_HOME to
# $XDG_CACHE_HOME/huggingface, XDG_CACHE_HOME to ~/.cache): the first of these settings
# that is set, followed by its suffix; none set: HUB_CACHE_DEFAULT under the service's home.
# The probe's model section walks this table (facts/probe_script.py hands it over).
HUB_CACHE_ORDER = (("HF_HUB_CACHE", ""), ("HUGGINGFACE_HUB_CACHE", ""), ("HF_HOME", "/hub"),
                   ("XDG_CACHE_HOME", "/huggingface/hub"))
HUB_CACHE_DEFAULT = ".cache/huggingface/hub"
HUB_CACHE_KEYS = tuple(key for key, _ in HUB_CACHE_ORDER)


def hub_cache_path(value):
    """Whether ``value`` places the hub cache where the probe and the model fetch look:
    an absolute path or one under ``~/`` (the service's home), with no ``$`` (huggingface_hub
    expands variables of the service's environment) and not ``~user``.

    >>> [hub_cache_path(value) for value in ("/srv/hf", "~/hf", "", "hf", "~other/hf", "/srv/$USER")]
    [True, True, False, False, False, False]
    """
    return "$" not in value and (value.startswith("/") or value == "~" or value.startswith("~/"))


# A host name as RFC 1123 (section 2.1) allows one: dot-separated labels of letters, digits and
# hyphens, none starting or ending with a hyphen, each at most 63 characters, 253 in all.
# Matched whole (fullmatch): a "$" would also match before a trailing newline.
HOST_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def probe_address(value):
    """``value`` as the probe may be given it to look a route up (``PROBE_ROUTE_TO``): an IP
    address (v4 or v6, written as ``ipaddress`` writes it) or a host name; ValueError naming
    the value and the fix for anything else. Nothing else ever reaches the probe's shell.

    >>> probe_address("10.20.0.11"), probe_address("gpu-head-01.example.internal"), probe_address("fe80::1")
    ('10.20.0.11', 'gpu-head-01.example.internal', 'fe80::1')
    >>> probe_address("10.0.0.1; reboot")
    Traceback (most recent call last):
    ...
    ValueError: '10.0.0.1; reboot' is neither an IP address nor a host name: give the address (10.20.0.11) or the DNS name (gpu-head-01) the node reaches it by

    An IPv6 zone (``fe80::1%eth0``) is refused: ``ipaddress`` takes any text after the ``%``
    (blanks, ``$(...)``, a newline), and a zone names an interface of one node only.
    """
    text = str(value)
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        address = None
    if address is not None and "%" not in text:
        return str(address)
    labels = text.rstrip(".").split(".")
    if (0 < len(text) <= 253 and all(HOST_LABEL.fullmatch(label) for label in labels)
            and not text.replace(".", "").isdigit()):
        return text
    raise ValueError(f"{text!r} is neither an IP address nor a host name: give the address (10.20.0.11) or the DNS "
                     "name (gpu-head-01) the node reaches it by")


@dataclass(frozen=True)
class ProbeInputs:
    """One node's probe inputs, ready: the layout the probe (files/probe.d/) looks at and the env
    file keys whose values it reports (the plan's, never the operator's). The caller
    builds it from the host's settings (control/host_plan.py, a task from its plan's
    layout); facts/node.py only turns it into the probe's environment.

    ``model`` is ``service_model`` and ``model_env`` the (key, value) pairs of
    ``service_env`` among MODEL_ENV_KEYS (deploy writes them into the env file, so they
    are the service's, whatever the file holds now): the probe's model section.

    >>> inputs = ProbeInputs(DEFAULT_LAYOUT, ("CUDA_HOME", "PATH"))
    >>> inputs.environment(("gpus",))["PROBE_SECTIONS"], inputs.environment()["PROBE_ENV_KEYS"]
    ('gpus', 'CUDA_HOME PATH')
    >>> str(ProbeInputs.defaults())
    'venv=/opt/sglang/venv (managed), env_file=/etc/sglang/sglang.env, cache_dir=/var/cache/sglang, service_user=sglang'
    >>> ProbeInputs(DEFAULT_LAYOUT, model="Qwen/Qwen3-0.6B", model_env=(("HF_HOME", "/srv/hf"),)).environment()[
    ...     "PROBE_MODEL_ENV_HF_HOME"]
    '/srv/hf'
    """

    layout: NodeLayout
    env_keys: tuple = ()
    model: str = ""
    model_env: tuple = ()
    # The operator's CPython (venv_python), looked at only when set.
    venv_python: str = ""
    # The level of NVIDIA's diagnostic to run (gpu_diag: "1" or "2"); empty: none.
    gpu_diag: str = ""
    # The address or host name whose route the probe reports (a serving group's head); empty:
    # none. Checked here (probe_address): nothing but an address or a name reaches the shell.
    route_to: str = ""

    def __post_init__(self):
        if self.route_to:
            object.__setattr__(self, "route_to", probe_address(self.route_to))

    @classmethod
    def defaults(cls):
        """The inputs of a node with every setting at its default (a fact run from the
        pyinfra CLI, which passes none)."""
        return cls(DEFAULT_LAYOUT)

    def environment(self, sections=()):
        """The probe's environment: ``PROBE_SECTIONS`` (``sections``; none: all of them),
        the layout's paths (``NodeLayout.probe_inputs``), ``PROBE_ENV_KEYS``."""
        return {**({"PROBE_SECTIONS": " ".join(sections)} if sections else {}), **self.layout.probe_inputs(),
                **({"PROBE_ENV_KEYS": " ".join(self.env_keys)} if self.env_keys else {}),
                **({"PROBE_MODEL": self.model} if self.model else {}),
                **{f"PROBE_MODEL_ENV_{key}": value for key, value in self.model_env if key in MODEL_ENV_KEYS},
                **({"PROBE_VENV_PYTHON": self.venv_python} if self.venv_python else {}),
                **({"PROBE_GPU_DIAG": self.gpu_diag} if self.gpu_diag else {}),
                **({"PROBE_ROUTE_TO": self.route_to} if self.route_to else {})}

    def __str__(self):
        # pyinfra names a fact's arguments by str() (its log lines, and the operation
        # cases' fact keys): the settings that place the layout, not its 21 paths.
        layout = self.layout
        managed = "managed" if layout.torch_record else "external"
        keys = f", env_keys={' '.join(self.env_keys)}" if self.env_keys else ""
        model = f", model={self.model}" if self.model else ""
        python = f", venv_python={self.venv_python}" if self.venv_python else ""
        diag = f", gpu_diag={self.gpu_diag}" if self.gpu_diag else ""
        route = f", route_to={self.route_to}" if self.route_to else ""
        return (f"venv={layout.venv} ({managed}), env_file={layout.env_file}, cache_dir={layout.cache_dir}, "
                f"service_user={layout.service_user}{keys}{model}{python}{diag}{route}")


DEFAULT_LAYOUT = NodeLayout.for_settings(DEFAULT_VENV, DEFAULT_ENV_FILE, DEFAULT_CACHE_DIR, DEFAULT_SERVICE_USER)


def toolkit_home(cuda):
    """Where NVIDIA's packages install the CUDA toolkit ``cuda`` (X.Y): its ``CUDA_HOME``.

    >>> toolkit_home("13.0")
    '/usr/local/cuda-13.0'
    """
    return f"/usr/local/cuda-{cuda}"
