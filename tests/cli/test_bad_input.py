"""Bad input through the real CLIs: a few rows of the bad-input table (tests/bad_input.py)
per entry point and per way a value reaches it. Every row of the table is checked in-process
by tests/unit/test_bad_input.py, through the function each CLI calls at its boundary; the
cases here prove the wiring around that function: the exit status (non-zero; 2 for the
plan CLI), the one line on the terminal naming the host, the setting (or field or file),
the value and the fix, every line bounded, never a traceback, and nothing written (no
report, no plan, no operation but the refusal), and in the two-host runs the other host
planned and summarised.

The rows chosen, one per way in:
- ``pyinfra @local --data`` with validate.py: a plain string, a value holding a newline
  (one line on the terminal still), a value pyinfra turns into an int (the in-process rows
  parse ``--data`` as pyinfra does: this shows they see what the CLI sees); a URL with a
  password and a ``service_env`` URL with one at ``-vv`` (in no output, report or summary);
- ``pyinfra @local --data`` with deploy.py: refused before any step, nothing changed;
- ``pyinfra inventory/gpu.py``: a host list turning host key checking off, and an alias
  bomb refused while it loads;
- ``python -m bringup.plan``: a settings file with an unknown setting (the longest line),
  an alias bomb, a facts document of the wrong shape, a facts file that is not there;
- two hosts from an inventory file (host data, not ``--data``): one host's bad input
  fails that host alone, the other is planned and summarised.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bad_input import (ALIAS_BOMB, ENV_USERINFO, HOSTS_FILES, INCIDENT, LONGEST_LINE, MISSING_FACTS,
                             PLAN_CONFIG, PLAN_FACTS, PYINFRA_DATA, ROOT, USERINFO, data_value)
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def row(table, first, *rest):
    """The table's one row whose first item is ``first`` (or holds it, for a string) and
    whose next items include ``rest``: each CLI case is a row of the table."""
    def fits(entry):
        entry = entry if isinstance(entry, tuple) else (entry,)
        return first in entry[0] and all(item in entry[1:] for item in rest)
    found = [entry for entry in table if fits(entry)]
    assert len(found) == 1, (first, rest, found)
    return found[0]


def run(command, env=None):
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=env, stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result


def assert_clean_error(result, *fragments):
    assert result.returncode != 0, result.output[-3000:]
    assert "Traceback" not in result.output, result.output[-3000:]
    lines = [line for line in result.output.splitlines() if all(fragment in line for fragment in fragments)]
    assert lines, f"no line with {fragments}:\n{result.output[-3000:]}"
    assert max(len(line) for line in result.output.splitlines()) < LONGEST_LINE, \
        max(result.output.splitlines(), key=len)


def pyinfra_local(tmp_path, *assignments, deploy_file="validate.py", verbosity=()):
    """``pyinfra -y @local --data ... DEPLOY_FILE`` (target_sms set: this machine has no
    GPU) with its own reports directory: (result, reports directory)."""
    reports = tmp_path / "reports"
    data = [argument for assignment in ("target_sms=12.0", *assignments) for argument in ("--data", assignment)]
    result = run([PYINFRA, "-y", *verbosity, "@local", *data, deploy_file],
                 env={**os.environ, "GPU_BRINGUP_REPORTS": str(reports)})
    return result, reports


def written(reports):
    """Every file the run left in its reports directory, by name: text."""
    return {path.name: path.read_text() for path in reports.rglob("*") if path.is_file()} if reports.exists() else {}


@pytest.mark.parametrize("key,value,fix", [
    row(PYINFRA_DATA, "stack_torch_cuda"),  # a plain string
    row(PYINFRA_DATA, "cuda_repo_distro"),  # a newline inside the argument: still one line
    row(PYINFRA_DATA, "service_port"),  # pyinfra makes 70000 an int: shown as one
    row(PYINFRA_DATA, "gpu_diag"),  # a level dcgmi has, but not one validate runs
], ids=["plain string", "newline", "made an int", "gpu_diag level"])
def test_validate_refuses_a_bad_data_setting_in_one_line_and_writes_no_report(tmp_path, key, value, fix):
    result, reports = pyinfra_local(tmp_path, f"{key}={value}")
    assert_clean_error(result, f"@local: setting {key}={data_value(value)!r} is invalid", fix)
    assert result.returncode == 1
    assert "@local.json" not in written(reports), "a refused host must leave no report"
    host = json.loads(written(reports)["summary.json"])["hosts"][0]
    assert (host["host"], host["verdict"]) == ("@local", "failed") and key in host["reason"], host


@pytest.mark.parametrize("assignment", [
    "{}={}".format(*row(USERINFO, "cuda_repo_url", "https://bob:Hunter2pw/x@mirror/cuda")),
    "service_env=" + row(ENV_USERINFO, "MIRROR=http://bob:Hunter2pw?x@hub.mirror/path"),
], ids=["url setting", "service_env"])
def test_a_password_at_vv_is_refused_and_in_no_output_report_or_summary(tmp_path, assignment):
    key = assignment.split("=", 1)[0]
    result, reports = pyinfra_local(tmp_path, assignment, verbosity=("-vv",))
    assert_clean_error(result, f"@local: setting {key}=", "remove the user and password")
    assert "Hunter2pw" not in result.output and "bob" not in result.output, result.output[-3000:]
    assert "@local.json" not in written(reports), "a refused host must leave no report"
    assert "summary.json" in written(reports)
    assert "Hunter2pw" not in "".join(written(reports).values())


def test_deploy_refuses_a_bad_setting_before_any_step(tmp_path):
    key, value, fix = row(PYINFRA_DATA, "service_user", "root")
    result, reports = pyinfra_local(tmp_path, f"{key}={value}", deploy_file="deploy.py")
    assert_clean_error(result, f"@local: setting {key}='{value}' is invalid", fix)
    assert result.returncode == 1
    # The refusal is the only operation, and it runs no command on the host.
    started = [line for line in result.output.splitlines() if "Starting operation:" in line]
    assert len(started) == 1 and "Refuse @local" in started[0], started
    assert "executed 0 commands" in result.output
    assert "@local.json" not in written(reports), "a refused host must leave no report"
    host = json.loads(written(reports)["summary.json"])["hosts"][0]
    assert (host["verdict"], host["changed"]) == ("failed", "-"), host


@pytest.mark.parametrize("content,message", [
    row(HOSTS_FILES, "hosts:\n  gpu-node-01:\n    ssh_strict_host_key_checking: 'no'\n"),
    row(HOSTS_FILES, ALIAS_BOMB.splitlines()[0]),
], ids=["host keys off", "alias bomb"])
def test_inventory_refuses_a_bad_host_list_before_connecting(tmp_path, content, message):
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(content)
    reports = tmp_path / "reports"
    result = run([PYINFRA, "-y", "inventory/gpu.py", "validate.py"],
                 env={**os.environ, "GPU_BRINGUP_HOSTS": str(hosts), "GPU_BRINGUP_REPORTS": str(reports)})
    assert_clean_error(result, str(hosts), message)
    assert "Connecting to hosts" not in result.output, result.output[-3000:]
    assert written(reports) == {}, "nothing is written before the inventory loads"


def plan_cli(*argv):
    return run([sys.executable, "-m", "bringup.plan", *map(str, argv)])


@pytest.mark.parametrize("content,message", [
    row(PLAN_CONFIG, 'stack_torch_cudaa: "13.0"\n'),  # the longest line: every setting named
    row(PLAN_CONFIG, ALIAS_BOMB),  # refused while it loads, in bounded memory
], ids=["unknown setting", "alias bomb"])
def test_plan_cli_refuses_a_bad_settings_file(tmp_path, content, message):
    config = tmp_path / "settings.yaml"
    config.write_text(content)
    result = plan_cli("--json", INCIDENT, "--config", config, "--host", "gpu-7")
    assert_clean_error(result, "error: gpu-7", message)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_plan_cli_refuses_a_bad_facts_document(tmp_path):
    content, message = row(PLAN_FACTS, '["not", "an", "object"]')
    facts = tmp_path / "facts.json"
    facts.write_text(content)
    result = plan_cli("--json", facts, "--host", "gpu-7")
    assert_clean_error(result, "error: gpu-7", str(facts), message)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_plan_cli_names_a_missing_facts_file():
    result = plan_cli("--json", MISSING_FACTS, "--host", "gpu-7")
    assert_clean_error(result, "error: gpu-7", "No such file or directory", MISSING_FACTS)
    assert result.returncode == 2 and result.stdout == ""


# Two hosts in one pyinfra run without SSH: @local, and @chroot// (pyinfra's chroot
# connector on "/", the same machine: pyinfra allows a single @local). Each host's own
# data comes from an inventory file, so one host's bad input is that host's alone.
GOOD_HOST = "@local"
SECOND_HOST = "@chroot//"


def run_two_hosts(tmp_path, second_data):
    inventory = tmp_path / "two_hosts.py"
    inventory.write_text(f"hosts = [({GOOD_HOST!r}, {{'target_sms': '12.0'}}), "
                         f"({SECOND_HOST!r}, {{'target_sms': '12.0', **{second_data!r}}})]\n")
    reports = tmp_path / "reports"
    result = run([PYINFRA, "-y", str(inventory), "validate.py"],
                 env={**os.environ, "GPU_BRINGUP_REPORTS": str(reports)})
    summary = json.loads((reports / "summary.json").read_text()) if (reports / "summary.json").exists() else None
    return result, reports, summary


def test_one_hosts_bad_url_fails_that_host_alone_and_the_other_is_summarised(tmp_path):
    """http://[::1/x made urlsplit raise: a traceback ended the run, no host planned, no summary."""
    result, reports, summary = run_two_hosts(tmp_path, {"cuda_repo_url": "http://[::1/x"})
    assert_clean_error(result, f"{SECOND_HOST}: setting cuda_repo_url='http://[::1/x' is invalid", "Invalid IPv6 URL")
    assert summary is not None, result.output[-3000:]
    rows = {row["host"]: row for row in summary["hosts"]}
    assert rows[SECOND_HOST]["verdict"] == "failed", rows
    assert rows[GOOD_HOST]["verdict"] in ("ready", "needs deploy"), rows
    assert "== fleet summary: validate.py, 2 host(s)" in result.stderr
    assert (reports / f"{GOOD_HOST}.json").exists(), "the good host is planned and reported"
    assert json.loads((reports / f"{GOOD_HOST}.json").read_text())["plan"]["arch_list"] == "12.0f"


