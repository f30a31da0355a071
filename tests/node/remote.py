"""Small remote helpers the checks share (each one testinfra command)."""

import shlex
from dataclasses import dataclass

import pytest

from bringup.envfile import parse_env_file
from tests.node.expected import service_command, unit_environment
from tests.node.report import STANDIN


def fail(expected, what, want, got):
    """Fail the check with one message naming host, check, expected and actual."""
    pytest.fail(f"{expected.name}: {what}: expected {want}; actual {got}", pytrace=False)


def stand_in(record_property, expected, what, why):
    """Pass the check as a stand-in (tests/node/report.py: STAND-IN, listed with ``why``):
    only on a node whose settings declare ``gpu_standin``, never inferred from what fails."""
    assert expected.config.gpu_standin, "a stand-in result needs the gpu_standin declaration"
    record_property(STANDIN, f"{expected.name}: {what}: stand-in (gpu_standin: a recorded nvidia-smi, no device): "
                             f"{why}")


def run_as_login_user(host, command):
    """Run ``command`` as the SSH user itself, even on a ``sudo`` host: the login
    shell and the plain SSH session are what an operator gets, not sudo's reset env."""
    backend = host.backend
    saved = backend.sudo, backend.sudo_user
    backend.sudo, backend.sudo_user = False, None
    try:
        return host.run(command)
    finally:
        backend.sudo, backend.sudo_user = saved


@dataclass
class Stat:
    """``stat -L`` of a path: kind, owner, group, mode."""

    path: str
    kind: str
    owner: str
    group: str
    mode: int

    def __str__(self):
        return f"{self.path} {self.kind} {self.owner}:{self.group} {self.mode:04o}"


def stat(host, path):
    """Stat ``path`` (following links), or None when it does not exist."""
    result = host.run(f"stat -L -c '%F|%U|%G|%a' -- {shlex.quote(path)}")
    if result.rc != 0:
        return None
    kind, owner, group, mode = result.stdout.strip().split("|")
    return Stat(path, kind, owner, group, int(mode, 8))


def read_text(host, path):
    """The content of ``path``, or None when it cannot be read."""
    result = host.run(f"cat -- {shlex.quote(path)}")
    return result.stdout if result.rc == 0 else None


def on_systemd(host):
    """Whether systemd runs the node (then it answers for the service's environment)."""
    return host.run("test -d /run/systemd/system").rc == 0


def snippet_user(host, expected, as_service_user=False):
    """Who runs a snippet in the service's environment: never root, whose PATH and
    loader variables would then come from the env file (a venv's ``bin`` first, an
    external venv another user owns, an ``LD_PRELOAD`` of ``service_env``). The service
    user, as ``User=`` runs the service; before that account exists (a node deployed
    without the account step) ``nobody``, where the environment resolves the same,
    unless the check needs the service user itself (``as_service_user``)."""
    user = expected.config.service_user
    if as_service_user or host.run(f"getent passwd {shlex.quote(user)} >/dev/null").rc == 0:
        return user
    return "nobody"


def systemd_run(host, expected, command, user):
    """Run a shell snippet as a transient systemd service with the unit's
    ``EnvironmentFile=`` and ``Environment=`` and ``User=user``: systemd itself reads
    the files, so the check sees what the service will see; ``user`` (never root, see
    ``snippet_user``) runs it."""
    unit = read_text(host, expected.layout.unit) or ""
    properties = [f"EnvironmentFile={expected.layout.env_file}",
                  *(f"Environment={key}={value}" for key, value in unit_environment(unit).items()),
                  f"User={user}"]
    arguments = " ".join(f"--property={shlex.quote(item)}" for item in properties)
    return host.run(f"systemd-run --quiet --wait --pipe --collect --service-type=exec {arguments} "
                    f"-- /bin/sh -c {shlex.quote(command)} </dev/null")


def service_environment(host, expected):
    """What the service process gets, or ``(None, why)``: asked of systemd where it
    runs the node (a transient unit with the unit's environment prints ``env``, as the
    service user: see ``snippet_user``), else the unit's Environment= overridden by the
    env file, read as systemd would (bringup/envfile.py), nothing run."""
    text = read_text(host, expected.layout.env_file)
    if text is None:
        return None, f"no service env file {expected.layout.env_file}"
    if on_systemd(host):
        result = systemd_run(host, expected, "env -0 | tr '\\0' '\\036'", snippet_user(host, expected))
        if result.rc != 0:
            # Its error output only: its standard output is the service's environment, secrets too.
            return None, f"systemd-run exit {result.rc}: {result.stderr.strip()[-300:] or 'no error output'}"
        pairs = (item.partition("=") for item in result.stdout.split("\x1e") if "=" in item)
        return {key: value for key, _, value in pairs}, ""
    unit = read_text(host, expected.layout.unit)
    return {**(unit_environment(unit) if unit else {}), **parse_env_file(text)}, ""


def run_in_service_env(host, expected, command, as_service_user=False):
    """Run a shell snippet with exactly the service's environment, never as root
    (``snippet_user``; ``as_service_user``: the service user itself, for checks of
    what it can read and create): through systemd where it runs, else rebuilt from the
    files; fails the check when there is no service environment."""
    env, why = service_environment(host, expected)
    if env is None:
        fail(expected, "service environment", "an env file", why)
    user = snippet_user(host, expected, as_service_user)
    if on_systemd(host):
        return systemd_run(host, expected, command, user)
    return host.run(service_command(env, command, user, strict=as_service_user))


def venv_script_answer(host, expected, command, parse, marker):
    """The venv's python running ``command(python)`` as the service user with the service's
    environment, its answer as ``parse`` reads the output (``{"error": why}`` is the
    script's own, for CUDA that does not start), or ``{"venv_error": why}`` when it could
    not run or did not answer with exactly one ``marker`` line (something else in the venv,
    a sitecustomize, printing one would be taken for the script's): no venv is a failure
    on any node, stand-in or not."""
    python = expected.venv_python
    if host.run(f"test -x {shlex.quote(python)}").rc != 0:
        return {"venv_error": f"no {python} (the venv is not built)"}
    result = run_in_service_env(host, expected, command(python), as_service_user=True)
    answer = parse(result.stdout)
    if answer is None:
        said = sum(line.startswith(marker) for line in result.stdout.splitlines())
        return {"venv_error": f"{python} exit {result.rc}, {said} {marker.strip()!r} line(s) where the script prints "
                              f"one: {(result.stderr or result.stdout).strip()[-300:]}"}
    return answer
