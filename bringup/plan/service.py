"""The SGLang service: its environment file (and what the operator changed in it), its
unit and command line, what it exposes, and why a unit that fails does.

    >>> from bringup.config import Config
    >>> from bringup.plan.context import PlanContext
    >>> context = PlanContext.of({}, Config(service_model="m"), None, print)
    >>> service = service_plan(context, service_env(context.config, context.home, "12.0f"))
    >>> service.exec_line
    '/opt/sglang/venv/bin/sglang serve --model-type llm --model-path m --host 127.0.0.1 --port 30000'
    >>> service.env["CUDA_HOME"] == context.home, service.enable
    (True, True)
"""

import ipaddress
import posixpath
import shlex

from bringup import explain, redact, systemd
from bringup.caches import cache_env
from bringup.findings import BLOCKER, FIX, WARNING, Finding
from bringup.group import GROUP_ENV_KEYS
from bringup.layout import SERVICE_BASE_PATH
from bringup.plan.model import HOST_CXX, ServicePlan

# The driver's daemons the service starts after, where the node has them: persistence
# mode held for the GPUs, and the NVSwitch fabric set up (CUDA otherwise fails with
# "Error 802: system not yet initialized" while Fabric Manager is still starting); on a
# Grace-Blackwell tray, IMEX where it runs (the memory shared across the NVLink domain).
DRIVER_DAEMONS = ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-imex")


def service_env(config, home, arch_list):
    """What the service's environment file holds: the toolkit, the arch list, every
    cache under service_cache_dir (bringup/caches.py), the host compiler, then the
    operator's ``service_env``."""
    layout = config.layout
    return {
        "CUDA_HOME": home,
        "PATH": f"{home}/bin:{layout.venv}/bin:{SERVICE_BASE_PATH}",
        "FLASHINFER_CUDA_ARCH_LIST": arch_list,
        **cache_env(layout.cache_dir),
        "CXX": HOST_CXX,
        **dict(config.service_env),
    }


def managed_env_keys(config):
    """The keys of the service env file whose values the probe reports: those the plan
    decides itself. Never ``service_env``'s (deploy manages them too, but their values
    are the operator's secrets: pyinfra prints a fact's output at -vvv), so a changed
    one is reset without being reported.

    >>> from bringup.config import Config
    >>> managed_env_keys(Config(service_env=(("HF_TOKEN", "hf_x"),)))[:3], "HF_TOKEN" in managed_env_keys(
    ...     Config(service_env=(("HF_TOKEN", "hf_x"),)))
    (('CUDA_HOME', 'PATH', 'FLASHINFER_CUDA_ARCH_LIST'), False)
    """
    operators = dict(config.service_env)
    # A serving group's member: the NCCL/Gloo keys the group decides (the config refuses them in
    # service_env there); a host serving alone keeps exactly the keys it had.
    group = GROUP_ENV_KEYS if config.service_group else ()
    return tuple(key for key in service_env(config, "", "") if key not in operators) + group


def check_service_env(context, env):
    """A managed key the operator changed in the env file is reset by deploy: say so first.
    The values of keys that are not the plan's own (``service_env``'s: tokens) are never
    shown, neither the file's nor the setting's (bringup/redact.py)."""
    found = context.facts.get("service_env") or {}
    shown_found, shown_env = redact.env(found), redact.env(env)
    changed = [f"{key}={shown_found[key]} (deploy sets {shown_env[key]})" for key in env
               if key in found and found[key] != env[key]]
    if changed:
        context.add(Finding("SERVICE_ENV_OVERRIDDEN", FIX,
                            f"{context.config.service_env_file} sets {'; '.join(changed)}",
                            "deploy resets these keys to the plan's values; your own keys stay. To keep another "
                            "value, change the setting that decides it, or add keys of your own through service_env"))


