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

Then, on the same node, a new operator's first hour as the README tells it
(``test_a_new_operators_first_hour``): a fresh ``git clone`` of this checkout and
``make setup`` in it (the control side only), ``inventory/hosts.yml`` written as the README
shows with this node and one host nothing listens for, ``pyinfra --json inventory/gpu.py
validate.py`` without ``-y`` and without a terminal (stdout one JSON document, the
unreachable host a line on stderr, exit status 1), two what-if plans
(``python -m bringup.plan reports/<node>.json --config ...``: the human report, exit
status 0 or 1 as docs/exit-statuses.md says), deploy with ``service_api_key_source`` and
``metrics_textfile_dir``, and each host's textfile read with prometheus_client's parser.

Light, as tests/sandbox/test_rollback.py: no toolkit, one small real venv from the
operator's tiny lock. Not run in the session that wrote it (the lead runs the sandbox
suites).
"""

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.sandbox_fixtures import (
    OPERATOR_LOCK,
    REPO_ROOT,
    changed_operations,
    pyinfra_cli,
    registered_serving_node,
    report_path,
    reports_dir,
    run_ssh,
    summary_rows,
)

pytestmark = pytest.mark.sandbox

NAME = "ak-fresh"
KEY_FILE = "/etc/sglang/api-key.yaml"
DROP_IN = "/etc/systemd/system/sglang.service.d/fake-sglang.conf"
SECRET, NEW_SECRET = "sk-fresh-node-key-5e1f0c", "sk-fresh-node-key-rotated-77aa"
FIRST_HOUR_SECRET = "sk-first-hour-key-0b94d2"
# A host nothing listens for: a refused port on loopback, a short connect timeout.
DOWN = "down-01"
# The sandbox's host packages no control machine has a use for.
SANDBOX_ONLY = ("debootstrap", "qemu-user-static", "gcc-aarch64-linux-gnu")
DOWN_DATA = {"ssh_hostname": "127.0.9.254", "ssh_port": 1, "ssh_connect_timeout": 3}
# The light deploy's settings, under all: as the README shows them.
LIGHT = {"deploy_steps": ["env", "account", "venv", "service"], "cuda_manage_alternative": False,
         "service_model": "fake/model", "service_ready_timeout": 60, "venv_installer": "pip",
         "venv_lock": OPERATOR_LOCK, "service_env": {"FAKE_SGLANG_READY_AFTER": "2"}}


@pytest.fixture(scope="module")
def node(sandbox_node, tmp_path_factory):
    # The double reads the key file the unit names, as the service user.
    with registered_serving_node(sandbox_node, NAME, "127.0.0.99",
                                 f"sed -i 's|--port 30000|--port 30000 --config {KEY_FILE}|' {DROP_IN}") as (entry,
                                                                                                       registered):
        source = tmp_path_factory.mktemp("control") / "api-key.yaml"
        source.write_text(f"api-key: {SECRET}\n")
        source.chmod(0o600)
        yield dict(entry, source=source, registered=registered)


def run(node, script, json_output=False):
    data = ("deploy_steps=env,account,venv,service", "cuda_manage_alternative=false", "service_model=fake/model",
            "service_ready_timeout=60", "venv_installer=pip", f"venv_lock={OPERATOR_LOCK}",
            "service_env=FAKE_SGLANG_READY_AFTER=2", f"service_api_key_source={node['source']}")
    result = pyinfra_cli(*(() if json_output else ("-vvv",)), "inventory/gpu.py", script, data=data,
                         json_output=json_output, timeout=600)
    saved = "".join(path.read_text() for path in reports_dir().rglob("*.json"))
    for secret in (SECRET, NEW_SECRET):
        assert secret not in result.output and secret not in saved, "the key was printed or saved"
    [result.row] = summary_rows().values()
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
    report = json.loads(report_path(NAME).read_text())
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


def operator(clone, *command, timeout=900):
    """A command of the operator's, run in the clone as they would: no variable of this
    test session's (the clone's own inventory/hosts.yml and reports/), no terminal."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GPU_BRINGUP_")}
    result = subprocess.run(list(command), check=False, cwd=clone, capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL, env=env)
    result.output = result.stdout + result.stderr
    return result


def installed(packages):
    """dpkg's status line of each package ("" when dpkg knows it not)."""
    return {name: subprocess.run(["dpkg-query", "-W", "-f=${Status}", name], check=False, capture_output=True,
                                 text=True).stdout for name in packages}


