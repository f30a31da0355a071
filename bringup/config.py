"""Settings: every operator setting, its default, and its validation. One place.

Settings come from pyinfra host data (``inventory/hosts.yml``: ``all:`` and per-host
overrides; ``--data`` on the command line wins). Each is named with the prefix of
its concern: ``stack_`` (what the venv runs), ``venv_``, ``service_``,
``cuda_repo_`` / ``cuda_`` (toolkit source and layout), ``target_`` (builders).
docs/settings.md's table repeats these defaults.
"""

import ipaddress
import os
import posixpath
import re
import shlex
from dataclasses import dataclass, fields, replace

from packaging.version import Version

from bringup import envfile, redact
from bringup import setting_checks as checks
from bringup.api_key import KEY_FILE_NAME
from bringup.cuda import FIRST_CUDA_FOR_SM, MINOR_COMPAT_DRIVER_FOR_MAJOR
from bringup.layout import DEFAULT_CACHE_DIR, DEFAULT_ENV_FILE, DEFAULT_SERVICE_USER, DEFAULT_VENV, NodeLayout
from bringup.locks import venv_lock_target
from bringup.planned_env import PLANNED_ENV_KEYS
from bringup.steps import DEPLOY_STEPS
from bringup.versions import parse

PREFIXES = ("stack_", "venv_", "service_", "cuda_", "target_", "gpu_", "prewarm_", "deploy_", "report_", "driver_", "metrics_")
# Module families files/prewarm.py knows how to build, and the activations it takes.
PREWARM_MODULES = ("sampling", "rope", "norm", "activation", "page", "cascade", "prefill", "decode",
                   "sglang-activation")
ACTIVATIONS = ("silu", "gelu", "gelu_tanh")


class ConfigError(ValueError):
    """Settings are invalid: one line per problem, each naming the host, the setting,
    the value and the fix. ``service_env``'s values and URL credentials are redacted
    (bringup/redact.py): the message reaches stderr, the log and reports/summary.json.

    >>> print(ConfigError("n1", [("service_env", {"HF_TOKEN": "hf_secret123"}, "bad")]))
    n1: setting service_env={'HF_TOKEN': '<redacted>'} is invalid: bad
    """

    def __init__(self, host, problems):
        self.host, self.problems = host, problems
        super().__init__("\n".join(self._line(host, *problem) for problem in problems))

    @staticmethod
    def _line(host, key, value, fix):
        # redact: service_env's values and URL credentials never shown; checks.shown: a
        # value is bounded (an alias bomb expands to megabytes).
        value, fix = redact.setting(key, value, fix)
        return f"{host}: setting {checks.cut(str(key))}={checks.shown(value)} is invalid: {checks.cut(fix, 600)}"


class PrewarmModule(checks.Check):
    def parse(self, value):
        value = checks.text(value)
        family, _, argument = value.partition(":")
        if family not in PREWARM_MODULES or (argument and (family != "activation" or argument not in ACTIVATIONS)):
            raise checks.Invalid(f"use modules of files/prewarm.py: {', '.join(PREWARM_MODULES)} "
                                 f"(activation:{'|'.join(ACTIVATIONS)})")
        return value


class Interpreter(checks.Check):
    """The absolute path of a CPython the operator installed (deadsnakes' python3.11, a
    build under /opt), or empty: the distribution's own (bringup.platforms).

    >>> Interpreter().parse("/opt/cpython-3.11/bin/python3.11"), Interpreter().parse("")
    ('/opt/cpython-3.11/bin/python3.11', '')
    """

    def parse(self, value):
        value = checks.text(value)
        if not value:
            return value
        if not value.startswith("/") or posixpath.normpath(value) != value or not checks.PATH_CHARS.match(value):
            raise checks.Invalid("use the absolute path of a CPython >= 3.11 installed by root, such as "
                                 "/opt/cpython-3.11/bin/python3.11 or /usr/bin/python3.11 (deadsnakes), or leave "
                                 "it empty for the distribution's")
        if any(checks.inside(value, tree) for tree in checks.SHARED_TREES):
            raise checks.Invalid("use an interpreter outside directories every user can write (/tmp, /var/tmp, "
                                 "/dev/shm): root runs it")
        return value


