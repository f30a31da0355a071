"""The API key on a fresh node (docs/deploy.md, "An API key on a fresh node") over real
SSH to one light sandbox node with real systemd, through the real CLI: the key is kept on
the control machine (``service_api_key_source``); validate, before the service account
exists, says deploy will upload it (``API_KEY_FILE_UPLOAD``, no blocker); deploy's
account step makes the group, its service step uploads the file ``root:sglang`` 0640 and
the service, run as the service user, reads it (the test double of SGLang's server,
started by an operator's drop-in with ``--config <the key file>``, then refuses a request
without the key and answers one with it); a second deploy changes nothing; a new key is
uploaded and restarts the service. A distinctive key is never in pyinfra's output (-vvv),
the reports, or a process's command line.

Light, as tests/sandbox/test_rollback.py: no toolkit, one small real venv from the
operator's tiny lock. Not run in the session that wrote it (the lead runs the sandbox
suites).
"""

import json
import os
import urllib.error
import urllib.request

import pytest
import yaml

from sandbox.registration import inventory_document
from tests.sandbox_fixtures import (
    REPO_ROOT,
    changed_operations,
    plant_fake_sglang,
    pyinfra_cli,
    run_ssh,
)

pytestmark = pytest.mark.sandbox

NAME = "ak-fresh"
OPERATOR_LOCK = "sandbox/locks/operator-venv-cp311-x86_64.txt"
KEY_FILE = "/etc/sglang/api-key.yaml"
DROP_IN = "/etc/systemd/system/sglang.service.d/fake-sglang.conf"
SECRET, NEW_SECRET = "sk-fresh-node-key-5e1f0c", "sk-fresh-node-key-rotated-77aa"
REPORTS = REPO_ROOT / "reports" / "api-key-fresh"


@pytest.fixture(scope="module")
def node(sandbox_node, tmp_path_factory):
    from sandbox import aptrepo, pypimirror
    from sandbox import node as sandbox

    aptrepo.ensure_served()
    pypimirror.serve([REPO_ROOT / OPERATOR_LOCK])
    entry = sandbox_node(NAME, "127.0.0.99", gpu="rtx-pro-6000-x8", toolkit="none")
    plant_fake_sglang(entry, "FAKE_SGLANG_READY_AFTER=2", "fake/model")
    # The double reads the key file the unit names, as the service user.
    run_ssh(entry, f"sed -i 's|--port 30000|--port 30000 --config {KEY_FILE}|' {DROP_IN}")
    registered = inventory_document({NAME: sandbox.read_registry()[NAME]}, pypi=pypimirror.running())
    hosts = {name: {**data, "service_host": entry["ssh_hostname"]} for name, data in registered["hosts"].items()}
    REPORTS.mkdir(parents=True, exist_ok=True)
    hosts_file = REPORTS / "hosts.yml"
    hosts_file.write_text(yaml.safe_dump({"all": registered["all"], "hosts": hosts}))
    source = tmp_path_factory.mktemp("control") / "api-key.yaml"
    source.write_text(f"api-key: {SECRET}\n")
    source.chmod(0o600)
    os.environ.update(GPU_BRINGUP_HOSTS=str(hosts_file), GPU_BRINGUP_REPORTS=str(REPORTS))
    try:
        yield dict(entry, source=source)
    finally:
        os.environ.pop("GPU_BRINGUP_HOSTS", None), os.environ.pop("GPU_BRINGUP_REPORTS", None)


def run(node, script, json_output=False):
    data = ("deploy_steps=env,account,venv,service", "cuda_manage_alternative=false", "service_model=fake/model",
            "service_ready_timeout=60", "venv_installer=pip", f"venv_lock={OPERATOR_LOCK}",
            "service_env=FAKE_SGLANG_READY_AFTER=2", f"service_api_key_source={node['source']}")
    result = pyinfra_cli(*(() if json_output else ("-vvv",)), "inventory/gpu.py", script, data=data,
                         json_output=json_output, timeout=600)
    saved = "".join(path.read_text() for path in REPORTS.rglob("*.json"))
    for secret in (SECRET, NEW_SECRET):
        assert secret not in result.output and secret not in saved, "the key was printed or saved"
    [result.row] = json.loads((REPORTS / "summary.json").read_text())["hosts"]
    return result


def generate(node, key=None):
    request = urllib.request.Request(f"http://{node['ssh_hostname']}:30000/generate", method="POST",
                                     data=json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 1}}).encode(),
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_fresh_node_gets_its_key_from_the_control_machine(node):
    assert run_ssh(node, "id -u sglang", check=False).returncode != 0, "the node is not fresh"
    checked = run(node, "validate.py")
    assert checked.returncode == 0 and checked.row["verdict"] == "needs deploy", checked.output[-4000:]
    report = json.loads((REPORTS / f"{NAME}.json").read_text())
    assert "API_KEY_FILE_UPLOAD" in [f["code"] for f in report["plan"]["findings"]]

    deployed = run(node, "deploy.py")
    assert deployed.returncode == 0 and deployed.row["verdict"] == "serving", deployed.output[-4000:]
    assert run_ssh(node, f"stat -c '%F %U:%G %a' {KEY_FILE}").stdout.strip() == "regular file root:sglang 640"
    assert run_ssh(node, f"cat {KEY_FILE}").stdout == node["source"].read_text()
    assert "gpu-bringup-new" not in run_ssh(node, "ls -A /etc/sglang").stdout, "a stage file was left"
    assert generate(node) == 401 and generate(node, SECRET) == 200
    commands = run_ssh(node, "ps -eo args=").stdout
    assert SECRET not in commands and f"--config {KEY_FILE}" in commands

    again = run(node, "deploy.py", json_output=True)
    assert again.returncode == 0 and changed_operations(again) == [], changed_operations(again)

    started = run_ssh(node, "systemctl show -p ActiveEnterTimestampMonotonic --value sglang").stdout.strip()
    node["source"].write_text(f"api-key: {NEW_SECRET}\n")
    rotated = run(node, "deploy.py")
    assert rotated.returncode == 0 and rotated.row["verdict"] == "serving", rotated.output[-4000:]
    assert run_ssh(node, "systemctl show -p ActiveEnterTimestampMonotonic --value sglang").stdout.strip() != started
    assert generate(node, SECRET) == 401 and generate(node, NEW_SECRET) == 200
