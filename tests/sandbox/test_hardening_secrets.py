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
from tests.sandbox_fixtures import DEPLOY_DATA, REPO_ROOT, pyinfra_cli, report_path, run_ssh

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
        summary = REPO_ROOT / "reports" / "summary.json"
        saved = [report_path(name), summary]
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
