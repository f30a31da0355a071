"""Issue 21, findings 1 (task side) and 15, on the shared deployed node:

- an external venv (``venv_managed: false``) owned by a non-root user, with a ``.pth``
  that records the uid of every python that starts in it: deploy's pre-warm runs it as
  the service user only (session-bound under the system's ``/usr/bin/python3 -I``),
  never as root;
- the API key (``service_api_key_file``, SGLang's ``--config``) is on no command line:
  neither ``systemctl show -p ExecStart`` nor ``ps -o args`` of the running server shows
  it, and no report does; a key file others can read fails the host before the unit is
  written.

Each test puts the node back as the suites share it (a deploy with DEPLOY_DATA)."""

import json
import shlex
import time

import pytest

from tests.sandbox_fixtures import (DEPLOY_DATA, plant_fake_model_command, pyinfra_cli, remove_fake_model, report_path,
                                    run_ssh)

pytestmark = pytest.mark.sandbox

OWNER = "venvowner"
EXTERNAL = "/srv/venvowner-venv"
RECORD = "/tmp/exposure-pth-ran-as-"
# One line of a .pth: printed with its newline by printf (json's "\\n" stayed a literal
# backslash-n, a syntax error, so the plant never ran).
PLANT = f"import os; open('{RECORD}' + str(os.getuid()), 'w')"
KEY_FILE = "/etc/sglang/api-key.yaml"
SECRET = "sk-sandbox-exposure-5f1e2d3c4b5a69788796"


@pytest.fixture(scope="module")
def node(deployed_node):
    return deployed_node


def deploy(node, *data):
    return pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "deploy.py", data=(*DEPLOY_DATA, *data))


def test_the_pre_warm_never_runs_an_external_venvs_python_as_root(node):
    """The venv is the owner's (its python links the system's, its site-packages reach the
    managed venv's packages through a .pth, so torch and FlashInfer import): what runs in
    it records its uid. A pre-warm request unlike the deployed one makes the step run."""
    uid = run_ssh(node, f"""
        cd /tmp
        id {OWNER} >/dev/null 2>&1 || useradd -M -d /nonexistent -s /usr/sbin/nologin {OWNER}
        rm -rf {EXTERNAL} {RECORD}*
        install -d -o {OWNER} -g {OWNER} -m 755 {EXTERNAL}
        runuser -u {OWNER} -- python3 -m venv --without-pip {EXTERNAL}
        site=$(ls -d {EXTERNAL}/lib/python3*/site-packages)
        managed=$(ls -d /opt/sglang/venv/lib/python3*/site-packages)
        echo "$managed" | runuser -u {OWNER} -- tee "$site/managed.pth" >/dev/null
        printf '%s\\n' {shlex.quote(PLANT)} | runuser -u {OWNER} -- tee "$site/zz-record-uid.pth" >/dev/null
        id -u sglang""").stdout.split()[-1]
    external = ("venv_managed=false", f"venv_path={EXTERNAL}", "deploy_steps=prewarm", "prewarm_modules=norm")
    try:
        result = deploy(node, *external)
        assert result.returncode == 0, result.output[-4000:]
        ran = run_ssh(node, f"ls {RECORD}* 2>/dev/null; true").stdout.split()
        assert f"{RECORD}{uid}" in ran, \
            f"the pre-warm did not run the external venv as sglang: {ran}\n{result.output[-4000:]}"
        assert f"{RECORD}0" not in ran, f"root ran the external venv's python: {ran}"
    finally:
        run_ssh(node, f"rm -rf {EXTERNAL} {RECORD}*; userdel {OWNER} 2>/dev/null; true")
        # Back to the shared deployed state (the pre-warm manifest of DEPLOY_DATA's request).
        assert deploy(node).returncode == 0


def argv_samples(node, seconds=45):
    """``ps -o args`` of the service's processes, sampled until the server has been seen
    (the stand-in GPUs make it fail after it starts; systemd restarts it every 10 s);
    within run_ssh's 60 s."""
    script = (f"end=$(($(date +%s) + {seconds})); seen=0; "
              "while [ $(date +%s) -lt $end ]; do "
              "pid=$(systemctl show -p MainPID --value sglang); "
              "if [ \"$pid\" != 0 ]; then ps -o args= -p \"$pid\" && seen=$((seen + 1)); "
              "ps -eo args= | grep '[s]glang serve'; fi; "
              "[ $seen -ge 3 ] && break; sleep 0.3; done; true")
    return run_ssh(node, script).stdout


def test_the_api_key_is_on_no_command_line_and_in_no_report(node):
    keyed = ("service_enable=true", "service_host=0.0.0.0", f"service_api_key_file={KEY_FILE}")
    unit_digest = "sha256sum /etc/systemd/system/sglang.service | cut -c1-64"
    try:
        # The model can be had (a hub model neither cached nor reachable blocks a deploy that starts the service).
        run_ssh(node, plant_fake_model_command("Qwen/Qwen3-0.6B"))
        before = run_ssh(node, f"printf 'api-key: %s\\n' {SECRET} > {KEY_FILE} && chown root:sglang {KEY_FILE} "
                               f"&& chmod 0644 {KEY_FILE} && {unit_digest}").stdout.strip()
        # A key file every user can read: the host fails before the unit is written.
        refused = deploy(node, *keyed, "deploy_steps=service")
        assert refused.returncode == 1, refused.output[-3000:]
        # validate's check, before anything changes (bringup/api_key.py): the same rule the
        # service step kept, said by the plan.
        assert f"API_KEY_FILE_UNUSABLE: service_api_key_file={KEY_FILE} is mode 0644: other users can read the key" \
               in refused.output, refused.output[-3000:]
        assert run_ssh(node, unit_digest).stdout.strip() == before, "the unit was written"

        run_ssh(node, f"chown root:sglang {KEY_FILE} && chmod 0640 {KEY_FILE}")
        # The unit is written and started; SGLang cannot start on the stand-in GPUs and
        # exits, so the readiness gate fails the host at its first failed start (with what
        # the journal says, never the key: checked below).
        result = deploy(node, *keyed, "deploy_steps=service", "service_ready_timeout=300")
        assert result.returncode == 1, result.output[-4000:]
        assert "sglang.service is not serving: sglang.service failed" in result.output, result.output[-4000:]
        shown = run_ssh(node, "systemctl show -p ExecStart sglang; cat /etc/systemd/system/sglang.service").stdout
        assert f"--host 0.0.0.0 --port 30000 --config {KEY_FILE}" in shown, shown
        samples = argv_samples(node)
        assert f"--config {KEY_FILE}" in samples, f"the server was never seen running: {samples!r}"
        report_path(node["name"]).unlink(missing_ok=True)
        validated = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "validate.py",
                                data=(*DEPLOY_DATA, *keyed))
        report = report_path(node["name"]).read_text()
        for where, text in (("systemctl show / the unit", shown), ("ps", samples), ("validate's output",
                            validated.output), ("the report", report), ("deploy's output", result.output)):
            assert SECRET not in text, f"the API key is in {where}"
        assert "SERVICE_OPEN" not in [f["code"] for f in json.loads(report)["plan"]["findings"]]
    finally:
        run_ssh(node, f"systemctl disable --now sglang; systemctl reset-failed sglang; rm -f {KEY_FILE}; true")
        remove_fake_model(node)
        time.sleep(1)
        # Back to the shared deployed state (the unit of DEPLOY_DATA: loopback, no key, not enabled).
        assert deploy(node).returncode == 0