def test_a_manifest_of_another_shape_is_a_cold_cache_and_the_other_host_carries_on(tmp_path):
    """A manifest the service user wrote whose modules' requests are not names: TypeError
    in bringup/prewarm.py ended the run. Now: that host's cache is cold (the pre-warm
    rewrites the manifest), both hosts planned and summarised."""
    # A cache directory outside /tmp (the settings refuse shared trees) wherever the checkout
    # is, read by the real probe; removed at the end. (The chroot connector needs root too.)
    cache = Path("/var/cache") / f"gpu-bringup-test-{tmp_path.name}"
    (cache / "prewarm").mkdir(parents=True, exist_ok=True)
    try:
        (cache / "prewarm" / "manifest.json").write_text(json.dumps({
            "flashinfer": "0.7.2", "arch_list": "12.0f", "toolchain": None,
            "request": {"modules": ["norm"], "head_dims": [128], "dtypes": ["bf16"]},
            "modules": [{"kind": "sglang", "request": 5, "library": "/nonexistent"}]}))
        result, reports, summary = run_two_hosts(tmp_path, {"service_cache_dir": str(cache),
                                                            "prewarm_modules": "norm"})
        assert "Traceback" not in result.output, result.output[-3000:]
        assert summary is not None, result.output[-3000:]
        assert {row["host"] for row in summary["hosts"]} == {GOOD_HOST, SECOND_HOST}
        second = json.loads((reports / "@chroot" / ".json").read_text()
                            if (reports / "@chroot" / ".json").exists() else (reports / f"{SECOND_HOST}.json").read_text())
        cold = [f for f in second["plan"]["findings"] if f["code"] == "JIT_CACHE_COLD"]
        assert cold and "not as files/prewarm.py writes it" in cold[0]["message"], second["plan"]["findings"]
        assert json.loads((reports / f"{GOOD_HOST}.json").read_text())["plan"]["arch_list"] == "12.0f"
        # validate changed nothing: the manifest is as planted.
        assert json.loads((cache / "prewarm" / "manifest.json").read_text())["modules"][0]["request"] == 5
    finally:
        import shutil
        shutil.rmtree(cache, ignore_errors=True)