class ModelId(checks.Check):
    """A Hugging Face hub id (``org/name`` or ``name``: huggingface_hub's
    validate_repo_id, utils/_validators.py: letters, digits, ``-``, ``_``, ``.``, not
    starting or ending with ``-`` or ``.``, no ``--`` or ``..``, not ending in ``.git``, at
    most 96 characters), or the absolute, normalised path of a model directory; empty:
    no model. Anything else is refused, so no value can read as an option (``--help``,
    ``-rf``) where it becomes an argument (``hf download``, ``sglang serve --model-path``).

    >>> ModelId()("Qwen/Qwen3-0.6B"), ModelId()("gpt2"), ModelId()("/models/llama-3"), ModelId()("")
    ('Qwen/Qwen3-0.6B', 'gpt2', '/models/llama-3', '')
    >>> ModelId()("--help")
    Traceback (most recent call last):
    ...
    bringup.setting_checks.Invalid: use a hub id such as Qwen/Qwen3-0.6B (letters, digits, - _ . between them, no -- or ..) or the absolute path of a model directory such as /models/Qwen3-0.6B
    """

    HUB_ID = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?/)?[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
    FIX = ("use a hub id such as Qwen/Qwen3-0.6B (letters, digits, - _ . between them, no -- or ..) or the absolute "
           "path of a model directory such as /models/Qwen3-0.6B")

    def parse(self, value):
        value = checks.text(value)
        if not value:
            return value
        if value.startswith("/"):
            if posixpath.normpath(value) != value or not checks.PATH_CHARS.match(value):
                raise checks.Invalid(self.FIX)
            return value
        if (not self.HUB_ID.match(value) or "--" in value or ".." in value or value.endswith(".git")
                or len(value) > 96):
            raise checks.Invalid(self.FIX)
        return value


class Lock(checks.Check):
    """A lock file on the control machine (relative to the directory pyinfra runs in),
    or empty: the plan picks the lock of the node's CPython and CPU."""

    def parse(self, value):
        value = checks.text(value)
        if not value:
            return value
        if not checks.PATH_CHARS.match(value):
            raise checks.Invalid("use the path of a lock file (files/locks/sglang-<version>-cp<XY>-<machine>.txt), "
                                 "or leave it empty for the node's own")
        if not os.path.isfile(value):
            raise checks.Invalid(f"no such file in {os.getcwd()}; use a lock under files/locks (make lock writes "
                                 "them), or leave it empty for the one matching the node")
        return value


_KNOWN_SM = checks.OneOfTable(
    FIRST_CUDA_FOR_SM, parse,
    f"use compute capabilities this release knows: {', '.join(str(v) for v in sorted(FIRST_CUDA_FOR_SM))}")

# setting -> how its value is parsed and checked (bringup/setting_checks.py)
SCHEMA = {
    "stack_sglang": checks.Release(),
    "stack_torch": checks.Release(),
    "stack_torch_cuda": checks.CudaRelease(MINOR_COMPAT_DRIVER_FOR_MAJOR),
    "stack_flashinfer": checks.Release(),
    "venv_path": checks.NodePath(),
    "venv_managed": checks.Bool(),
    "venv_lock": Lock(),
    "venv_index_url": checks.Url(optional=True),
    "venv_extra_index_urls": checks.ListOf(checks.Url()),
    "venv_find_links": checks.ListOf(checks.Url(paths=True)),
    "venv_no_index": checks.Bool(),
    "venv_installer": checks.Choice("uv", "pip"),
    "venv_python": Interpreter(),
    "service_user": checks.UserName(),
    "service_env_file": checks.OwnDirFile("sglang"),
    "service_cache_dir": checks.ServiceDir(),
    "service_model": ModelId(),
    "service_port": checks.Port(),
    "service_args": checks.Arguments(),
    "service_env": checks.Assignments(),
    "service_enable": checks.Bool(),
    "service_model_fetch": checks.Bool(),
    "service_model_fetch_timeout": checks.Seconds(least=60, most=86400),
    "prewarm_modules": checks.ListOf(PrewarmModule()),
    "prewarm_head_dims": checks.ListOf(checks.HeadDim()),
    "prewarm_dtypes": checks.ListOf(checks.Choice("bf16", "fp16")),
    "prewarm_deep_gemm": checks.Bool(),
    "prewarm_deep_gemm_timeout": checks.Seconds(least=60),
    "cuda_repo_url": checks.Url(),
    "cuda_repo_key_url": checks.Url(optional=True),
    "cuda_repo_fingerprint": checks.Fingerprint(),
    "cuda_repo_distro": checks.Pattern(r"^[a-z0-9]+$", "use a repository distro directory such as debian12 or "
                                       "ubuntu2404 (lower-case letters and digits)", optional=True),
    "cuda_toolkit_lock": Lock(),
    "cuda_manage_alternative": checks.Bool(),
    "target_sms": checks.ListOf(_KNOWN_SM),
    "gpu_standin": checks.Bool(),
    "driver_manage": checks.Bool(),
    "driver_branch": checks.Pattern(r"^[0-9]{3,4}$", "use a driver branch number such as 580 (its lock is "
                                    "files/locks/driver-<branch>-<distro>-<machine>.txt)"),
    "driver_flavour": checks.Choice("auto", "open", "proprietary"),
    "driver_reboot": checks.Choice("never", "if-needed"),
    "driver_reboot_serving": checks.Bool(),
    "driver_reboot_timeout": checks.Seconds(least=60, most=7200),
    "service_ready_timeout": checks.Seconds(least=10, most=86400),
    "service_rollback": checks.Choice("never", "on-failure"),
    "deploy_steps": checks.ListOf(checks.Choice(*DEPLOY_STEPS), empty=(
        f"name at least one step ({', '.join(DEPLOY_STEPS)}; all by default): with none deploy has nothing "
        "to do (validate.py checks a node without changing it)")),
    "deploy_apt_lock_timeout": checks.Seconds(),
    "deploy_lock_timeout": checks.Seconds(),
    "report_detail": checks.Bool(),
}


# --- Where the server listens, and its API key (kept out of every command line) ---

class BindAddress(checks.Check):
    """The address ``sglang serve --host`` binds: an IP address (``0.0.0.0``/``::``
    for every interface); names are refused, as they may resolve to anything."""

    def parse(self, value):
        value = checks.text(value)
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            raise checks.Invalid("use an IP address to listen on: 127.0.0.1 (this node only), the address of "
                                 "the interface your router reaches, or 0.0.0.0 (every interface)") from None


class ApiKeyFile(checks.NodePath):
    """A YAML file on the node holding SGLang's API key (``api-key: <key>``), given to
    ``sglang serve --config``: SGLang 0.5.23 reads ``--config`` files in-process
    (sglang/srt/utils/server_args_config_parser.py) and has no environment variable for
    the key, so its value never reaches the command line ``ps`` or ``systemctl show``
    prints to every user. Empty: no key. SGLang takes only ``.yaml``/``.yml`` files."""

    def parse(self, value):
        if checks.text(value) == "":
            return ""
        value = super().parse(value)
        if not value.endswith((".yaml", ".yml")):
            raise checks.Invalid("use a path ending in .yaml or .yml (SGLang's --config takes only YAML), "
                                 "e.g. /etc/sglang/api-key.yaml")
        return value


# SGLang's options that take a key: on the command line it is in the unit's ExecStart
# (``systemctl show``) and the process's argv (``ps``), which every user reads.
KEY_OPTIONS = ("--api-key", "--admin-api-key")


class KeylessArguments(checks.Arguments):
    """``service_args``: arguments that split like a shell line, and carry no key.

    >>> KeylessArguments()("--tp 8")
    '--tp 8'
    """

    def parse(self, value):
        value = super().parse(value)
        if any(word.split("=", 1)[0] in KEY_OPTIONS for word in shlex.split(value)):
            raise checks.Invalid("an API key in service_args would be on the command line every user can read "
                                 "(ps, systemctl show): remove --api-key/--admin-api-key and put `api-key: <key>` "
                                 "in the YAML file service_api_key_file names")
        return value


SCHEMA |= {"service_host": BindAddress(), "service_api_key_file": ApiKeyFile(), "service_args": KeylessArguments()}


class ControlPath(checks.Check):
    """A path on the control machine (the one pyinfra runs on), absolute or relative to
    the directory pyinfra runs in; empty: not set.

    >>> ControlPath()("/var/lib/node_exporter/textfile")
    '/var/lib/node_exporter/textfile'
    >>> ControlPath()("")
    ''
    """

    def parse(self, value):
        value = checks.text(value)
        if len(value) > 1024:
            raise checks.Invalid("use a path of at most 1024 characters")
        return value


SCHEMA |= {"metrics_textfile_dir": ControlPath(), "service_api_key_source": ControlPath()}


def _cache_overlaps(config, data):
    """The problem (at most one) of a cache directory that shares a path with what root
    manages: the cache is handed to the service user (``install -d -o``), so a venv root,
    lock or env file inside it, or it inside one of them, would be the service's to swap.

    >>> _cache_overlaps(Config(service_cache_dir="/opt/sglang/locks"), {})[0][2].split(":")[0]
    'it is inside the venv root /opt/sglang (venv_path)'
    """
    cache = config.service_cache_dir
    for role, (path, setting) in config.layout.managed_paths(managed=config.venv_managed).items():
        if checks.inside(cache, path) or checks.inside(path, cache):
            where = "is" if cache == path else "is inside" if checks.inside(cache, path) else "holds"
            why = (f"the service user ({config.service_user}) gets the cache, so it may share no path with what "
                   "root manages")
            if "service_cache_dir" in data or setting not in data:
                return [("service_cache_dir", data.get("service_cache_dir", cache),
                         f"it {where} the {role} {path} ({setting}): {why}; use a directory of its own, such as "
                         f"{DEFAULT_CACHE_DIR if cache != DEFAULT_CACHE_DIR else '/srv/sglang-cache'}")]
            return [(setting, data[setting], f"the {role} {path} would be in or hold the service's cache {cache} "
                     f"(service_cache_dir): {why}; place it outside {cache}")]
    return []


@dataclass(frozen=True)
class Config:
    """The settings of one host, validated. Build it with ``Config.from_data``."""

    # The serving stack; torch's CUDA build decides the toolkit (sglang 0.5.23 pins
    # torch 2.14.1, a cu130 build, and flashinfer-python 0.7.2).
    stack_sglang: str = "0.5.23"
    stack_torch: str = "2.14.1"
    stack_torch_cuda: str = "13.0"
    stack_flashinfer: str = "0.7.2"
    # The SGLang venv; venv_managed: False means someone else builds it and only
    # its own torch is validated.
    venv_path: str = DEFAULT_VENV
    venv_managed: bool = True
    # The lock (pins with hashes, control-side path) the managed venv is built from;
    # empty: files/locks/sglang-<stack_sglang>-cp<XY>-<machine>.txt for the CPython
    # the venv is built with and the node's CPU.
    venv_lock: str = ""
    # Where packages come from (site mirrors): an index URL (empty: PyPI), extra
    # indexes, find-links pages, and venv_no_index to use find-links only.
    venv_index_url: str = ""
    venv_extra_index_urls: tuple = ()
    venv_find_links: tuple = ()
    venv_no_index: bool = False
    # uv (bootstrapped from files/locks/uv-*.txt) or pip; uv falls back to pip
    # when the index cannot serve uv.
    venv_installer: str = "uv"
    # The CPython the managed venv is built with, installed by the operator (Ubuntu 22.04
    # has no final CPython >= 3.11 of its own); empty: the distribution's (bringup.platforms).
    venv_python: str = ""
    # The service: user, environment file, JIT cache root (FLASHINFER_WORKSPACE_BASE
    # and SGLANG_CACHE_DIR both point here, so pre-warm and serve share one cache).
    service_user: str = DEFAULT_SERVICE_USER
    service_env_file: str = DEFAULT_ENV_FILE
    service_cache_dir: str = DEFAULT_CACHE_DIR
    # What the SGLang unit serves: model (path or hub name; empty leaves the unit
    # disabled), port, and extra `sglang serve` arguments.
    service_model: str = ""
    service_port: str = "30000"
    service_args: str = ""
    # Variables of your own the service env file gets (managed: deploy keeps them
    # as set here); they may not name a key the plan manages.
    service_env: tuple = ()
    # On a systemd host with a model: enable and start the unit (false: write it only,
    # for nodes staged before their model or their GPUs are ready).
    service_enable: bool = True
    # Fetch a hub service_model into the service's hub cache before the unit starts (the
    # venv's `hf download`, as the service user, with its progress), at most the timeout.
    service_model_fetch: bool = False
    service_model_fetch_timeout: int = 3600
    # Where the server listens (an IP address; 127.0.0.1 by default, as SGLang's own
    # default: a router on another host needs the node's address or 0.0.0.0), and the
    # node's YAML file with its API key (root:<service user> 0640, `api-key: <key>`),
    # passed as `--config`: the key itself is never on a command line or in a report.
    service_host: str = "127.0.0.1"
    service_api_key_file: str = ""
    # A file on the control machine holding `api-key: <key>` that deploy uploads to
    # service_api_key_file (default: api-key.yaml beside service_env_file), root:<service
    # group> 0640, after the service account exists (bringup/api_key.py).
    service_api_key_source: str = ""
    # Seconds deploy waits, after it started or restarted the unit, for SGLang's health
    # endpoint to answer (weights, CUDA graph capture: minutes on a large model).
    service_ready_timeout: int = 1200
    # on-failure: a host whose service fails deploy's readiness gate after a change is
    # put back on the release it ran before (rollback.py's own mechanism), and fails.
    service_rollback: str = "never"
    # JIT modules compiled before the service starts: FlashInfer's (sampling, rope,
    # norm, activation:<fn>, page, cascade, prefill, decode; attention modules for
    # each head dim and dtype below) and SGLang's own (sglang-activation, per dtype).
    prewarm_modules: tuple = ("sampling", "rope", "norm", "activation:silu", "activation:gelu",
                              "page", "cascade", "prefill", "decode", "sglang-activation")
    prewarm_head_dims: tuple = ("128",)
    prewarm_dtypes: tuple = ("bf16",)
    # DeepGEMM's kernels for service_model, compiled by `python -m sglang.compile_deep_gemm`
    # on nodes whose GPUs use it (SM 9.0 and later): it loads the model on the GPUs (the
    # service is stopped meanwhile), so it is asked for, and given at most the timeout.
    prewarm_deep_gemm: bool = False
    prewarm_deep_gemm_timeout: int = 3600
    # NVIDIA's CUDA apt repository, or a site mirror of it (same layout:
    # <url>/<distro>/<arch>/), its signing key and the key's pinned fingerprint.
    cuda_repo_url: str = "https://developer.download.nvidia.com/compute/cuda/repos"
    cuda_repo_key_url: str = ""
    cuda_repo_fingerprint: str = "EB693B3035CD5710E231E123A4B469963BF863CC"
    # Force the repo's distro directory (e.g. "debian12") for an OS the table does
    # not map; only sensible with a mirror that carries it.
    cuda_repo_distro: str = ""
    # The toolkit lock (package=version lines, control-side path); empty: the one
    # `make lock` wrote for the node's CUDA, distro and CPU.
    cuda_toolkit_lock: str = ""
    # Point the /usr/local/cuda alternative at the chosen toolkit.
    cuda_manage_alternative: bool = True
    # Compute capabilities to build for on a node without GPUs (image builders).
    target_sms: tuple = ()
    # The node's GPUs are stand-ins (a test bed's recorded nvidia-smi, no device): the
    # pre-warm compiles for the plan's SMs without one, and the node suite reports its
    # CUDA checks as stand-ins. Declared by the test bed (the sandbox registers it for
    # its nodes), never inferred from CUDA being unavailable; never set on a real node.
    gpu_standin: bool = False
    # The driver step (off: no driver package is ever touched): NVIDIA's driver of
    # driver_branch at its lock's version, the kernel module flavour the GPUs need
    # (auto: open, unless a GPU is older than Turing), Fabric Manager/NVLSM on NVSwitch
    # nodes, held. A new module loads at the next boot: driver_reboot never leaves the
    # host "needs reboot"; if-needed reboots it (a serving host only with
    # driver_reboot_serving) and waits driver_reboot_timeout seconds for it.
    driver_manage: bool = False
    driver_branch: str = "580"
    driver_flavour: str = "auto"
    driver_reboot: str = "never"
    driver_reboot_serving: bool = False
    driver_reboot_timeout: int = 900
    # The steps deploy.py runs (all by default): repo, toolkit, env, account, venv,
    # prewarm, service. validate.py always checks the whole node.
    deploy_steps: tuple = DEPLOY_STEPS
    # How long deploy waits for apt's and dpkg's locks (unattended-upgrades holds them
    # for minutes on a node's first boot) before it fails the host, nothing changed.
    deploy_apt_lock_timeout: int = 300
    # How long a deploy waits while another deploy holds the node's deploy lock (one
    # deploy at a time per node: tasks/deploy_lock.py) before it fails the host, nothing
    # changed, naming the holder.
    deploy_lock_timeout: int = 600
    # Print each host's full report (as pyinfra -v does) instead of its summary row only.
    report_detail: bool = False
    # A directory on the control machine (node_exporter's --collector.textfile.directory):
    # each run writes gpu_bringup_<host>.prom there (control/metrics.py). Empty: none.
    metrics_textfile_dir: str = ""

    @classmethod
    def from_data(cls, data, host="node"):
        """Validate settings from a mapping (pyinfra host data) against ``SCHEMA``; an
        unknown key with a settings prefix is an error, so a typo never silently keeps
        a default. Raises ConfigError naming every problem.

        >>> Config.from_data({"stack_torch_cuda": "12.8"}).stack_torch_cuda
        '12.8'
        >>> Config.from_data({"service_user": "root", "venv_path": "/tmp/v"}, host="n1")
        Traceback (most recent call last):
        ...
        bringup.config.ConfigError: n1: setting service_user='root' is invalid: use an unprivileged account: \
the service and the pre-warm never run as root
        n1: setting venv_path='/tmp/v' is invalid: use a path outside directories every user can write \
(/tmp, /var/tmp, /dev/shm)
        """
        values, problems = {}, []
        for key, value in dict(data or {}).items():
            if key in SCHEMA:
                try:
                    values[key] = SCHEMA[key](value)
                except checks.Invalid as invalid:
                    problems.append((key, value, str(invalid)))
            elif isinstance(key, str) and key.startswith(PREFIXES):
                problems.append((key, value, f"unknown setting; known: {', '.join(sorted(SCHEMA))}"))
        parent = posixpath.dirname(values.get("venv_path", DEFAULT_VENV))
        if values.get("venv_managed", True) and "venv_path" in values and parent in checks.SYSTEM_DIRS:
            problems.append(("venv_path", data["venv_path"], f"a managed venv needs a directory of its own (deploy "
                             f"keeps venvs/, locks/ and tools/ beside it), not {parent}: use e.g. "
                             f"{parent.rstrip('/')}/sglang/venv, or set venv_managed: false for a venv built "
                             "by someone else"))
        for key, value in values.get("service_env", ()):
            if envfile.writable(key, value):
                problems.append(("service_env", data["service_env"], f"{envfile.writable(key, value)} "
                                 "(the env file must read the same in systemd and in the node's reader)"))
            if key in PLANNED_ENV_KEYS:
                problems.append(("service_env", data["service_env"], f"{key} is decided by the plan; set only "
                                 "variables of your own (the plan manages "
                                 f"{', '.join(PLANNED_ENV_KEYS)})"))
        if not any(key in ("venv_path", "venv_managed", "service_env_file", "service_cache_dir", "service_user")
                   for key, _, _ in problems):
            problems += _cache_overlaps(replace(cls(), **values), data)
        if values.get("service_api_key_source"):
            # Deploy's upload (stage, chown, rename) in a directory the service user owns
            # could be swapped for a link; the node's other directories: KeyFileAccess.
            owned = replace(cls(), **values)
            key = values.get("service_api_key_file") or posixpath.join(
                posixpath.dirname(owned.service_env_file), KEY_FILE_NAME)
            setting = "service_api_key_file" if values.get("service_api_key_file") else "service_env_file"
            for tree, where in ((owned.service_cache_dir, "service_cache_dir"),
                                (owned.layout.service_home, "the service user's home")):
                if checks.inside(key, tree):
                    problems.append((setting, data[setting],
                                     f"the API key file {key} is inside {tree} ({where}), which the service user "
                                     f"owns: deploy uploads the key only where root alone writes; use e.g. "
                                     f"/etc/sglang/{KEY_FILE_NAME}"))
        if problems:
            raise ConfigError(host, problems)
        if values.get("service_api_key_source") and not values.get("service_api_key_file"):
            values["service_api_key_file"] = posixpath.join(
                posixpath.dirname(values.get("service_env_file", DEFAULT_ENV_FILE)), KEY_FILE_NAME)
        return replace(cls(), **values)

    @property
    def lock_target(self):
        """(CPython ``X.Y``, machine) an explicit venv lock was resolved for, from its
        name's ``-cpXY-<machine>.txt`` suffix (``make lock`` names them so), else None.

        >>> Config(venv_lock="files/locks/sglang-0.5.23-cp312-aarch64.txt").lock_target
        ('3.12', 'aarch64')
        """
        return venv_lock_target(self.venv_lock)

    @property
    def layout(self):
        """Where this host's stack lives (bringup.layout.NodeLayout).

        >>> Config().layout.manifest
        '/var/cache/sglang/prewarm/manifest.json'
        """
        return NodeLayout.for_settings(self.venv_path, self.service_env_file, self.service_cache_dir,
                                       self.service_user, managed=self.venv_managed)

    @property
    def torch_cuda(self):
        """torch's CUDA build as a Version."""
        return Version(self.stack_torch_cuda)

    @property
    def flashinfer(self):
        """The stack's FlashInfer release as a Version."""
        return Version(self.stack_flashinfer)

    def as_dict(self):
        """The settings as plain data (for reports): ``service_env``'s values and URL
        credentials redacted (bringup/redact.py).

        >>> Config(service_env=(("HF_TOKEN", "hf_abc"),)).as_dict()["service_env"]
        (('HF_TOKEN', '<redacted>'),)
        """
        values = {item.name: getattr(self, item.name) for item in fields(self)}
        return redact.data({**values, "service_env": redact.pairs(self.service_env)})
