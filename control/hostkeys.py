"""Host keys are always checked: judged on the data pyinfra's SSH connector really
uses, wherever it came from (inventory/hosts.yml, group data, ``--data``), when the
host is about to connect (control/fleet.py ``RunWatcher.host_before_connect``).

What decides host-key checking in pyinfra 3.10's SSH connector
(pyinfra/connectors/ssh.py ``make_paramiko_kwargs``, sshuserclient/client.py):

- ``ssh_strict_host_key_checking``: ``yes`` (StrictPolicy), ``accept-new``
  (AcceptNewPolicy: a host missing from the file is recorded, a changed key fails),
  ``no``/``off`` (WarningPolicy: any key), ``ask``/unset (AskPolicy, and then the
  ssh_config's ``StrictHostKeyChecking``). Only ``yes`` and ``accept-new`` pass.
- ``ssh_known_hosts_file``: the file keys are read from and appended to. /dev/null (or
  any file that is not a regular file of the control user's or root's, or one in a
  directory another user can change) holds whatever key that user wants: refused.
  Unset, the ssh_config's ``UserKnownHostsFile`` or ``~/.ssh/known_hosts`` is used and
  judged the same way.
- ``ssh_config_file`` (unset: ``~/.ssh/config`` when it exists): its
  ``StrictHostKeyChecking`` and ``UserKnownHostsFile`` for the host and for each
  ``ProxyJump`` hop (a hop is connected with the config's policy, not ours). The file
  itself must be one only its owner (the control user or root) can change.
- ``ssh_paramiko_connect_kwargs``: passed to paramiko's ``SSHClient.connect`` last.
  ``gss_kex`` skips the host-key check (the host is "authenticated by GSS-API"),
  ``transport_factory`` and ``sock`` replace what the check runs over: only the keys
  of ``PARAMIKO_KWARGS_KEPT`` pass.
"""

import os
import stat

from paramiko.config import SSHConfig

CHECKED = ("yes", "accept-new")
PARAMIKO_KWARGS_KEPT = frozenset({
    "timeout", "banner_timeout", "auth_timeout", "channel_timeout", "compress", "allow_agent",
    "look_for_keys", "key_filename", "pkey", "passphrase", "username", "port", "disabled_algorithms",
    "auth_strategy", "gss_auth", "gss_deleg_creds", "gss_host",
})
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
DEFAULT_SSH_CONFIG = "~/.ssh/config"
FIX_KNOWN_HOSTS = "use a known_hosts file of your own, e.g. ~/.ssh/known_hosts (mode 0600 or 0644)"


def path_problem(path, uid=None, must_exist=False):
    """Why ``path`` cannot be trusted to hold host keys or SSH settings ("" when it can):
    a regular file (links followed) owned by the control user or root, writable by no
    one else, in directories no one else can change (a sticky directory such as /tmp
    only when the entry in it is ours). An absent file is fine (accept-new creates it)
    unless ``must_exist``, or when it would be created in a directory others write.

    >>> path_problem("/dev/null")
    'is not a regular file (a character device)'
    >>> path_problem("/nonexistent-dir/known_hosts"), path_problem("/tmp/nonexistent-known-hosts")
    ('', 'would be created in a directory other users can write')
    >>> path_problem("/etc/hostname"), path_problem("/etc/hostname", uid=12345)
    ('', '')
    """
    uid = os.getuid() if uid is None else uid
    path = os.path.abspath(os.path.expanduser(str(path)))
    real = os.path.realpath(path)
    for chain in dict.fromkeys((path, real)):
        problem = _chain_problem(os.path.dirname(chain), uid)
        if problem:
            return problem
    try:
        info = os.stat(real)
    except FileNotFoundError:
        if must_exist:
            return "does not exist"
        try:
            parent = os.stat(os.path.dirname(real))
        except FileNotFoundError:
            return ""
        return "would be created in a directory other users can write" if _shared(parent) else ""
    if not stat.S_ISREG(info.st_mode):
        return f"is not a regular file (a {_kind(info.st_mode)})"
    if info.st_uid not in (0, uid):
        return f"is owned by uid {info.st_uid}, not by you or root"
    if info.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return ""


def _shared(info):
    return bool(info.st_mode & 0o022)