def driver_units(facts):
    """The systemd units of the driver's daemons the node has (``driver_layer.units``
    whose load state is not ``not-found``), in DRIVER_DAEMONS' order: the unit is ordered
    after them and wants them. A node without them, or a report without the driver
    layer, gets none.

    >>> driver_units({"driver_layer": {"units": {"nvidia-fabricmanager": {"load_state": "loaded"},
    ...                                          "nvidia-persistenced": {"load_state": "not-found"}}}})
    ('nvidia-fabricmanager.service',)
    >>> driver_units({"driver_layer": None})
    ()

    IMEX's unit is the imex section's, counted where it runs or is enabled (the administrator's,
    or deploy's once its nodes config lists the domain): one installed but left stopped is not
    pulled in by the service.

    >>> driver_units({"driver_layer": {}, "imex": {"unit": {"load_state": "loaded", "active_state": "active",
    ...                                                     "unit_file_state": "enabled"}}})
    ('nvidia-imex.service',)
    >>> driver_units({"driver_layer": {}, "imex": {"unit": {"load_state": "loaded", "active_state": "inactive",
    ...                                                     "unit_file_state": "disabled"}}})
    ()
    """
    units = dict((facts.get("driver_layer") or {}).get("units") or {})
    imex_unit = (facts.get("imex") or {}).get("unit") or {}
    if imex_unit.get("active_state") == "active" or imex_unit.get("unit_file_state") == "enabled":
        units.setdefault("nvidia-imex", imex_unit)
    return tuple(f"{name}.service" for name in DRIVER_DAEMONS
                 if (units.get(name) or {}).get("load_state") not in (None, "not-found"))


def service_plan(context, env):
    """The unit runs the release's entry point, ``sglang serve`` (0.5.23's launch_server.py:70-77
    calls ``python -m sglang.launch_server`` legacy), as a language model server
    (``--model-type llm``: sglang/cli/serve.py otherwise asks the Hugging Face hub
    whether the model is a diffusion one); without a model, no ``--model-path`` (never
    an empty argument): the unit is written but not enabled. ``env`` is its env file's
    content (``service_env``)."""
    config, layout = context.config, context.layout
    model = ("--model-path", config.service_model) if config.service_model else ()
    # The API key comes in a YAML file SGLang reads itself (--config): never the key
    # on the command line, which systemctl show and ps print to every user.
    key = ("--config", config.service_api_key_file) if config.service_api_key_file else ()
    # A serving group's member: SGLang's multi-node arguments last (bringup/group.py; service_args
    # may not carry them), the same command on every member otherwise.
    group = context.member.args if context.member is not None else ()
    exec_start = (layout.entry_point, "serve", "--model-type", "llm", *model, "--host", config.service_host,
                  "--port", config.service_port, *key, *shlex.split(config.service_args), *group)
    return ServicePlan(user=config.service_user, home=layout.service_home, env_file=layout.env_file, env=env,
                       unit=layout.unit, exec_start=exec_start, exec_line=systemd.exec_line(exec_start),
                       description=f"SGLang server ({config.service_model or 'no model configured'})",
                       enable=bool(config.service_model) and config.service_enable,
                       host=listen_address(exec_start), api_key_file=config.service_api_key_file,
                       after_units=driver_units(context.facts), port=last_option(exec_start, "--port", "30000"),
                       ready_timeout=config.service_ready_timeout, rollback=config.service_rollback,
                       api_key_source=config.service_api_key_source,
                       api_key_dir=posixpath.dirname(config.service_api_key_file))


def last_option(argv, option, default):
    """The value of ``option`` in ``argv`` as ``sglang serve`` takes it: the last one
    (argparse keeps the last; ``service_args`` may name one after the plan's), or
    ``default`` (SGLang's own) without one.

    >>> last_option(["sglang", "serve", "--port", "30000", "--port=8000"], "--port", "30000")
    '8000'
    """
    value = default
    for at, word in enumerate(argv):
        if word == option and at + 1 < len(argv):
            value = argv[at + 1]
        elif word.startswith(option + "="):
            value = word.partition("=")[2]
    return value


def listen_address(argv):
    """The address ``sglang serve`` binds with ``argv``: its last ``--host``, SGLang's own
    default 127.0.0.1 without one.

    >>> listen_address(["sglang", "serve", "--host", "127.0.0.1", "--tp", "8", "--host=0.0.0.0"])
    '0.0.0.0'
    >>> listen_address(["sglang", "serve"])
    '127.0.0.1'
    """
    return last_option(argv, "--host", "127.0.0.1")


