"""No file the deploy writes (nor its directory) is writable by everyone; the service
user reaches every path the unit and the pre-warm use."""

import posixpath
import shlex

import pytest

from tests.node.expected import DEPLOYED_FILE_LABELS
from tests.node.reach import blocked_lines, reach_command, resolve_command
from tests.node.remote import fail, stat


@pytest.mark.parametrize("label", DEPLOYED_FILE_LABELS)
def test_deployed_file_not_world_writable(host, expected, label):
    path = expected.deployed_files()[label]
    info, parent = stat(host, path), stat(host, posixpath.dirname(path))
    if info is None:
        fail(expected, f"deployed file {label}", f"{path} present, not world-writable", "missing")
    writable = [str(s) for s in (info, parent) if s is not None and s.mode & 0o002]
    if writable:
        fail(expected, f"deployed file {label}", f"{path} and its directory not world-writable",
             f"world-writable: {', '.join(writable)}")


def service_paths(host, expected):
    """label -> path: what the unit and the pre-warm open as the service user (those
    that exist: a missing one is another check's), the model where it is a directory on
    the node (an absolute path, or one relative to the service's home). Not the env
    file: systemd and files/with-service-env read it as root, and an operator's 0600
    root:root one is kept (service_env_file_owner_and_mode: 0640 or stricter)."""
    layout, model = expected.layout, expected.config.service_model or ""
    paths = {"venv": layout.venv, "venv python": f"{layout.venv}/bin/python", "entry point": layout.entry_point,
             "pre-warm script": layout.helper("prewarm.py"), "cache directory": layout.cache_dir,
             "service home": layout.service_home}
    if model:
        local = model if model.startswith("/") else posixpath.join(layout.service_home, model)
        if host.run(f"test -d {shlex.quote(local)}").rc == 0:
            paths["model"] = local
            paths["model config"] = f"{local}/config.json"
    present = host.run("for p in " + " ".join(shlex.quote(path) for path in paths.values()) + "; do "
                       "if [ -e \"$p\" ] || [ -L \"$p\" ]; then echo \"$p\"; fi; done").stdout.splitlines()
    return {label: path for label, path in paths.items() if path in present}


def test_service_user_reaches_its_paths(host, expected):
    """The service user reaches every path the unit and the pre-warm use: the venv (its
    link and where it points), its python and entry point, the pre-warm script, the
    cache, its home, the model (not the env file: root reads it). Issue 32: a bare node's venv
    root made 0700 (a umask) kept it out, and the pre-warm failed with Permission denied."""
    user = expected.config.service_user
    if host.run(f"getent passwd {shlex.quote(user)} >/dev/null").rc != 0:
        fail(expected, "service user reaches its paths", f"the service user {user}", "no such account")
    paths = service_paths(host, expected)
    resolved = dict(zip(paths, host.run(resolve_command(paths)).stdout.splitlines(), strict=False))
    links = {}
    for path in paths.values():
        link = host.run(f"p={shlex.quote(path)}; while [ \"$p\" != / ] && [ -n \"$p\" ]; do "
                        "if [ -L \"$p\" ]; then printf '%s|%s\\n' \"$p\" \"$(readlink -- \"$p\")\"; fi; "
                        "p=$(dirname -- \"$p\"); done").stdout
        links |= dict(line.split("|", 1) for line in link.splitlines() if "|" in line)
    result = host.run(reach_command(user, paths, resolved))
    blocked = blocked_lines(result.stdout, user, links)
    if result.rc != 0 or blocked:
        fail(expected, "service user reaches its paths", f"{user} reaches {', '.join(paths)}",
             "; ".join(blocked) or f"runuser exit {result.rc}: {result.stderr.strip()[-300:]}")
