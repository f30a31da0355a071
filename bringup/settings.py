"""Every operator setting, declared once: its name, its check (how its value is parsed
and validated: bringup/setting_checks.py, or the checks below), its default and its meaning.
``bringup.config.Config``'s fields, ``bringup.config.SCHEMA`` and docs/settings.md's table
(``python -m bringup.settings_page``) come from ``SETTINGS``.

Settings come from pyinfra host data (``inventory/hosts.yml``: ``all:`` and per-host
overrides; ``--data`` on the command line wins). Each is named with the prefix of its
concern (``PREFIXES``): ``stack_`` (what the venv runs), ``venv_``, ``service_``,
``cuda_repo_`` / ``cuda_`` (toolkit source and layout), ``target_`` (builders), ...
"""

import ipaddress
import os
import posixpath
import re
import shlex
from dataclasses import dataclass

from bringup import setting_checks as checks
from bringup.cuda import FIRST_CUDA_FOR_SM, MINOR_COMPAT_DRIVER_FOR_MAJOR
from bringup.health_accept import HealthAccept
from bringup.layout import DEFAULT_CACHE_DIR, DEFAULT_ENV_FILE, DEFAULT_SERVICE_USER, DEFAULT_VENV
from bringup.steps import DEPLOY_STEPS
from bringup.versions import parse

PREFIXES = ("stack_", "venv_", "service_", "cuda_", "target_", "gpu_", "prewarm_", "deploy_", "report_", "driver_", "metrics_")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Setting:
    """One setting: its ``name``, its ``check`` (called on the operator's value: returns
    the parsed value or raises ``checks.Invalid`` with the fix), its ``default``
    (whose type is the setting's), its ``meaning`` (docs/settings.md's column) and, where
    the default alone would not say it, how the page ``shown`` the default.

    >>> Setting("service_port", checks.Port(), "30000", meaning="port of the server").row()
    '| `service_port` | `30000` | port of the server |'
    """

    name: str
    check: checks.Check
    default: object
    meaning: str
    shown: str = ""

    @property
    def type(self):
        """The Python type of the setting's value: its default's."""
        return type(self.default)

    @property
    def shown_default(self):
        """The default as docs/settings.md shows it.

        >>> Setting("deploy_steps", checks.Check(), ("repo", "driver"), meaning="m").shown_default
        '`repo, driver`'
        """
        if self.shown:
            return self.shown
        if isinstance(self.default, bool):
            return f"`{str(self.default).lower()}`"
        if isinstance(self.default, tuple):
            return f"`{', '.join(self.default)}`" if self.default else "`[]`"
        return f"`{self.default}`" if self.default != "" else "(empty)"

    def row(self):
        """The setting's row of docs/settings.md's table."""
        return f"| `{self.name}` | {self.shown_default} | {self.meaning} |"


def declare(declarations, reserved=()):
    """The declarations by name, in their order; a name declared twice, without one of
    ``PREFIXES`` (a typo of it would not be named as unknown), not lower-case, or one of
    ``reserved`` (``Config``'s own attributes) is an error.

    >>> list(declare([Setting("service_port", checks.Port(), "30000", meaning="port")]))
    ['service_port']
    >>> declare([Setting("service_port", checks.Port(), "1", meaning="a")] * 2)
    Traceback (most recent call last):
    ...
    ValueError: setting service_port is declared twice: declare each setting once (bringup/settings.py)
    """
    declared = {}
    for item in declarations:
        if item.name in declared:
            raise ValueError(f"setting {item.name} is declared twice: declare each setting once (bringup/settings.py)")
        if not NAME.match(item.name):
            raise ValueError(f"setting {item.name}: use a lower-case name (letters, digits, _)")
        if not item.name.startswith(PREFIXES):
            raise ValueError(f"setting {item.name} has none of the prefixes {', '.join(PREFIXES)}: name it with "
                             "its concern's prefix")
        if item.name in reserved:
            raise ValueError(f"setting {item.name}: Config already has an attribute of that name")
        declared[item.name] = item
    return declared


