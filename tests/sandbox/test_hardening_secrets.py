"""Secrets on the shared deployed node: an operator's 0600 env file holding a token
stays 0600 through deploy, the token and service_env's values are in no output and no
report, reports are 0600; every value deploy wrote reads back exactly through the
node's systemd (a transient unit with the EnvironmentFile) and files/service-env.sh.
The node is left as it was found (content, owner and mode restored, then a converging
deploy)."""

import json
import shlex
import stat

import pytest

from bringup.layout import LIBEXEC
from tests.sandbox_fixtures import (DEPLOY_DATA, REPO_ROOT, plant_fake_model_command, pyinfra_cli, remove_fake_model,
                                    report_path, run_ssh, summary_path)

pytestmark = pytest.mark.sandbox

ENV_FILE = "/etc/sglang/sglang.env"
SECRETS = ("hf_sandboxsecret42", "pw_sandboxsecret43")
# Values systemd reads otherwise when written raw (a trailing backslash joins the next
# line, blanks are trimmed, quotes removed), given through service_env (shlex words).
TRICKY = {"T_BACKSLASH": "C:\\dir\\", "T_PADDED": "  padded ", "T_DOLLAR": "$HOME #x", "T_QUOTED": '"quoted"'}
TRICKY_WORDS = " ".join(f"{key}='{value}'" for key, value in TRICKY.items())


@pytest.fixture(scope="module")
def node(deployed_node):
    return deployed_node


def env_of(output):
    pairs = (item.partition("=") for item in output.split("\x1e") if "=" in item)
    return {key: value for key, _, value in pairs}


def test_an_operators_0600_env_file_keeps_its_mode_and_no_secret_is_printed_or_saved(node):
    name = node["name"]
    found = run_ssh(node, f"stat -c '%U %G %a' {ENV_FILE}; base64 -w0 {ENV_FILE}").stdout.split()
    owner, group, mode, content = found[0], found[1], found[2], found[3] if len(found) > 3 else ""
    run_ssh(node, f"printf 'HF_TOKEN=hf_sandboxsecret42\\n' >> {ENV_FILE} && chmod 0600 {ENV_FILE}")
    try:
        data = (*DEPLOY_DATA, f"service_env=API_PASSWORD=pw_sandboxsecret43 {TRICKY_WORDS}")
        # -vvv: pyinfra prints every command and fact output too (the env file is read by one).
        result = pyinfra_cli("-vvv", "inventory/gpu.py", "--limit", name, "deploy.py", data=data)
        assert result.returncode == 0, result.output[-4000:]
        after = run_ssh(node, f"stat -c '%U %G %a' {ENV_FILE}; grep -c '^HF_TOKEN=hf_sandboxsecret42$' {ENV_FILE}")
        assert after.stdout.split() == ["root", "sglang", "600", "1"], after.stdout
        # Nothing printed or saved holds a secret; reports are the operator's alone.
        saved = [report_path(name), summary_path()]
        texts = [result.output] + [path.read_text() for path in saved]
        assert [secret for secret in SECRETS for text in texts if secret in text] == []
        assert [stat.S_IMODE(path.stat().st_mode) for path in saved] == [0o600, 0o600]
        report = json.loads(report_path(name).read_text())
        assert report["plan"]["env"]["API_PASSWORD"] == "<redacted>"
        # What deploy wrote reads back exactly: systemd's own reader, then the node's.
        assert run_ssh(node, "test -d /run/systemd/system && echo systemd").stdout.strip() == "systemd"
        dump = "env -0 | tr '\\0' '\\036'"
        by_systemd = run_ssh(node, "systemd-run --quiet --wait --pipe --collect --service-type=exec "
                                   f"--property=EnvironmentFile={ENV_FILE} -- /bin/sh -c {shlex.quote(dump)} "
                                   "</dev/null").stdout
        script = f". {LIBEXEC}/service-env.sh; load_service_env {ENV_FILE}; {dump}"
        by_script = run_ssh(node, f"env -i /bin/sh -c {shlex.quote(script)}").stdout
        for reader, output in (("systemd", by_systemd), ("service-env.sh", by_script)):
            seen = env_of(output)
            assert {key: seen.get(key) for key in TRICKY} == TRICKY, (reader, seen)
            assert seen.get("HF_TOKEN") == "hf_sandboxsecret42", reader
    finally:
        # Back to the shared deployed state: the file as it was, then a converging deploy.
        restore = f"base64 -d > {ENV_FILE}" if content else f": > {ENV_FILE}"
        run_ssh(node, f"echo {shlex.quote(content)} | {restore} && chown {owner}:{group} {ENV_FILE} "
                      f"&& chmod {mode} {ENV_FILE}")
    assert pyinfra_cli("inventory/gpu.py", "--limit", name, "deploy.py").returncode == 0


# The secret sweep (issue 33, "one rule for secrets"): a distinctive value in every input
# that bears one, found nowhere a full deploy writes or prints.
SWEEP_ENV_FILE = {"AWS_SECRET_ACCESS_KEY": "aws_sweepsecret_71", "WANDB_API_KEY": "wandb_sweepsecret_72",
                  "HF_TOKEN": "hf_sweepsecret73abcdefghijkl"}
