"""Secrets never printed or saved, through the real CLIs: a token given in
``service_env`` or found in the service env file (probed for real on @local), a URL's
password; reports and the summary written 0600 in a 0700 directory."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
INCIDENT = ROOT / "tests" / "fixtures" / "facts" / "incident.json"
# Each test's own reports directory and stand-in env file, one per test (pytest -n), in
# root's /var/lib: service_env_file may not be under /tmp, and a clone may be there.
BASE = Path("/var/lib/gpu-bringup-cli-secrets")
SECRETS = ("hf_secret123", "hf_filesecret456", "pw_secret789")
ENV_TEXT = "HF_TOKEN=hf_filesecret456\nNOTE=kept\n"


@pytest.fixture(autouse=True, scope="module")
def _remove_base():
    yield
    shutil.rmtree(BASE, ignore_errors=True)


def pyinfra(reports, *args):
    result = subprocess.run([PYINFRA, "-y", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, GPU_BRINGUP_REPORTS=str(reports)))
    result.output = result.stdout + result.stderr
    return result


def fresh(name):
    """(reports directory, env file) of test ``name``: the directory absent, the env
    file the operator's (another value for service_env's key), 0600."""
    reports, env_dir = BASE / name / "reports", BASE / name / "etc-sglang"
    shutil.rmtree(BASE / name, ignore_errors=True)
    env_dir.mkdir(parents=True)
    (env_dir / "sglang.env").write_text(ENV_TEXT)
    (env_dir / "sglang.env").chmod(0o600)
    return reports, env_dir / "sglang.env"


def leaks(*texts):
    return [secret for secret in SECRETS for text in texts if secret in text]


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_a_token_in_service_env_and_in_the_env_file_is_never_printed_or_saved():
    reports, env_file = fresh("token")
    # -vvv: pyinfra prints every fact's output too (the probe's).
    result = pyinfra(reports, "-vvv", "@local", "--data", "target_sms=12.0", "--data",
                     f"service_env_file={env_file}", "--data", "service_env=HF_TOKEN=hf_secret123", "validate.py")
    report, summary = reports / "@local.json", reports / "summary.json"
    assert report.exists() and summary.exists(), result.output
    assert leaks(result.stdout, result.stderr, report.read_text(), summary.read_text()) == []
    saved = json.loads(report.read_text())
    # Keys stay, values go; the plan's own keys keep their values (the findings need them).
    # The probe reads only the plan's own keys' values: never service_env's.
    assert "HF_TOKEN" not in saved["facts"]["service_env"] and "CUDA_HOME" in saved["plan"]["env"]
    assert saved["settings"]["service_env"] == [["HF_TOKEN", "<redacted>"]]
    assert saved["plan"]["env"]["HF_TOKEN"] == "<redacted>"
    assert saved["plan"]["service"]["env"]["HF_TOKEN"] == "<redacted>"
    assert saved["plan"]["env"]["FLASHINFER_CUDA_ARCH_LIST"] == "12.0f"
    assert (mode(report), mode(summary), mode(reports)) == (0o600, 0o600, 0o700)
    # The operator's file itself is untouched by validate.
    assert env_file.read_text() == ENV_TEXT and mode(env_file) == 0o600


def test_an_invalid_service_env_is_named_without_its_values():
    reports, _ = fresh("invalid")
    result = pyinfra(reports, "@local", "--data", "service_env=HF_TOKEN=hf_secret123 1BAD=pw_secret789",
                     "validate.py")
    assert result.returncode == 1
    assert "@local: setting service_env='HF_TOKEN=<redacted> 1BAD=<redacted>' is invalid" in result.output
    summary = reports / "summary.json"
    assert leaks(result.stdout, result.stderr, summary.read_text()) == []
    assert "1BAD" in json.loads(summary.read_text())["hosts"][0]["reason"]
    assert not (reports / "@local.json").exists()


def test_a_url_password_is_never_printed_or_saved():
    reports, _ = fresh("url")
    result = pyinfra(reports, "-v", "@local", "--data", "target_sms=12.0", "--data",
                     "venv_index_url=https://alice:pw_secret789@mirror.example/simple", "validate.py")
    texts = [result.stdout, result.stderr] + [path.read_text() for path in reports.glob("*.json")]
    assert (reports / "summary.json").exists(), result.output
    assert leaks(*texts) == []


def test_a_service_env_value_no_quoting_holds_is_refused_by_key(tmp_path):
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({"service_env": {"NOTE": "it's C:\\dir\\hf_secret123"}}))
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(INCIDENT), "--config", str(config),
                             "--host", "n1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: n1: setting service_env={'NOTE': '<redacted>'} is invalid: "
                                    "NOTE's value holds a single quote"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and leaks(result.stderr) == []


def test_the_planner_cli_prints_no_token(tmp_path):
    facts = json.loads(INCIDENT.read_text())
    facts["service_env"] = {**(facts.get("service_env") or {}), "HF_TOKEN": "hf_filesecret456"}
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({"service_env": {"HF_TOKEN": "hf_secret123"}}))
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(tmp_path / "facts.json"), "--config",
                             str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    assert leaks(result.stdout, result.stderr) == []
    printed = json.loads(result.stdout)
    assert printed["env"]["HF_TOKEN"] == "<redacted>" and printed["env"]["CUDA_HOME"].startswith("/usr/local/cuda")
    overridden = next(f for f in printed["findings"] if f["code"] == "SERVICE_ENV_OVERRIDDEN")
    assert "HF_TOKEN=<redacted> (deploy sets <redacted>)" in overridden["message"]



def test_an_api_key_refused_in_service_args_is_not_printed_by_its_refusal(tmp_path):
    """The refusal of ``--api-key`` in service_args (a key on the command line every user
    reads) printed the key itself on stderr and saved it in reports/summary.json."""
    reports, _ = fresh("service-args-key")
    for value in ("--api-key pw_secret789 --tp 2", "--admin-api-key=pw_secret789"):
        result = pyinfra(reports, "@local", "--data", "target_sms=12.0", "--data", f"service_args={value}",
                         "validate.py")
        assert result.returncode == 1 and "@local: setting service_args='<redacted>' is invalid: an API key in " \
            "service_args" in result.stderr, result.output[-3000:]
        assert leaks(result.stdout, result.stderr, (reports / "summary.json").read_text()) == []
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({"service_args": ["--api-key", "pw_secret789"]}))
    result = subprocess.run([sys.executable, "-m", "bringup.plan", str(INCIDENT), "--config", str(config),
                             "--host", "n1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == "" and leaks(result.stderr) == [], result.stderr
    assert result.stderr.startswith("error: n1: setting service_args='<redacted>' is invalid"), result.stderr