@pytest.mark.parametrize("second_data,key", [
    ({"service_model": "--help"}, "service_model"),
    ({"service_env": {"HF_ENDPOINT": "https://bob:Hunter2pw/x@hub.mirror"}}, "service_env"),
])
def test_a_model_option_or_an_env_password_fails_that_host_alone_and_the_other_is_summarised(tmp_path, second_data,
                                                                                             key):
    """The new classes of issue 33 (a model id that reads as an option, credentials in an
    env value): one line for that host naming the setting and the fix, no report for it,
    nothing of the password anywhere; the other host planned and summarised."""
    result, reports, summary = run_two_hosts(tmp_path, second_data)
    assert_clean_error(result, f"{SECOND_HOST}: setting {key}", "is invalid")
    assert "Hunter2pw" not in result.output and "bob" not in result.output
    assert summary is not None, result.output[-3000:]
    rows = {row["host"]: row for row in summary["hosts"]}
    assert rows[SECOND_HOST]["verdict"] == "failed", rows
    assert rows[GOOD_HOST]["verdict"] in ("ready", "needs deploy"), rows
    assert not (reports / f"{SECOND_HOST}.json").exists()
    assert (reports / f"{GOOD_HOST}.json").exists(), "the good host is planned and reported"
    assert "Hunter2pw" not in "".join(path.read_text() for path in reports.rglob("*") if path.is_file())