def _kind(mode):
    for test, word in ((stat.S_ISCHR, "character device"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return word
    return "special file"


def _chain_problem(directory, uid):
    """Every directory from / to ``directory`` is root's or ours and writable by no one
    else (or sticky, whose entries only their owner can replace)."""
    parts = [part for part in directory.split("/") if part]
    current = "/"
    for part in [None, *parts]:
        current = current if part is None else os.path.join(current, part)
        try:
            info = os.stat(current)
        except FileNotFoundError:
            return ""  # nothing there to trust: paramiko finds no key (yes) or cannot record one
        if info.st_uid not in (0, uid):
            return f"is in {current}, owned by uid {info.st_uid} (not you or root)"
        if _shared(info) and not info.st_mode & stat.S_ISVTX:
            return f"is in {current}, which other users can write (mode {stat.S_IMODE(info.st_mode):04o})"
    return ""


def known_hosts_files(data, host_config):
    """The known_hosts files paramiko will read for this host (pyinfra's rule)."""
    if data.get("ssh_known_hosts_file"):
        return [str(data["ssh_known_hosts_file"])]
    if host_config and "userknownhostsfile" in host_config:
        return host_config["userknownhostsfile"].split()
    return [DEFAULT_KNOWN_HOSTS]


def problems(data, ssh_config, hostname, check_path=path_problem):
    """(setting, value, fix) for each way ``data`` (the SSH connector's data) would let
    a host key go unchecked; [] when none. ``ssh_config``: the parsed config or None.

    >>> problems({"ssh_strict_host_key_checking": "no"}, None, "h", lambda *a, **k: "")[0][:2]
    ('ssh_strict_host_key_checking', 'no')
    >>> problems({"ssh_strict_host_key_checking": "Yes"}, None, "h", lambda *a, **k: "")[0][2][:24]
    'write it in lower case: '
    >>> problems({"ssh_strict_host_key_checking": "yes", "ssh_known_hosts_file": "/dev/null"}, None, "h")[0][2]
    'holds no key, so every key is new: use a known_hosts file of your own, e.g. ~/.ssh/known_hosts \
(mode 0600 or 0644)'
    >>> problems({"ssh_strict_host_key_checking": "yes", "ssh_paramiko_connect_kwargs": {"gss_kex": True}}, None, "h",
    ...          lambda *a, **k: "")[0][:2]
    ('ssh_paramiko_connect_kwargs', {'gss_kex': True})
    """
    found = []
    checking = data.get("ssh_strict_host_key_checking")
    if isinstance(checking, str) and checking not in CHECKED and checking.lower() in CHECKED:
        found.append(("ssh_strict_host_key_checking", checking, "write it in lower case: pyinfra takes "
                      "yes or accept-new as they are, and fails the connection on any other spelling"))
    elif not isinstance(checking, str) or checking not in CHECKED:
        found.append(("ssh_strict_host_key_checking", checking,
                      "turns host key checking off; host keys are always checked: remove it (yes is the default), "
                      "or use accept-new to record a new host's key on first contact"))
    kwargs = data.get("ssh_paramiko_connect_kwargs") or {}
    extra = sorted(str(key) for key in (kwargs if isinstance(kwargs, dict) else {"(not a mapping)": 1})
                   if key not in PARAMIKO_KWARGS_KEPT)
    if extra:
        found.append(("ssh_paramiko_connect_kwargs", kwargs,
                      f"{', '.join(extra)} can bypass or replace the host-key check: remove them "
                      f"(kept: {', '.join(sorted(PARAMIKO_KWARGS_KEPT))})"))
    config_file = data.get("ssh_config_file")
    if config_file or ssh_config:
        problem = check_path(config_file or DEFAULT_SSH_CONFIG, must_exist=bool(config_file))
        if problem:
            found.append(("ssh_config_file", config_file or DEFAULT_SSH_CONFIG, f"{problem}: it decides host-key "
                          "checking; use an ssh_config only you (or root) can change"))
    host_config = ssh_config.lookup(hostname) if ssh_config else {}
    for path in known_hosts_files(data, host_config):
        problem = "holds no key, so every key is new" if os.path.abspath(os.path.expanduser(path)) == "/dev/null" \
            else check_path(path)
        if problem:
            setting = "ssh_known_hosts_file" if data.get("ssh_known_hosts_file") else "UserKnownHostsFile (ssh_config)"
            found.append((setting, path, f"{problem}: {FIX_KNOWN_HOSTS}"))
    hops = host_config.get("proxyjump", "").split(",") if host_config.get("proxyjump") else []
    for hop in hops:
        hop_config = ssh_config.lookup(hop.split("@")[-1].split(":")[0])
        policy = hop_config.get("stricthostkeychecking")
        if policy is not None and policy not in CHECKED:
            found.append((f"StrictHostKeyChecking (ssh_config, ProxyJump hop {hop})", policy,
                          "the hop's key would go unchecked: set StrictHostKeyChecking yes for it"))
        for path in hop_config.get("userknownhostsfile", DEFAULT_KNOWN_HOSTS).split():
            problem = "holds no key" if os.path.abspath(os.path.expanduser(path)) == "/dev/null" else check_path(path)
            if problem:
                found.append((f"UserKnownHostsFile (ssh_config, ProxyJump hop {hop})", path,
                              f"{problem}: {FIX_KNOWN_HOSTS}"))
    return found


def read_ssh_config(data):
    """The ssh_config pyinfra reads for this host's data (None when there is none)."""
    path = os.path.expanduser(str(data.get("ssh_config_file") or DEFAULT_SSH_CONFIG))
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        config = SSHConfig()
        config.parse(handle)
        return config


def refusal(host_name, data):
    """One line refusing ``host_name`` (host, setting, value, fix), or "" when its SSH
    data keeps every host key checked.

    >>> refusal("n1", {"ssh_strict_host_key_checking": "no", "ssh_known_hosts_file": "/etc/hostname"})
    "n1: setting ssh_strict_host_key_checking='no' is refused: turns host key checking off; host keys are always \
checked: remove it (yes is the default), or use accept-new to record a new host's key on first contact"
    """
    try:
        ssh_config = read_ssh_config(data)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return (f"{host_name}: setting ssh_config_file={data.get('ssh_config_file')!r} is refused: cannot be read "
                f"({error}); fix or remove it")
    hostname = str(data.get("ssh_hostname") or host_name)
    found = problems(data, ssh_config, hostname)
    return f"{host_name}: " + "; ".join(f"setting {key}={value!r} is refused: {fix}" for key, value, fix in found) \
        if found else ""