# Module families files/prewarm.py knows how to build, and the activations it takes.
PREWARM_MODULES = ("sampling", "rope", "norm", "activation", "page", "cascade", "prefill", "decode",
                   "sglang-activation")
ACTIVATIONS = ("silu", "gelu", "gelu_tanh")


class PrewarmModule(checks.Check):
    """A module family of files/prewarm.py (``activation:<fn>`` with its function)."""

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


# Every setting: Config's fields in this order (bringup/config.py), docs/settings.md's rows.
SETTINGS = declare([
    Setting("stack_sglang", checks.Release(), "0.5.23",
            meaning="SGLang release of the venv"),
    Setting("stack_torch", checks.Release(), "2.14.1",
            meaning="torch release (pinned by SGLang)"),
    Setting("stack_torch_cuda", checks.CudaRelease(MINOR_COMPAT_DRIVER_FOR_MAJOR), "13.0",
            meaning="torch's CUDA build; decides the toolkit (`cuda-nvcc-13-0`)"),
    Setting("stack_flashinfer", checks.Release(), "0.7.2",
            meaning="flashinfer-python release (pinned by SGLang)"),
    Setting("venv_path", checks.NodePath(), DEFAULT_VENV,
            meaning="the SGLang venv"),
    Setting("venv_managed", checks.Bool(), True,
            meaning="`false`: the venv is built by someone else; its own torch decides the toolkit"),
    Setting("venv_lock", Lock(), "",
            shown="(empty: the node's own)",
            meaning="the lock (pins with hashes) the venv is built from; empty picks "
                    "`files/locks/sglang-<stack_sglang>-cp<XY>-<machine>.txt` for the CPython the venv is built with "
                    "and the node's CPU; `make lock` regenerates them"),
    Setting("venv_index_url", checks.Url(optional=True), "",
            shown="(empty: PyPI)",
            meaning="package index (a site mirror)"),
    Setting("venv_extra_index_urls", checks.ListOf(checks.Url()), (),
            meaning="extra package indexes"),
    Setting("venv_find_links", checks.ListOf(checks.Url(paths=True)), (),
            meaning="find-links pages or directories (a site wheelhouse)"),
    Setting("venv_no_index", checks.Bool(), False,
            meaning="use only `venv_find_links`"),
    Setting("venv_installer", checks.Choice("uv", "pip"), "uv",
            meaning="`uv` (bootstrapped from `files/locks/uv-*.txt` with its hashes; when the index lacks it the "
                    "build stops and says so, it never falls back silently) or `pip`"),
    Setting("venv_python", Interpreter(), "",
            shown="(empty: the distribution's own)",
            meaning="the absolute path of a CPython the operator installed, which the managed venv is built with, its"
                    " lock the one of its `X.Y` (`cp311` for a 3.11); empty: the distribution's own "
                    "(`bringup/platforms.py`). For Ubuntu 22.04, whose archive has no final CPython >= 3.11: "
                    "deadsnakes' `python3.11` (`/usr/bin/python3.11` with `python3.11-venv`) or a build of your image"
                    " under /opt (`/opt/cpython-3.11/bin/python3.11`). The probe runs it (`-I -c`: version, release "
                    "level, venv and ensurepip) only when it, every link on its way and every directory above them "
                    "are root's and writable by root only; else, or when it is missing, too old, a pre-release or "
                    "without venv support: `VENV_PYTHON_UNUSABLE`"),
    Setting("service_user", checks.UserName(), DEFAULT_SERVICE_USER,
            meaning="user the service and the pre-warm run as"),
    Setting("service_env_file", checks.OwnDirFile("sglang"), DEFAULT_ENV_FILE,
            meaning="environment file of the service"),
    Setting("service_cache_dir", checks.ServiceDir(), DEFAULT_CACHE_DIR,
            meaning="`FLASHINFER_WORKSPACE_BASE` and `SGLANG_CACHE_DIR`"),
    Setting("service_model", ModelId(), "",
            shown="(empty: unit written, not enabled)",
            meaning="the model `sglang serve` serves: a hub id (`org/name` or `name`, huggingface_hub's shape: "
                    "letters, digits, `-_.` between them, no `--` or `..`) or the absolute path of a model directory;"
                    " anything else (`--help`, `-rf`) is refused"),
    Setting("service_port", checks.Port(), "30000",
            meaning="port of the server"),
    Setting("service_args", KeylessArguments(), "",
            meaning="extra `sglang serve` arguments (e.g. `--tp 8`), checked with the release's own parser by the "
                    "node suite"),
    Setting("service_env", checks.Assignments(), (),
            shown="(empty)",
            meaning="variables of your own for the service env file (`KEY=value` words or a mapping); the plan's keys"
                    " cannot be set here; a value holding a URL's user or password "
                    "(`HF_ENDPOINT=https://user:pw@mirror`) is refused: put that assignment into the env file "
                    "yourself (root's, 0600), which deploy keeps and never shows"),
    Setting("service_enable", checks.Bool(), True,
            meaning="on a systemd host with a model: enable and start the unit, restarting it when its unit, "
                    "environment or venv changed (`false`: write the unit only)"),
    Setting("service_model_fetch", checks.Bool(), False,
            meaning="before the unit starts, fetch a hub `service_model` into the service's hub cache (the venv's own"
                    " `hf download`, as the service user, with the env file's `HF_ENDPOINT` and `HF_TOKEN`, its "
                    "progress printed); a no-op when the cache holds it; a failure fails the host in one line and the"
                    " unit is not (re)started ([deploy](deploy.md#where-the-model-comes-from))"),
    Setting("service_model_fetch_timeout", checks.Seconds(least=60, most=86400), 3600,
            meaning="seconds the fetch may take (60 to 86400)"),
    Setting("service_host", BindAddress(), "127.0.0.1",
            meaning="address `sglang serve` listens on (an IP address; SGLang's own default): a router or load "
                    "balancer on another host needs the node's address or `0.0.0.0`, and then `service_api_key_file` "
                    "(validate warns otherwise: `SERVICE_OPEN`)"),
    Setting("service_api_key_file", ApiKeyFile(), "",
            shown="(empty: no key; `api-key.yaml` beside `service_env_file` when `service_api_key_source` is set)",
            meaning="YAML file on the node holding SGLang's API key (`api-key: <key>`; `root:<service_user>`, mode "
                    "`0640`), given to `sglang serve --config`, which SGLang reads itself: the key is on no command "
                    "line (`ps`, `systemctl show`) and in no report. Without `service_api_key_source` it must be on "
                    "the node already: validate refuses it (`API_KEY_FILE_UNUSABLE`) when missing, a link, not "
                    "`root:<service_user>`, readable by others or unreadable to the service user; `--api-key` in "
                    "`service_args` is refused"),
    Setting("service_api_key_source", checks.ControlPath(), "",
            shown="(empty: none)",
            meaning="a file on the control machine (absolute, or relative to where pyinfra runs) holding `api-key: "
                    "<key>`: deploy uploads it to `service_api_key_file` whole, `root:<service_user>` 0640, after the"
                    " account step (so it works on a fresh node), restarting the service when it changed, and never "
                    "prints it; validate refuses a source that is missing, unreadable or gives SGLang no key when "
                    'read as YAML (`api-key: ""` is none), a link at the node\'s file, and a node file under a '
                    "directory a user other than root may write or one the service user cannot reach "
                    "(`API_KEY_FILE_UNUSABLE`); a `service_api_key_file` "
                    "inside `service_cache_dir` or the service user's home is an invalid setting"),
    Setting("service_ready_timeout", checks.Seconds(least=10, most=86400), 1200,
            meaning="seconds deploy's readiness gate waits, after it started or restarted the unit, for SGLang's "
                    "`/health` to answer 200 (10 to 86400): weights and CUDA graph capture take minutes on a large "
                    "model; a unit not ready in time fails its host with the cause found in its journal"),
    Setting("service_rollback", checks.Choice("never", "on-failure"), "never",
            meaning="what deploy does when its readiness gate fails after a change (`never` or `on-failure`): "
                    "`on-failure` puts the host back on the release it ran before (the venv `venvs/previous` names "
                    'with the unit and env file that went with it: the same as `rollback.py`, docs/deploy.md "Rolling'
                    ' back"), waits for it to serve, and fails the host with the verdict `rolled back` and the gate\'s'
                    " cause (exit status 1: the change did not serve). A managed venv only (`venv_managed: true`)"),
    Setting("service_group", checks.Pattern(r"^[a-z0-9][a-z0-9._-]{0,62}$", "use a group name of lower-case letters, "
                                             "digits and . _ - (at most 63), or leave it empty to serve alone",
                                             optional=True), "",
            shown="(empty: serves alone)",
            meaning="the serving group this host serves one model with (SGLang across nodes, `--nnodes`): hosts that "
                    "share the name are its members, ranked by inventory name (the first is the head); their "
                    "`service_model`, `service_args`, `service_group_port` and `stack_sglang` must be alike "
                    "([fleets](fleets.md#serving-groups)). Deploy refuses a member for now"),
    Setting("service_group_port", checks.Port(), "29500",
            meaning="the head's rendezvous port (`--dist-init-addr <head>:<port>`), open to the group's members"),
    Setting("service_group_address", checks.Pattern(r"^[0-9A-Za-z.:-]{1,253}$", "use the IP address or host name the "
                                                    "group's members reach this host by", optional=True), "",
            shown="(empty: `ssh_hostname`, else the inventory name)",
            meaning="the address the members of this host's group reach it by, when it is the head: the serving "
                    "network's, where SSH comes in by another"),
    Setting("service_group_interface", checks.Pattern(r"^[A-Za-z0-9_.:-]{1,15}$", "use a network interface's name "
                                                      "(ip link: at most 15 characters), or leave it empty",
                                                      optional=True), "",
            shown="(empty: the one that routes to the head)",
            meaning="the interface NCCL and Gloo use for a group member (`NCCL_SOCKET_IFNAME==<name>`, "
                    "`GLOO_SOCKET_IFNAME`); empty: the one the probe found routing to the head"),
    Setting("prewarm_modules", checks.ListOf(PrewarmModule()), ("sampling", "rope", "norm", "activation:silu", "activation:gelu",
                              "page", "cascade", "prefill", "decode", "sglang-activation"),
            meaning="JIT modules compiled before the service starts (`files/prewarm.py`): FlashInfer's, and SGLang's "
                    "own `sglang-activation` (one per dtype)"),
    Setting("prewarm_head_dims", checks.ListOf(checks.HeadDim()), ("128",),
            shown="`[128]`",
            meaning="head dims of the prefill/decode attention modules (your model's)"),
    Setting("prewarm_dtypes", checks.ListOf(checks.Choice("bf16", "fp16")), ("bf16",),
            shown="`[bf16]`",
            meaning="q/kv/o dtype of the attention modules (`bf16`, `fp16`)"),
    Setting("prewarm_deep_gemm", checks.Bool(), False,
            meaning="compile DeepGEMM's kernels for `service_model` with `python -m sglang.compile_deep_gemm` (the "
                    "server loaded on the node's GPUs; the service is stopped meanwhile) on GPUs of SM 9.0 or later; "
                    "for FP8 block-quantised models (DeepSeek-style), whose first start otherwise compiles them for "
                    "10-20 minutes"),
    Setting("prewarm_deep_gemm_timeout", checks.Seconds(least=60), 3600,
            meaning="seconds the DeepGEMM compile may take (its `--timeout`; 60 at least)"),
    Setting("cuda_repo_url", checks.Url(), "https://developer.download.nvidia.com/compute/cuda/repos",
            meaning="NVIDIA's CUDA repo or a mirror with its layout (`<url>/<distro>/<arch>/`)"),
    Setting("cuda_repo_key_url", checks.Url(optional=True), "",
            shown="(empty: `<repo>/<last 8 of fingerprint>.pub`)",
            meaning="the repo's signing key"),
    Setting("cuda_repo_fingerprint", checks.Fingerprint(), "EB693B3035CD5710E231E123A4B469963BF863CC",
            meaning="pinned fingerprint of that key"),
    Setting("cuda_repo_distro", checks.Pattern(r"^[a-z0-9]+$", "use a repository distro directory such as debian12 "
                                               "or ubuntu2404 (lower-case letters and digits)", optional=True), "",
            shown="(empty: from the OS)",
            meaning="force the repo's distro directory for an OS the table lacks (mirrors)"),
    Setting("cuda_toolkit_lock", Lock(), "",
            shown="(empty: `files/locks/cuda-<X.Y>-<distro>-<machine>.txt`)",
            meaning="the toolkit lock (`package=version` lines) deploy installs exactly; `make lock` writes them"),
    Setting("cuda_manage_alternative", checks.Bool(), True,
            meaning="point `/usr/local/cuda` at the chosen toolkit"),
    Setting("target_sms", checks.ListOf(_KNOWN_SM), (),
            meaning="compute capabilities to build for on a node without GPUs (image builders)"),
    Setting("gpu_standin", checks.Bool(), False,
            meaning="the node's GPUs are stand-ins (a test bed's recorded nvidia-smi, no device): the pre-warm "
                    "compiles for the plan's SMs without a device (`files/prewarm.py --no-device`) and the node suite"
                    " reports its CUDA checks as STAND-IN; the sandbox declares it for its nodes. Never set it on a "
                    "real node: there, CUDA that does not start fails the pre-warm and the suite"),
    Setting("gpu_health_accept", checks.ListOf(HealthAccept()), (),
            meaning="GPU health findings the operator accepts, each a code (`GPU_ROW_REMAP_PENDING`) or a code on "
                    "one GPU (`GPU_XID@0000:18:00.0`, its bus id); `GPU_XID:<Xid>` names one Xid (`GPU_XID:13@0000:18:00.0` "
                    "does not accept a later Xid 79 of that GPU): a blocker among them (a GPU that needs a reset, a "
                    "reboot or a replacement) is then a warning that names the acceptance, and deploy goes on"),
    Setting("gpu_diag", checks.Pattern(r"^(off|1|2)$", "use off (the default: no diagnostic), 1 (`dcgmi diag -r 1`, "
                                       "a quick check) or 2 (`dcgmi diag -r 2`, about two minutes of load)"), "off",
            meaning="NVIDIA's diagnostic, run by validate and deploy's own validation on a node with DCGM installed "
                    "(`dcgmi diag -r <level> -j`, stopped after 300 s at level 1, 900 s at level 2): each test failed "
                    "on a GPU is a finding (`GPU_DIAG_FAILED`, a blocker unless `gpu_health_accept` accepts it). It "
                    "needs idle GPUs: it is not run while the service's unit is active or a process holds a GPU "
                    "(`GPU_DIAG_NOT_RUN` says why); `off`: nothing runs"),
    Setting("gpu_diag_install", checks.Bool(), False,
            meaning="the DCGM step: deploy installs NVIDIA's DCGM (`datacenter-gpu-manager-4-core` and "
                    "`datacenter-gpu-manager-4-cuda13`, what `dcgmi diag` and so `gpu_diag` need) from the CUDA "
                    "repository the repo step configures, at the versions of its lock "
                    "(`files/locks/dcgm-4-<distro>-<machine>.txt`, `make lock-dcgm`), and enables and starts its "
                    "host engine (`nvidia-dcgm.service`); a platform without a lock is a blocker (`DCGM_LOCK_MISSING`)"
                    "; `false`: no DCGM package is installed"),
    Setting("driver_manage", checks.Bool(), False,
            meaning="the driver step: deploy installs NVIDIA's driver of `driver_branch` from NVIDIA's repository at "
                    "the version of its lock (`files/locks/driver-<branch>-<distro>-<machine>.txt`, `make lock`), the"
                    " kernel module flavour the GPUs need (built by DKMS, with the headers of the running kernel and "
                    "every newer installed one), Fabric Manager at the driver's version on NVSwitch nodes (and NVLSM "
                    "on NVLink5), `nvidia-persistenced`, the nouveau blacklist, and holds them all (and keeps them "
                    "out of unattended-upgrades); `false`: no driver package is ever touched"),
    Setting("driver_branch", checks.Pattern(r"^[0-9]{3,4}$", "use a driver branch number such as 580 (its lock "
                                            "is files/locks/driver-<branch>-<distro>-<machine>.txt)"), "580",
            meaning="the driver branch whose lock deploy installs"),
    Setting("driver_flavour", checks.Choice("auto", "open", "proprietary"), "auto",
            meaning="the kernel module flavour: `open` (required on Blackwell, NVIDIA's recommendation from Turing "
                    "on), `proprietary` (GPUs older than Turing only), `auto` (open unless a GPU is older than "
                    "Turing)"),
    Setting("driver_reboot", checks.Choice("never", "if-needed"), "never",
            meaning="a new kernel module loads only at a boot: `never` leaves the host's verdict `needs reboot` (exit"
                    " status 1; deploy runs nothing after the driver step that needs it); `if-needed` reboots the "
                    "host (pyinfra's `server.reboot`), waits for it and validates again"),
    Setting("driver_reboot_serving", checks.Bool(), False,
            meaning="`driver_reboot: if-needed` also reboots a host whose service unit is active (otherwise such a "
                    "host stays `needs reboot`)"),
    Setting("driver_reboot_timeout", checks.Seconds(least=60, most=7200), 900,
            meaning="seconds deploy waits for a rebooted host (60 to 7200), by the clock from the reboot (the last "
                    "try may end one SSH connect timeout and a 5 s uptime read later); one that does not come back is"
                    " `unreachable`"),
    Setting("deploy_steps", checks.ListOf(checks.Choice(*DEPLOY_STEPS), empty=(
                f"name at least one step ({', '.join(DEPLOY_STEPS)}; all by default): with none deploy has nothing "
                "to do (validate.py checks a node without changing it)")), DEPLOY_STEPS,
            meaning="the steps `deploy.py` runs (`validate.py` always checks the whole node)"),
    Setting("deploy_apt_lock_timeout", checks.Seconds(), 300,
            meaning="seconds deploy waits while another process holds apt's or dpkg's locks (unattended-upgrades on a"
                    " first boot) before it fails the host, nothing changed; apt-get itself waits as long (`-o "
                    "DPkg::Lock::Timeout`)"),
    Setting("deploy_lock_timeout", checks.Seconds(), 600,
            meaning="seconds a deploy waits while another deploy holds the node's deploy lock (one deploy at a time "
                    "per node, `/run/gpu-bringup/deploy.lock`) before it fails the host, nothing changed, naming the "
                    "holder (run, pid, start time, control machine and user)"),
    Setting("report_detail", checks.Bool(), False,
            meaning="print the host's full report as it is planned (as `pyinfra -v` does for every host), not only "
                    "its row of the fleet summary"),
    Setting("metrics_textfile_dir", checks.ControlPath(), "",
            shown="(empty: none)",
            meaning="a directory on the control machine (node_exporter's `--collector.textfile.directory`) where each"
                    " run writes `gpu_bringup_<host>.prom`: the host's verdict, findings by severity and code, the "
                    "stack's versions and the run's time "
                    "([fleets](fleets.md#readiness-in-prometheus-a-node_exporter-textfile))"),

])

