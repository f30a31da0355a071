"""The paths root writes, reads or hands over: the service env file, the JIT cache
directory and the managed venv. No non-root user may change them or a directory on the
way to them (UNSAFE_PATH), from the path chains the probe reads (docs/facts.md, ``paths``).

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> chain = [{"path": "/etc/sglang/sglang.env", "user": "root", "mode": "640", "kind": "regular file"},
    ...          {"path": "/etc/sglang", "user": "bob", "mode": "755", "kind": "directory"}]
    >>> check_paths(PlanContext.of({"paths": {"env_file": chain}}, Config(), None, found.append))
    >>> [finding.message for finding in found]
    ['/etc/sglang (directory, owner bob, mode 755) lets a non-root user change /etc/sglang/sglang.env, the service env file']
"""

from bringup.findings import BLOCKER, FIX, Finding


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


def check_paths(context):
    """Root builds the managed venv and writes (and reads) the env file, and hands the
    cache directory to the service user: no non-root user may be able to change
    (rename, replace, plant) the env file or any directory on the way to them."""
    facts, config, add = context.facts, context.config, context.add
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


# Whose x bit lets the service user through a directory: its owner's when it is the
# service user's, else others'. A directory open to its group only is not judged (the
# probe does not report the group, which may be the service user's own).
def _closed_to(entry, user, leaf=False):
    """Whether directory ``entry`` keeps ``user`` from traversing it (and, for the
    ``leaf`` directory the service opens, from listing it).

    >>> _closed_to({"path": "/opt/sglang", "user": "root", "mode": "700", "kind": "directory"}, "sglang")
    True
    >>> _closed_to({"path": "/var/cache/sglang", "user": "sglang", "mode": "700", "kind": "directory"}, "sglang")
    False
    >>> _closed_to({"path": "/srv", "user": "root", "mode": "750", "kind": "directory"}, "sglang")
    False
    """
    mode = int(entry["mode"], 8)
    if entry["user"] == user:
        needed = 0o500 if leaf else 0o100
    else:
        needed = 0o005 if leaf else 0o001
        if mode & (needed << 3) == needed << 3 and mode & needed != needed:
            return False
    return mode & needed != needed


def unreachable_components(chain, path, user):
    """Every directory of ``chain`` (the probe's path chain of ``path``, from the path
    up to /) that keeps ``user`` out of ``path``: all of them, since deploy opening its
    own (a fix) leaves the user out while an operator's above it is closed. Links are
    not directories: the chain of a link's target is reported apart (``venv_target``).

    >>> chain = [{"path": "/opt/sglang/venv", "user": "root", "mode": "777", "kind": "symbolic link"},
    ...          {"path": "/opt/sglang", "user": "root", "mode": "700", "kind": "directory"},
    ...          {"path": "/opt", "user": "root", "mode": "700", "kind": "directory"}]
    >>> [entry["path"] for entry in unreachable_components(chain, "/opt/sglang/venv", "sglang")]
    ['/opt/sglang', '/opt']
    """
    return [entry for entry in chain
            if entry["kind"] == "directory" and _closed_to(entry, user, leaf=entry["path"] == path)]


def check_service_reach(context):
    """The unit and the pre-warm run as the service user from the venv (its target
    too: venvs/<digest>) and write its cache: each directory on the way must let that
    user through. One of the layout's that deploy makes and owns is a fix (deploy opens
    it: tasks/operations/files.py directory_if_missing ``reached``); another is a
    blocker naming the path, the directory and the command that opens it (issue 32: a
    bare node's venv root made 0700 by a umask).

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> found = []
    >>> chain = [{"path": "/opt/sglang/venv", "user": "root", "mode": "777", "kind": "symbolic link"},
    ...          {"path": "/opt/sglang", "user": "root", "mode": "700", "kind": "directory"}]
    >>> check_service_reach(PlanContext.of({"paths": {"venv": chain}}, Config(), None, found.append))
    >>> [(finding.code, finding.severity) for finding in found]
    [('SERVICE_PATH_UNREACHABLE', 'fix')]
    """
    facts, config, layout = context.facts, context.config, context.layout
    chains = facts.get("paths") or {}
    user = config.service_user
    roles = [("cache_dir", config.service_cache_dir, "the cache the service and the pre-warm write")]
    # An external venv closed to the service user is VENV_UNREADABLE's (check_venv_readable).
    if config.venv_managed:
        roles.insert(0, ("venv", config.venv_path, "the venv the unit and the pre-warm run"))
    if config.venv_managed and chains.get("venv_target"):
        target = chains["venv_target"][0]["path"]
        roles.insert(1, ("venv_target", target, f"the venv {config.venv_path} points at"))
    # The interpreter's prefix (an operator's venv_python under a 0700 /opt/cpython):
    # never deploy's, a blocker.
    if chains.get("python"):
        roles.append(("python", chains["python"][0]["path"], f"the interpreter the venv {config.venv_path} runs"))
    ours = {entry.path: entry for entry in layout.directories(managed=config.venv_managed) if entry.reached}
    reported = set()
    for role, path, what in roles:
        for entry in unreachable_components(chains.get(role, []), path, user):
            if entry["path"] in reported:
                continue
            reported.add(entry["path"])
            mine = ours.get(entry["path"])
            if mine and entry["user"] == mine.owner:
                context.add(Finding("SERVICE_PATH_UNREACHABLE", FIX,
                                    f"{_described(entry)} keeps the service user {user} out of {path}, {what}",
                                    f"deploy opens {entry['path']} to {user} (chmod "
                                    f"{'go' if mine.owner == 'root' else 'u'}+rx): it made it, mode {mine.mode}"))
            else:
                bits = "rx" if entry["path"] == path else "x"
                who = "u" if entry["user"] == user else "o"
                context.add(Finding("SERVICE_PATH_UNREACHABLE", BLOCKER,
                                    f"{_described(entry)} keeps the service user {user} out of {path}, {what}",
                                    f"chmod {who}+{bits} {entry['path']}, or set the path where {user} can reach it"))
