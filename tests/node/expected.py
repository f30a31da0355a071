"""What a ready node must look like, from the product itself: the node's facts
(the probe (files/probe.d/) run through testinfra), its settings (bringup.config) and the
planner (bringup.plan). Nothing here hard-codes a version, a path or an arch.

Also the small parsers the checks share (unit file syntax; EnvironmentFile syntax is
bringup/envfile.py's) and the command that reproduces the service's environment.
"""

import shlex
from dataclasses import dataclass

from packaging.version import Version

from bringup.config import Config
from bringup.layout import SERVICE_BASE_PATH, ProbeInputs
from bringup.plan import managed_env_keys, plan
from facts.node import probe_command
from facts.probe_output import build_document

# A remote command that runs longer than this is a failure, not a hang.
COMMAND_TIMEOUT_S = 300


class NodeNotReady(Exception):
    """The node cannot be examined (unreachable, probe failed); the message says why."""


@dataclass
class Expected:
    """One host's settings, facts and plan, and what follows from them."""

    name: str
    config: Config
    facts: dict
    plan: object  # bringup.plan.NodePlan

    @property
    def home(self):
        return self.plan.toolkit.home

    @property
    def version(self):
        return self.plan.toolkit.version

    @property
    def arch_list(self):
        return self.plan.arch_list

    @property
    def env(self):
        return self.plan.env

    @property
    def sms(self):
        """The compute capabilities to serve: the GPUs', else the configured target_sms."""
        gpus = self.facts.get("gpus") or []
        caps = {gpu["compute_cap"] for gpu in gpus} or set(self.config.target_sms)
        return sorted((Version(cap) for cap in caps), key=lambda v: v.release)

    @property
    def layout(self):
        return self.plan.layout

    @property
    def venv_python(self):
        return f"{self.layout.venv}/bin/python"

    def deployed_files(self):
        """label -> path of every file the deploy writes."""
        layout, repo = self.layout, self.plan.repo
        return {
            # The repository's source and keyring: the deploy's own, or the node's it adopted.
            "apt-keyring": repo.keyring if repo else layout.apt_keyring,
            "apt-source": repo.source_file if repo else layout.apt_source,
            "apt-pin": layout.apt_preference,
            "profile": layout.profile_script,
            "pam-environment": layout.pam_environment,
            "service-env-file": layout.env_file,
            "service-unit": layout.unit,
            "prewarm-manifest": layout.manifest,
        }


DEPLOYED_FILE_LABELS = ("apt-keyring", "apt-source", "apt-pin", "profile", "pam-environment",
                        "service-env-file", "service-unit", "prewarm-manifest")


def gather(host, name, data, member=None, route_to=""):
    """Settings, facts and plan of one testinfra host (runs the probe once). ``member``: its place in
    its serving group (bringup/group_inventory.py), planned as deploy plans it; ``route_to``: the
    peer whose route its probe reports."""
    try:
        config = Config.from_data(data, host=name)
    except ValueError as error:
        raise NodeNotReady(f"{name}: invalid settings: {error}") from error
    command = probe_command(ProbeInputs(config.layout, managed_env_keys(config), venv_python=config.venv_python,
                                        route_to=route_to))
    try:
        result = host.run(command)
    except Exception as error:  # paramiko/socket errors: the host cannot be reached
        raise NodeNotReady(f"{name}: cannot run the facts probe: {type(error).__name__}: {error}") from error
    if result.rc != 0 or not result.stdout.strip():
        raise NodeNotReady(f"{name}: the facts probe exited {result.rc}: {(result.stderr or result.stdout).strip()[-500:]}")
    try:
        facts = build_document(result.stdout.splitlines())
    except (ValueError, KeyError, TypeError) as error:
        raise NodeNotReady(f"{name}: could not parse the facts probe: {error}") from error
    return Expected(name, config, facts, plan(facts, config, member=member))


def parse_unit(text):
    """A systemd unit file -> ``{section: [(key, value), ...]}`` in file order
    (continuation lines joined, comments skipped).

    >>> parse_unit("[Service]\\n# c\\nUser=sglang\\nExecStart=/v/bin/python \\\\\\n  -m x\\n")
    {'Service': [('User', 'sglang'), ('ExecStart', '/v/bin/python  -m x')]}
    """
    sections, current, pending = {}, None, ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
        elif "=" in line and current is not None:
            key, _, value = line.partition("=")
            sections[current].append((key.strip(), value.strip()))
    return sections


def exec_argv(value):
    """The argv of an ``ExecStart=`` value, without systemd's prefixes (``@-:+!``).

    >>> exec_argv("-/opt/v/bin/python -m sglang.launch_server --port 30000")[:3]
    ['/opt/v/bin/python', '-m', 'sglang.launch_server']
    """
    return shlex.split(value.lstrip("@-:+!"))


def unit_environment(text):
    """The ``Environment=`` assignments of a unit's [Service] section, in order.

    >>> unit_environment('[Service]\\nEnvironment=HOME=/var/lib/x "A=b c"\\nUser=x\\n')
    {'HOME': '/var/lib/x', 'A': 'b c'}
    """
    values = {}
    for key, value in parse_unit(text).get("Service", []):
        if key == "Environment":
            for item in shlex.split(value):
                name, sep, rest = item.partition("=")
                if sep:
                    values[name] = rest
    return values


def service_command(env, command, user, strict=True):
    """A shell command that runs ``command`` (a shell snippet) in the service's
    environment: systemd's default PATH, HOME/USER of ``user``, then ``env`` (the
    unit's Environment= and EnvironmentFile= assignments) verbatim, nothing inherited.
    As ``user`` (``runuser`` when connected as root, with root's own PATH: ``runuser``
    and ``env`` are found before the service's PATH applies), the way ``User=`` runs the
    service; root itself never runs in it. Connected as another user: refused when
    ``strict`` (the check needs ``user``: files FlashInfer creates at import stay the
    service user's), else run as that user (no privilege to lend).

    >>> service_command({"CUDA_HOME": "/c"}, "echo $CUDA_HOME", "sglang", strict=False).split("; ")[-1]
    "$run env -i HOME=$home PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin USER=sglang \
LOGNAME=sglang CUDA_HOME=/c timeout 300 sh -c 'echo $CUDA_HOME'"
    >>> "run='runuser -u sglang --'" in service_command({}, "id", "sglang")
    True
    """
    values = {"PATH": SERVICE_BASE_PATH, "USER": user, "LOGNAME": user, **env}
    assignments = " ".join(shlex.quote(f"{key}={value}") for key, value in values.items())
    run = f"env -i HOME=$home {assignments} timeout {COMMAND_TIMEOUT_S} sh -c {shlex.quote(command)}"
    quoted = shlex.quote(user)
    other = (f"echo \"connected as $(id -un): cannot run as the service user {user} "
             f"(connect as root, with sudo, or as {user})\" >&2; exit 97" if strict else "run=")
    return (f"home=$(getent passwd {quoted} | cut -d: -f6); "
            f"if [ \"$(id -un)\" = {quoted} ]; then run=; "
            f"elif [ \"$(id -u)\" = 0 ]; then "
            f"[ -n \"$home\" ] || {{ echo 'service user {user} does not exist' >&2; exit 97; }}; "
            f"run='runuser -u {user} --'; "
            f"else {other}; fi; "
            f"$run {run}")
