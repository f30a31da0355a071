"""Hosts of a pyinfra inventory as testinfra hosts, with host keys checked.

``pyinfra INVENTORY debug-inventory --json`` prints every host with its merged data;
each host's SSH data becomes a ``Host <name>`` block of a generated ssh_config and a
hostspec ``paramiko-known-hosts://<name>?ssh_config=...`` for testinfra.

Why a backend of our own: testinfra 10.2.2's paramiko backend reads ssh_config but
ignores ``UserKnownHostsFile`` and ``StrictHostKeyChecking yes`` (it loads no host
keys and only warns about an unknown or changed key), so it would connect to a host
whose key does not match. ``KnownHostsParamikoBackend`` honours both.
"""

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from testinfra.backend.paramiko import IgnorePolicy, ParamikoBackend

SCHEME = "paramiko-known-hosts"
# pyinfra SSH data this suite translates; any other ssh_* key is refused rather
# than silently ignored (the suite must reach the host the way pyinfra does).
SSH_KEYS = ("ssh_hostname", "ssh_port", "ssh_user", "ssh_key", "ssh_known_hosts_file",
            "ssh_strict_host_key_checking")
IGNORED_SSH_KEYS = ("ssh_connect_retries", "ssh_connect_retry_min_delay", "ssh_connect_retry_max_delay",
                    "ssh_forward_agent", "ssh_allow_agent", "ssh_look_for_keys")


class InventoryError(Exception):
    """The inventory cannot be read or translated; the message says why."""


@dataclass
class InventoryHost:
    """One host of a pyinfra inventory: its name, groups and merged data."""

    name: str
    groups: list = field(default_factory=list)
    data: dict = field(default_factory=dict)


