"""Settings: one host's settings validated against their declarations (bringup/settings.py:
each setting's name, check, default and meaning, declared once), as a ``Config``.

Settings come from pyinfra host data (``inventory/hosts.yml``: ``all:`` and per-host
overrides; ``--data`` on the command line wins). ``Config``'s fields and ``SCHEMA`` are
made of ``SETTINGS``: a new setting is its declaration there.
"""

import posixpath
from dataclasses import dataclass, fields, replace

from packaging.version import Version

from bringup import envfile, redact
from bringup import setting_checks as checks
from bringup.api_key import KEY_FILE_NAME
from bringup.group import GROUP_ENV_KEYS
from bringup.layout import DEFAULT_CACHE_DIR, DEFAULT_ENV_FILE, DEFAULT_VENV, HUB_CACHE_KEYS, NodeLayout, hub_cache_path
from bringup.venv_locks import venv_lock_target
from bringup.planned_env import PLANNED_ENV_KEYS
from bringup.settings import PREFIXES, SETTINGS, declare


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


# setting -> how its value is parsed and checked (its declaration's check)
SCHEMA = {item.name: item.check for item in SETTINGS.values()}


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


def _declared(cls):
    """``cls`` as a frozen dataclass with a field per declared setting, in their order,
    typed and defaulted as declared; a setting named as one of ``cls``'s own attributes
    is an error (bringup.settings.declare)."""
    declare(SETTINGS.values(), reserved=vars(cls))
    cls.__annotations__ = {item.name: item.type for item in SETTINGS.values()}
    for item in SETTINGS.values():
        setattr(cls, item.name, item.default)
    return dataclass(frozen=True)(cls)


@_declared
class Config:
    """The settings of one host, validated: a field per setting of bringup/settings.py.
    Build it with ``Config.from_data``.

    >>> Config().service_port, Config().venv_managed
    ('30000', True)
    """

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
            if key in HUB_CACHE_KEYS and not hub_cache_path(value):
                problems.append(("service_env", data["service_env"], f"give {key} an absolute path (or ~/...) "
                                 "without $: huggingface_hub would read an empty or relative one under the "
                                 "service's working directory, and expand $VARIABLES and ~user where the probe "
                                 "and the model fetch cannot follow"))
            if key in GROUP_ENV_KEYS and values.get("service_group"):
                problems.append(("service_env", data["service_env"], f"{key} is decided for a serving group's "
                                 "member (from the interface that routes to the head and the RDMA ports found); "
                                 "remove it, and name the interface with service_group_interface"))
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