def loopback_only(address):
    """Whether ``address`` reaches this node's own loopback only.

    >>> [loopback_only(a) for a in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "::", "10.0.0.5")]
    [True, True, True, False, False, False]
    """
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def exposure_findings(service, service_args, port):
    """What the service exposes: SERVICE_OPEN (a warning) when it listens beyond
    loopback with no API key; SERVICE_ARGS_CONFLICT (a blocker) when service_args has
    a --config of its own beside service_api_key_file (SGLang takes one). The key's
    value is never read here: only whether a file names it.

    >>> [f.code for f in exposure_findings(ServicePlan("u", "/h", "/e", {}, "/u", (), "", "", True, "0.0.0.0"), "", "30000")]
    ['SERVICE_OPEN']
    >>> exposure_findings(ServicePlan("u", "/h", "/e", {}, "/u", (), "", "", True, "0.0.0.0", "/etc/sglang/k.yaml"), "", "1")
    []
    """
    own_config = "--config" in [word.split("=", 1)[0] for word in shlex.split(service_args)]
    if service.api_key_file and own_config:
        return [Finding("SERVICE_ARGS_CONFLICT", BLOCKER,
                        f"service_args has a --config of its own and service_api_key_file is {service.api_key_file}: "
                        "SGLang refuses a second --config file",
                        f"move the options of your --config file into {service.api_key_file} (SGLang reads options "
                        "and api-key from it) and remove --config from service_args, or leave "
                        "service_api_key_file empty and put api-key in your own file")]
    if loopback_only(service.host) or service.api_key_file or own_config:
        return []
    return [Finding("SERVICE_OPEN", WARNING,
                    f"sglang serve listens on {service.host}:{port} with no API key: anyone who reaches the port "
                    "can use the GPUs",
                    "set service_api_key_source to a file on the control machine holding `api-key: <key>` "
                    f"(deploy uploads it to service_api_key_file on the node, root:{service.user} 0640, after it "
                    "creates the account; SGLang reads it with --config), or service_host: 127.0.0.1 behind a proxy "
                    "on the node that authenticates")]


def check_service_unit(context):
    """A unit that failed or keeps restarting: name the cause its journal shows (the
    signatures of bringup/explain.py, the ones ``python -m bringup.explain`` uses), with
    that cause's fix in this node's terms. A warning: the cause may be one deploy
    repairs (then another finding says so too) or one it cannot (the driver)."""
    unit, add = context.facts.get("service_unit"), context.add
    if not explain.unit_failing(unit):
        return
    state = explain.unit_state_text(unit)
    journal = unit.get("journal") or []
    matches = explain.explain(journal)
    if not matches:
        add(Finding("SERVICE_FAILED", WARNING,
                    f"{state}; no known cause in the last {len(journal)} line(s) of its journal",
                    f"read `journalctl -u {unit['name']} -o cat`; `python -m bringup.explain` names the causes "
                    "it knows (README, \"Explain a failed start\")"))
        return
    terms = explain.Context(home=context.home, cuda=str(context.torch_cuda),
                            env_file=context.config.service_env_file, arch_list=" ".join(context.targets))
    causes = "; ".join(f"{match.signature.code} ({match.signature.title}: \"{explain.shorten(match.line)}\")"
                       for match in matches)
    # One fix per cause code: the trap's two lines (the refused SM, then the sm75 error)
    # have one fix.
    fixes, codes = [], set()
    for match in matches:
        if match.signature.code not in codes:
            codes.add(match.signature.code)
            fixes.append(match.fix(terms))
    add(Finding("SERVICE_FAILED", WARNING, f"{state}; its journal shows {causes}", "; also ".join(fixes)))


def check_serving_ready(context):
    """Without ``service_model`` deploy writes the unit but does not enable it: the node
    ends with nothing serving. A warning, not a blocker: deploy does all it was asked
    to (a node may be staged before its model is chosen), and validate's exit status
    keeps saying whether deploy can run; the fleet summary and the node suite say the
    node is not serving-ready, naming the setting."""
    if not context.config.service_model:
        context.add(Finding(
            "SERVICE_NOT_SERVING_READY", WARNING,
            f"service_model is empty: deploy writes {context.layout.unit_name} without --model-path and does not "
            "enable it, so nothing serves after deploy",
            "set service_model to a Hugging Face model id or a local path the service user can read "
            "(e.g. `--data service_model=Qwen/Qwen3-0.6B`), then run deploy.py"))