def pyinfra_executable():
    """The pyinfra CLI beside this Python (the control venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "pyinfra"
    return str(beside) if beside.exists() else shutil.which("pyinfra") or "pyinfra"


def parse_debug_inventory(stdout):
    """Hosts from ``pyinfra INV debug-inventory --json`` output.

    An inventory file may print to stdout itself, so the JSON is the last line that
    starts with ``[``.

    >>> out = 'hello\\n[{"name": "n1", "groups": ["g"], "data": {"ssh_port": 22}}]\\n'
    >>> parse_debug_inventory(out)
    [InventoryHost(name='n1', groups=['g'], data={'ssh_port': 22})]
    """
    for line in reversed(stdout.splitlines()):
        if line.startswith("["):
            return [InventoryHost(item["name"], list(item.get("groups") or []), dict(item.get("data") or {}))
                    for item in json.loads(line)]
    raise InventoryError(f"pyinfra debug-inventory printed no JSON host list: {stdout[-500:]!r}")


def read_inventory(inventory, data=(), pyinfra=None, cwd=None):
    """Every host of a pyinfra inventory (file, or anything pyinfra accepts), with
    ``data`` (``KEY=VALUE`` items) applied the way ``pyinfra --data`` applies them."""
    overrides = [arg for item in data for arg in ("--data", item)]
    command = [pyinfra or pyinfra_executable(), "-y", *overrides, inventory, "debug-inventory", "--json"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InventoryError(f"{' '.join(command)}: {error}") from error
    if proc.returncode != 0:
        raise InventoryError(f"{' '.join(command)} exited {proc.returncode}: "
                             f"{(proc.stderr or proc.stdout).strip()[-1000:]}")
    return parse_debug_inventory(proc.stdout)


def limit_hosts(hosts, patterns):
    """Hosts whose name or one of whose groups matches a pattern (globs, comma lists).

    >>> hosts = [InventoryHost("ns-a", ["gpu"]), InventoryHost("ns-b", ["gpu"]), InventoryHost("x", ["cpu"])]
    >>> [h.name for h in limit_hosts(hosts, ["ns-*"])]
    ['ns-a', 'ns-b']
    >>> [h.name for h in limit_hosts(hosts, ["x,ns-b"])]
    ['ns-b', 'x']
    >>> [h.name for h in limit_hosts(hosts, ["cpu"])]
    ['x']
    """
    if not patterns:
        return list(hosts)
    wanted = [part.strip() for pattern in patterns for part in pattern.split(",") if part.strip()]
    return [host for host in hosts
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in wanted for name in [host.name, *host.groups])]


def _config_value(host, key, value):
    text = str(value)
    if not text or any(char in text for char in "\n\"") or text != text.strip():
        raise InventoryError(f"{host.name}: {key}={value!r} cannot be written to an ssh_config")
    return f'"{text}"' if " " in text else text


def ssh_config_block(host):
    """The ``Host`` block of an ssh_config that reaches ``host`` the way pyinfra does.

    Host keys are checked: ``StrictHostKeyChecking`` is the host's
    ``ssh_strict_host_key_checking`` (``yes`` when unset; ``accept-new`` is taken
    as ``yes``: a key pyinfra accepted is in the known_hosts file by now).

    >>> print(ssh_config_block(InventoryHost("n1", data={"ssh_hostname": "10.0.0.5", "ssh_user": "root",
    ...       "ssh_key": "/k", "ssh_known_hosts_file": "/kh"})))
    Host n1
        HostName 10.0.0.5
        User root
        IdentityFile /k
        IdentitiesOnly yes
        UserKnownHostsFile /kh
        StrictHostKeyChecking yes
        BatchMode yes
    """
    data = host.data
    unsupported = sorted(key for key in data if key.startswith("ssh_") and key not in SSH_KEYS
                         and key not in IGNORED_SSH_KEYS and data[key] not in (None, ""))
    if unsupported:
        raise InventoryError(f"{host.name}: the node suite cannot translate {', '.join(unsupported)}; "
                             f"use an SSH key (ssh_key) and a known_hosts file (ssh_known_hosts_file)")
    lines = [f"Host {_config_value(host, 'name', host.name)}",
             f"    HostName {_config_value(host, 'ssh_hostname', data.get('ssh_hostname') or host.name)}"]
    if data.get("ssh_port"):
        lines.append(f"    Port {int(data['ssh_port'])}")
    if data.get("ssh_user"):
        lines.append(f"    User {_config_value(host, 'ssh_user', data['ssh_user'])}")
    if data.get("ssh_key"):
        key = os.path.expanduser(str(data["ssh_key"]))
        lines += [f"    IdentityFile {_config_value(host, 'ssh_key', key)}", "    IdentitiesOnly yes"]
    if data.get("ssh_known_hosts_file"):
        known = os.path.expanduser(str(data["ssh_known_hosts_file"]))
        lines.append(f"    UserKnownHostsFile {_config_value(host, 'ssh_known_hosts_file', known)}")
    strict = str(data.get("ssh_strict_host_key_checking") or "yes").lower()
    lines.append(f"    StrictHostKeyChecking {'no' if strict in ('no', 'off', 'false') else 'yes'}")
    lines.append("    BatchMode yes")
    return "\n".join(lines)


def hostspec(host, ssh_config):
    """The testinfra hostspec of an inventory host (``@local`` -> the local backend).

    >>> hostspec(InventoryHost("n1", data={"_sudo": True, "_sudo_user": "ops"}), "/tmp/c")
    'paramiko-known-hosts://n1?ssh_config=/tmp/c&sudo=true&sudo_user=ops'
    >>> hostspec(InventoryHost("@local"), "/tmp/c")
    'local://'
    """
    if host.name == "@local":
        query = []
    elif host.name.startswith("@"):
        raise InventoryError(f"{host.name}: the node suite reaches hosts over SSH (or @local), "
                             f"not through pyinfra's {host.name.split('/')[0]} connector")
    else:
        if any(char in host.name for char in ":/?&,@ "):
            raise InventoryError(f"{host.name}: use a plain host name in the inventory (ssh_hostname for the address)")
        query = [f"ssh_config={ssh_config}"]
    if host.data.get("_sudo"):
        query.append("sudo=true")
    if host.data.get("_sudo_user"):
        query.append(f"sudo_user={host.data['_sudo_user']}")
    if host.name == "@local":
        return "local://" + (f"?{'&'.join(query)}" if query else "")
    return f"{SCHEME}://{host.name}?{'&'.join(query)}"


def write_ssh_config(hosts, path):
    """Write one ssh_config for all SSH hosts (mode 0600); returns the path."""
    blocks = [ssh_config_block(host) for host in hosts if not host.name.startswith("@")]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("# Generated by tests/node from the pyinfra inventory.\n")
        out.write("\n\n".join(blocks) + "\n")
    return path


def register_backend():
    """Make ``paramiko-known-hosts://`` hostspecs resolve to our backend."""
    import testinfra.backend

    testinfra.backend.BACKENDS[SCHEME] = "tests.node.connection.KnownHostsParamikoBackend"


class KnownHostsParamikoBackend(ParamikoBackend):
    """testinfra's paramiko backend, with ssh_config's UserKnownHostsFile and
    StrictHostKeyChecking honoured: an unknown or changed host key fails the
    connection. Needs ``ssh_config``; test ids are the inventory names."""

    NAME = SCHEME

    def __init__(self, hostspec, *args, **kwargs):
        super().__init__(hostspec, *args, **kwargs)
        if not self.ssh_config:
            raise RuntimeError(f"{SCHEME}://{hostspec}: needs ?ssh_config=FILE (known_hosts and checking)")

    def _load_ssh_config(self, client, cfg, ssh_config, ssh_config_dir="~/.ssh"):
        super()._load_ssh_config(client, cfg, ssh_config, ssh_config_dir)
        options = ssh_config.lookup(self.host.name)
        files = options.get("userknownhostsfile", "~/.ssh/known_hosts /etc/ssh/ssh_known_hosts")
        keys = client.get_host_keys()
        for name in files.split():
            path = os.path.expanduser(name.strip('"'))
            if os.path.exists(path):
                keys.load(path)
        if options.get("stricthostkeychecking", "yes").lower() == "no":
            client.set_missing_host_key_policy(IgnorePolicy())
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        if options.get("identitiesonly", "no").lower() == "yes":
            cfg["look_for_keys"] = False
            cfg["allow_agent"] = False

    def get_pytest_id(self):
        return self.host.name
