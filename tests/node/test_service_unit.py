"""The service unit: root's, and it runs the venv's SGLang with the planned environment."""

import json
import shlex

from bringup import serving
from facts.serving import probe_command
from tests.node.expected import exec_argv, parse_unit
from tests.node.remote import fail, read_text, stat


def test_service_unit_file(host, expected):
    unit = expected.layout.unit
    info = stat(host, unit)
    if info is None or info.kind != "regular file" or info.owner != "root" or info.mode & ~0o644:
        fail(expected, "service unit", f"{unit} regular file root:* 0644 or stricter",
             str(info) if info else "missing")


def test_service_unit_directives(host, expected):
    unit = expected.layout.unit
    text = read_text(host, unit)
    if text is None:
        fail(expected, "service unit directives", f"a readable {unit}", "missing")
    service = parse_unit(text).get("Service", [])
    values = {}
    for key, value in service:
        values.setdefault(key, []).append(value)
    config, problems = expected.config, []
    if config.service_env_file not in values.get("EnvironmentFile", []):
        problems.append(f"EnvironmentFile={values.get('EnvironmentFile')}")
    if values.get("User", [None])[-1] != config.service_user:
        problems.append(f"User={values.get('User', [None])[-1]}")
    if values.get("LimitMEMLOCK", [None])[-1] != "infinity":
        problems.append(f"LimitMEMLOCK={values.get('LimitMEMLOCK', [None])[-1]}")
    exec_start = [value for value in values.get("ExecStart", []) if value]
    argv = exec_argv(exec_start[-1]) if exec_start else []
    if argv[:2] != [f"{config.venv_path}/bin/sglang", "serve"]:
        problems.append(f"ExecStart={exec_start[-1] if exec_start else None}")
    if problems:
        fail(expected, f"{unit} [Service]",
             f"EnvironmentFile={config.service_env_file} User={config.service_user} LimitMEMLOCK=infinity "
             f"ExecStart={config.venv_path}/bin/sglang serve ...", ", ".join(problems))


def test_service_model_set(host, expected):
    """Serving-ready needs a model: without service_model deploy writes the unit without
    --model-path and does not enable it (validate's SERVICE_NOT_SERVING_READY, the fleet
    summary's "not serving-ready (service_model)"); with it, the unit runs that model."""
    not_ready = [finding for finding in expected.plan.findings if finding.code == "SERVICE_NOT_SERVING_READY"]
    if not_ready:
        fail(expected, "serving-ready (service_model)", "a service_model, the unit enabled with its --model-path",
             f"not serving-ready: {not_ready[0].message}")
    text = read_text(host, expected.layout.unit)
    exec_start = [value for key, value in parse_unit(text or "").get("Service", []) if key == "ExecStart" and value]
    argv = exec_argv(exec_start[-1]) if exec_start else []
    model = argv[argv.index("--model-path") + 1] if "--model-path" in argv[:-1] else None
    if model != expected.config.service_model:
        fail(expected, f"{expected.layout.unit}'s --model-path", expected.config.service_model,
             model or "none: run deploy.py to write the unit with service_model")


def test_service_serving(host, expected):
    """Where deploy enables the unit, SGLang serves: ``/health`` answers 200 and one
    generate request of one token gets a token back (bringup/serving.py: the pinned
    release's endpoints), asked as the service user on ``service_host:service_port``
    with the API key of ``service_api_key_file`` (never printed). Where it does not
    (no model, or ``service_enable: false``), the unit is not enabled: nothing claims to
    serve."""
    service, unit = expected.plan.service, expected.layout.unit_name
    if not service.enable:
        enabled = host.run(f"systemctl is-enabled {shlex.quote(unit)} 2>/dev/null").stdout.strip()
        if enabled == "enabled":
            fail(expected, f"{unit} (not enabled by the plan)", "not enabled (no model, or service_enable: false)",
                 "enabled: deploy does not wait for it, nothing says it serves")
        return
    words = (service.user, service.host, service.port, service.api_key_file)
    where = f"http://{service.host}:{service.port}"
    health = _answer(host, probe_command(*words, what="health", unit_name=unit))
    if health.get("status") != 200:
        fail(expected, f"{unit} health ({where}{serving.HEALTH_PATH})", "200",
             f"{health.get('status') or 'no answer'} {health.get('error', '')}".strip()
             + " (journalctl -u sglang shows why; bringup.explain names known causes)")
    generated = _answer(host, probe_command(*words, what="generate", unit_name=unit))
    if not serving.answered_token(generated.get("status"), generated.get("body")):
        fail(expected, f"{unit} one-token generate ({where}{serving.GENERATE_PATH})",
             "status 200 and meta_info.completion_tokens >= 1",
             f"status {generated.get('status')}: {str(generated.get('body') or generated.get('error'))[:200]}")


def _answer(host, command):
    result = host.run(command)
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": None, "error": f"exit {result.rc}: {result.stderr.strip()[-200:]}"}