def textfile_samples(path):
    """{(metric, frozenset(labels)): value} of one textfile, read by prometheus_client."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(path.read_text()) for sample in family.samples}


def first_on(samples, metric):
    """The labels of ``metric``'s samples whose value is 1."""
    return [dict(labels) for (name, labels), value in samples.items() if name == metric and value == 1]


def test_a_new_operators_first_hour(node, tmp_path):
    """README, "Running it on your nodes", from a fresh clone (after the test above, or
    alone on the fresh node: either way deploy has this key to upload)."""
    from control.metrics import textfile_name

    # 1. A fresh clone and make setup: the control side only.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True, timeout=600)
    sandbox_packages = [word for name in ("sandbox/host-packages.txt", "sandbox/aptrepo/host-packages.txt")
                        for line in (clone / name).read_text().splitlines()
                        for word in line.split("#")[0].split()]
    assert set(SANDBOX_ONLY) <= set(sandbox_packages), sandbox_packages
    planned = operator(clone, "make", "-n", "setup", timeout=60)
    assert planned.returncode == 0, planned.output
    # Only python3-venv is looked for (python3, gcc, dpkg... are in the sandbox's list too).
    assert "for p in python3-venv;" in planned.stdout, planned.stdout
    assert not [name for name in SANDBOX_ONLY if name in planned.stdout], planned.stdout
    before = installed(sandbox_packages)
    setup = operator(clone, "make", "setup", timeout=1800)
    assert setup.returncode == 0, setup.output[-4000:]
    for line in setup.output.splitlines():
        if line.startswith("installing host packages:"):
            assert line.split(":", 1)[1].split() == ["python3-venv"], line
    assert installed(sandbox_packages) == before, "make setup installed a sandbox host package"
    assert not [name for name in SANDBOX_ONLY if name in setup.output], setup.output[-4000:]
    python, pyinfra = clone / ".venv/bin/python", clone / ".venv/bin/pyinfra"
    imported = operator(clone, str(python), "-c", "import pyinfra, testinfra, prometheus_client, packaging, yaml")
    assert imported.returncode == 0, imported.output
    assert pyinfra.exists()

    # 2. The inventory as the README shows it: settings under all:, the node, a host that is down.
    key = tmp_path / "control" / "api-key.yaml"
    key.parent.mkdir(mode=0o700)
    key.write_text(f"api-key: {FIRST_HOUR_SECRET}\n")
    key.chmod(0o600)
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    hosts = {name: {**data, "service_host": node["ssh_hostname"]} for name, data in node["registered"]["hosts"].items()}
    hosts[DOWN] = {**DOWN_DATA, "ssh_known_hosts_file": node["ssh_known_hosts_file"]}
    settings = {**node["registered"]["all"], **LIGHT, "service_api_key_source": str(key),
                "metrics_textfile_dir": str(textfiles)}
    (clone / "inventory" / "hosts.yml").write_text(yaml.safe_dump({"all": settings, "hosts": hosts}))
    reports = clone / "reports"

    def private(result):
        saved = "".join(path.read_text() for path in reports.rglob("*.json")) if reports.exists() else ""
        assert FIRST_HOUR_SECRET not in result.output and FIRST_HOUR_SECRET not in saved, "the key was printed"

    def rows():
        return {row["host"]: row for row in json.loads((reports / "summary.json").read_text())["hosts"]}

    # 3. Validate: no -y, no terminal, --json: one JSON document, the host that is down a line, a no.
    checked = operator(clone, str(pyinfra), "--json", "inventory/gpu.py", "validate.py")
    private(checked)
    assert checked.returncode == 1, checked.output[-4000:]
    json.loads(checked.stdout)
    assert "Traceback" not in checked.stderr and "Press enter" not in checked.stderr, checked.stderr[-4000:]
    assert "EOFError" not in checked.stderr, checked.stderr[-4000:]
    assert f"{DOWN}: unreachable: Could not connect" in checked.stderr, checked.stderr[-4000:]
    down_lines = [line for line in checked.stderr.splitlines() if DOWN in line and "Could not connect" in line]
    assert len(down_lines) == 2, checked.stderr[-4000:]  # pyinfra's line, and the one under the summary
    assert "-- 1 needs deploy, 1 unreachable: 1 of 2 host(s) need a look (exit status 1)" in checked.stderr
    assert {host: row["verdict"] for host, row in rows().items()} == {NAME: "needs deploy", DOWN: "unreachable"}
    report = json.loads((reports / f"{NAME}.json").read_text())
    assert "API_KEY_FILE_UPLOAD" in [f["code"] for f in report["plan"]["findings"]]

    # 4. What-if plans on the saved report: the human report, 0 for yes and 1 for no.
    what_if = tmp_path / "what-if.yaml"
    what_if.write_text(yaml.safe_dump({name: value for name, value in LIGHT.items() if name != "service_env"}))
    same = operator(clone, str(python), "-m", "bringup.plan", f"reports/{NAME}.json", "--config", str(what_if))
    as_json = operator(clone, str(python), "-m", "bringup.plan", f"reports/{NAME}.json", "--config", str(what_if),
                       "--json")
    assert same.returncode in (0, 1) and "Traceback" not in same.stderr, same.output[-4000:]
    ok = json.loads(as_json.stdout)["ok"]
    assert same.returncode == as_json.returncode == (0 if ok else 1)
    assert same.stdout.splitlines()[0] == f"== {NAME}: {'READY TO DEPLOY' if ok else 'BLOCKED'}", same.stdout[:2000]
    what_if.write_text(yaml.safe_dump({"stack_sglang": "0.4.0"}))  # a release with no lock yet: a no
    upgrade = operator(clone, str(python), "-m", "bringup.plan", f"reports/{NAME}.json", "--config", str(what_if))
    assert upgrade.returncode == 1, upgrade.output[-4000:]
    assert upgrade.stdout.splitlines()[0] == f"== {NAME}: BLOCKED"
    assert "[BLOCKER] VENV_LOCK_MISSING" in upgrade.stdout and "make lock" in upgrade.stdout, upgrade.stdout[:4000]

    # 5. Deploy with the key kept on the control machine and the textfile directory.
    started = time.time()
    deployed = operator(clone, str(pyinfra), "-y", "inventory/gpu.py", "deploy.py", timeout=1200)
    private(deployed)
    assert deployed.returncode == 1, deployed.output[-4000:]  # the host that is down is not serving
    assert {host: row["verdict"] for host, row in rows().items()} == {NAME: "serving", DOWN: "unreachable"}, \
        deployed.output[-4000:]
    assert run_ssh(node, f"stat -c '%F %U:%G %a' {KEY_FILE}").stdout.strip() == "regular file root:sglang 640"
    assert run_ssh(node, f"cat {KEY_FILE}").stdout == key.read_text()
    assert generate(node, FIRST_HOUR_SECRET) == 200 and generate(node) == 401
    assert FIRST_HOUR_SECRET not in run_ssh(node, "ps -eo args=").stdout

    # 6. The textfiles, read by prometheus_client: the node's verdict, findings, stack; the host that is down.
    assert sorted(path.name for path in textfiles.iterdir()) == sorted([textfile_name(NAME), textfile_name(DOWN)])
    mine = textfile_samples(textfiles / textfile_name(NAME))
    assert [labels["verdict"] for labels in first_on(mine, "gpu_bringup_verdict")] == ["serving"]
    assert first_on(mine, "gpu_bringup_good") == [{"host": NAME, "purpose": "deploy"}]
    by_severity = {dict(labels)["severity"]: value for (name, labels), value in mine.items()
                   if name == "gpu_bringup_findings_by_severity"}
    by_code = {(dict(labels)["severity"], dict(labels)["code"]): value for (name, labels), value in mine.items()
               if name == "gpu_bringup_findings"}
    assert set(by_severity) == {"blocker", "fix", "warning", "info"} and by_severity["blocker"] == 0
    assert by_severity == {severity: sum(n for (s, _), n in by_code.items() if s == severity) for severity in by_severity}
    assert by_code.get(("fix", "API_KEY_FILE_UPLOAD")) == 1, by_code
    stack = {labels["source"]: labels for labels in first_on(mine, "gpu_bringup_stack_info")}
    assert set(stack) == {"found", "planned"} and stack["planned"]["sglang"], stack
    [when] = [value for (name, _), value in mine.items() if name == "gpu_bringup_last_run_timestamp_seconds"]
    assert started <= when <= time.time()
    down = textfile_samples(textfiles / textfile_name(DOWN))
    assert [labels["verdict"] for labels in first_on(down, "gpu_bringup_verdict")] == ["unreachable"]
    assert not first_on(down, "gpu_bringup_good") and not first_on(down, "gpu_bringup_stack_info")
    for text in (path.read_text() for path in textfiles.iterdir()):
        assert FIRST_HOUR_SECRET not in text
    shutil.rmtree(clone / ".venv", ignore_errors=True)  # the clone's venv is the largest part of tmp_path
