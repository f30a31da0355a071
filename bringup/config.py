"""Settings: every operator setting, its default, and its validation. One place.

Settings come from pyinfra host data (``inventory/hosts.yml``: ``all:`` and per-host
overrides; ``--data`` on the command line wins). Each is named with the prefix of
its concern: ``stack_`` (what the venv runs), ``venv_``, ``service_``,
``cuda_repo_`` / ``cuda_`` (toolkit source and layout), ``target_`` (builders).
The README's settings table repeats these defaults.
"""

import posixpath
import re
from dataclasses import dataclass, fields, replace

from packaging.version import Version

from bringup.cuda import FIRST_CUDA_FOR_SM, driver_floor_for_cuda
from bringup.versions import parse

# make lock names locks <stack>-cp<major><minor>-<machine>.txt.
LOCK_NAME = re.compile(r"-cp(?P<major>3)(?P<minor>\d+)-(?P<machine>x86_64|aarch64)\.txt$")
PREFIXES = ("stack_", "venv_", "service_", "cuda_", "target_", "prewarm_")
# Module families files/prewarm.py knows how to build.
PREWARM_MODULES = ("sampling", "rope", "norm", "activation", "page", "cascade", "prefill", "decode")


class ConfigError(ValueError):
    """A setting is invalid: names the host, the setting, the value and the fix."""

    def __init__(self, host, key, value, fix):
        self.host, self.key, self.value, self.fix = host, key, value, fix
        super().__init__(f"{host}: setting {key}={value!r} is invalid: {fix}")


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
    venv_path: str = "/opt/sglang/venv"
    venv_managed: bool = True
    # The lock (pins with hashes, control-side path) the managed venv is built from.
    venv_lock: str = "files/locks/sglang-0.5.23-cp311-x86_64.txt"
    # Where packages come from (site mirrors): an index URL (empty: PyPI), extra
    # indexes, find-links pages, and venv_no_index to use find-links only.
    venv_index_url: str = ""
    venv_extra_index_urls: tuple = ()
    venv_find_links: tuple = ()
    venv_no_index: bool = False
    # uv (bootstrapped from files/locks/uv-*.txt) or pip; uv falls back to pip
    # when the index cannot serve uv.
    venv_installer: str = "uv"
    # The service: user, environment file, JIT cache root (FLASHINFER_WORKSPACE_BASE
    # and SGLANG_CACHE_DIR both point here, so pre-warm and serve share one cache).
    service_user: str = "sglang"
    service_env_file: str = "/etc/sglang/sglang.env"
    service_cache_dir: str = "/var/cache/sglang"
    # What the SGLang unit serves: model (path or hub name; empty leaves the unit
    # disabled), port, and extra launch_server arguments.
    service_model: str = ""
    service_port: str = "30000"
    service_args: str = ""
    # FlashInfer JIT modules compiled before the service starts: names of
    # files/prewarm.py (sampling, rope, norm, activation:<fn>, page, cascade,
    # prefill, decode); attention modules for each head dim and dtype below.
    prewarm_modules: tuple = ("sampling", "rope", "norm", "activation:silu", "activation:gelu",
                              "page", "cascade", "prefill", "decode")
    prewarm_head_dims: tuple = ("128",)
    prewarm_dtypes: tuple = ("bf16",)
    # NVIDIA's CUDA apt repository, or a site mirror of it (same layout:
    # <url>/<distro>/<arch>/), its signing key and the key's pinned fingerprint.
    cuda_repo_url: str = "https://developer.download.nvidia.com/compute/cuda/repos"
    cuda_repo_key_url: str = ""
    cuda_repo_fingerprint: str = "EB693B3035CD5710E231E123A4B469963BF863CC"
    # Force the repo's distro directory (e.g. "debian12") for an OS the table does
    # not map; only sensible with a mirror that carries it.
    cuda_repo_distro: str = ""
    # Point the /usr/local/cuda alternative at the chosen toolkit.
    cuda_manage_alternative: bool = True
    # Compute capabilities to build for on a node without GPUs (image builders).
    target_sms: tuple = ()

    @classmethod
    def from_data(cls, data, host="node"):
        """Validate settings from a mapping (pyinfra host data); unknown keys with a
        settings prefix are errors, so a typo never silently keeps a default.

        >>> Config.from_data({"stack_torch_cuda": "12.8"}).stack_torch_cuda
        '12.8'
        """
        known = {item.name: item for item in fields(cls)}
        values = {}
        for key, value in dict(data or {}).items():
            if key in known:
                values[key] = _coerce(host, key, value, known[key].default)
            elif key.startswith(PREFIXES) and not key.startswith("ssh_"):
                raise ConfigError(host, key, value, f"unknown setting; known: {', '.join(sorted(known))}")
        config = replace(cls(), **values)
        config.validate(host)
        return config

    def validate(self, host):
        """Raise ConfigError for the first invalid setting."""
        for key in ("stack_sglang", "stack_torch", "stack_flashinfer"):
            if parse(getattr(self, key)) is None:
                raise ConfigError(host, key, getattr(self, key), "use a release number such as 0.7.2")
        cuda = parse(self.stack_torch_cuda)
        if cuda is None or len(cuda.release) != 2 or driver_floor_for_cuda(cuda) is None:
            raise ConfigError(
                host, "stack_torch_cuda", self.stack_torch_cuda,
                "use torch's CUDA build as X.Y, one of 12.x or 13.x (e.g. 13.0 for cu130)",
            )
        for key in ("venv_path", "service_env_file", "service_cache_dir"):
            value = getattr(self, key)
            if not posixpath.isabs(value) or "'" in value or "\n" in value:
                raise ConfigError(host, key, value, "use an absolute path without quotes")
        if self.venv_installer not in ("uv", "pip"):
            raise ConfigError(host, "venv_installer", self.venv_installer, "use uv or pip")
        if not self.service_port.isdigit() or not 0 < int(self.service_port) < 65536:
            raise ConfigError(host, "service_port", self.service_port, "use a TCP port number")
        for module in self.prewarm_modules:
            if module.split(":")[0] not in PREWARM_MODULES:
                raise ConfigError(host, "prewarm_modules", module,
                                  f"use modules of files/prewarm.py: {', '.join(PREWARM_MODULES)}")
        for head_dim in self.prewarm_head_dims:
            if not head_dim.isdigit():
                raise ConfigError(host, "prewarm_head_dims", head_dim, "use head dimensions such as 64, 128, 256")
        for dtype in self.prewarm_dtypes:
            if dtype not in ("bf16", "fp16"):
                raise ConfigError(host, "prewarm_dtypes", dtype, "use bf16 or fp16")
        if not self.service_user.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(host, "service_user", self.service_user, "use a plain user name")
        fingerprint = self.cuda_repo_fingerprint.replace(" ", "")
        if len(fingerprint) != 40 or any(c not in "0123456789ABCDEFabcdef" for c in fingerprint):
            raise ConfigError(host, "cuda_repo_fingerprint", self.cuda_repo_fingerprint,
                              "use the key's full 40-hex-digit fingerprint")
        if not self.cuda_repo_url.startswith(("http://", "https://", "file:/")):
            raise ConfigError(host, "cuda_repo_url", self.cuda_repo_url, "use an http(s):// or file:/ URL")
        for sm in self.target_sms:
            if parse(sm) not in FIRST_CUDA_FOR_SM:
                known = ", ".join(str(v) for v in sorted(FIRST_CUDA_FOR_SM))
                raise ConfigError(host, "target_sms", sm, f"use compute capabilities this release knows: {known}")

    @property
    def lock_target(self):
        """(CPython ``X.Y``, machine) the venv lock was resolved for, from its name's
        ``-cpXY-<machine>.txt`` suffix (``make lock`` names them so), else None.

        >>> Config().lock_target
        ('3.11', 'x86_64')
        """
        match = LOCK_NAME.search(posixpath.basename(self.venv_lock))
        if not match:
            return None
        return f"{match['major']}.{match['minor']}", match["machine"]

    @property
    def torch_cuda(self):
        """torch's CUDA build as a Version."""
        return Version(self.stack_torch_cuda)

    @property
    def flashinfer(self):
        """The stack's FlashInfer release as a Version."""
        return Version(self.stack_flashinfer)

    def as_dict(self):
        """The settings as plain data (for reports)."""
        return {item.name: getattr(self, item.name) for item in fields(self)}


def _coerce(host, key, value, default):
    """Bring YAML/--data values to the setting's type (``--data`` gives strings)."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(host, key, value, "use true or false")
    if isinstance(default, tuple):
        if isinstance(value, str):
            items = value.replace(",", " ").split()
        elif isinstance(value, (list, tuple)):
            items = value
        else:
            items = [] if value is None else [value]
        return tuple(str(item) for item in items)
    if isinstance(value, (dict, list, tuple)):
        raise ConfigError(host, key, value, "use a single value")
    return str(value)


DEFAULTS = Config()