SWEEP_SERVICE_ENV = {"API_PASSWORD": "pw_sweepsecret_75"}
SWEEP_API_KEY = "sk-sweepsecret-74"
SWEEP_ENDPOINT_PASSWORD = "ep_sweepsecret_76"
SWEEP = (*SWEEP_ENV_FILE.values(), *SWEEP_SERVICE_ENV.values(), SWEEP_API_KEY, SWEEP_ENDPOINT_PASSWORD)
KEY_FILE = "/etc/sglang/api-key.yaml"
PS_LOG = "/root/secret-sweep-ps.log"
PS_PID = "/root/secret-sweep-ps.pid"


def found_secrets(where, text):
    return [(where, secret) for secret in SWEEP if secret in text]


def test_a_full_deploy_at_vvv_shows_no_planted_secret_anywhere(node):
    """Plant distinctive values in the env file (an operator's 0600 one: a cloud key, a W&B
    key, the hub token), in service_env, and in the API key file; run a deploy that
    pre-warms (with-service-env --as, minutes), writes and starts the unit and waits at
    the readiness gate (which quotes the journal: SGLang fails on the stand-in GPUs), at
    -vvv, then validate at -vvv (which explains the failing unit from its journal), while
    a root loop on the node samples every process's argv (ps) every 0.2 s. No planted
    value is in pyinfra's output, in any file under reports/, or in any ps sample; an
    HF_ENDPOINT with a password in service_env is refused at validate in one line that
    does not show it. Not run by the author (a sandbox node); the lead runs it."""
    name = node["name"]
    found = run_ssh(node, f"stat -c '%U %G %a' {ENV_FILE}; base64 -w0 {ENV_FILE}").stdout.split()
    owner, group, mode, content = found[0], found[1], found[2], found[3] if len(found) > 3 else ""
    keyed = ("service_enable=true", f"service_api_key_file={KEY_FILE}", "service_ready_timeout=300",
             "prewarm_modules=norm",
             "service_env=" + " ".join(f"{key}={value}" for key, value in SWEEP_SERVICE_ENV.items()))
    try:
        refused = pyinfra_cli("-vvv", "inventory/gpu.py", "--limit", name, "validate.py",
                              data=(*DEPLOY_DATA, f"service_env=HF_ENDPOINT=https://svc:{SWEEP_ENDPOINT_PASSWORD}@hub"))
        assert refused.returncode != 0 and "remove the user and password from HF_ENDPOINT's URL" in refused.output, \
            refused.output[-3000:]
        assert found_secrets("validate's refusal", refused.output) == []

        run_ssh(node, plant_fake_model_command("Qwen/Qwen3-0.6B"))
        lines = "".join(f"{key}={value}\\n" for key, value in SWEEP_ENV_FILE.items())
        run_ssh(node, f"printf '{lines}' >> {ENV_FILE} && chmod 0600 {ENV_FILE} && "
                      f"printf 'api-key: %s\\n' {SWEEP_API_KEY} > {KEY_FILE} && chown root:sglang {KEY_FILE} && "
                      f"chmod 0640 {KEY_FILE}")
        sampler = (f"rm -f {PS_LOG}; (umask 077; : > {PS_LOG}); end=$(($(date +%s) + 3000)); "
                   f"while [ $(date +%s) -lt $end ]; do ps -eo args= >> {PS_LOG}; sleep 0.2; done")
        run_ssh(node, f"nohup sh -c {shlex.quote(sampler)} >/dev/null 2>&1 & echo $! > {PS_PID}")
        deployed = pyinfra_cli("-vvv", "inventory/gpu.py", "--limit", name, "deploy.py", data=(*DEPLOY_DATA, *keyed))
        # SGLang cannot start on the stand-in GPUs: the gate fails the host, quoting the journal.
        assert "sglang.service is not serving" in deployed.output, deployed.output[-4000:]
        validated = pyinfra_cli("-vvv", "inventory/gpu.py", "--limit", name, "validate.py",
                                data=(*DEPLOY_DATA, *keyed))
        run_ssh(node, f"kill $(cat {PS_PID}); rm -f {PS_PID}; true")
        samples = run_ssh(node, f"cat {PS_LOG}").stdout
        assert "with-service-env" in samples or "prewarm" in samples, "the long steps were never sampled"
        leaks = found_secrets("deploy -vvv", deployed.output) + found_secrets("validate -vvv", validated.output)
        leaks += found_secrets("ps", samples)
        for path in sorted((REPO_ROOT / "reports").rglob("*")):
            if path.is_file():
                leaks += found_secrets(str(path.relative_to(REPO_ROOT)), path.read_text(errors="replace"))
        assert leaks == [], leaks
    finally:
        run_ssh(node, f"[ ! -f {PS_PID} ] || kill $(cat {PS_PID}); rm -f {PS_PID} {PS_LOG} {KEY_FILE}; "
                      "systemctl disable --now sglang; systemctl reset-failed sglang; true")
        restore = f"base64 -d > {ENV_FILE}" if content else f": > {ENV_FILE}"
        run_ssh(node, f"echo {shlex.quote(content)} | {restore} && chown {owner}:{group} {ENV_FILE} "
                      f"&& chmod {mode} {ENV_FILE}")
        remove_fake_model(node)
    assert pyinfra_cli("inventory/gpu.py", "--limit", name, "deploy.py").returncode == 0
