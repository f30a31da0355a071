"""The bad-input table (tests/bad_input.py), every row in-process: each row through the
function its CLI calls at its boundary, so the line checked here is the line that CLI
prints, made by the same code. Each row: refused (an in-process row whose value were
accepted fails), one line naming the host (or the file), the setting or field, the value
and the fix, bounded, no traceback text, and nothing printed where the plan would be.

- ``pyinfra @local --data KEY=VALUE validate.py`` (and deploy.py): pyinfra's own
  ``parse_cli_arg`` makes the value of each ``--data`` (tests/bad_input.py
  ``data_value``), then ``Config.from_data(data, host=...)``, the call
  control/host_plan.py's ``load_config`` makes with the host's data; its ConfigError is
  the line load_config prints and refuses the host with.
- ``python -m bringup.plan``: ``bringup.plan.cli.main(argv)``, the CLI itself without a
  new interpreter (its exit status, stderr and stdout).
- ``pyinfra inventory/gpu.py``: ``inventory.sources.load_hosts``, which inventory/gpu.py
  calls as pyinfra imports it; its InventoryError (a SystemExit) is the line and the exit.

What only a real run shows (the exit status through pyinfra, the line on the terminal, no
report written, the other hosts planned and summarised, nothing of a password in the
output or the summary at ``-vv``) is tests/cli/test_bad_input.py's, on a few rows.
"""

import pytest

from bringup.config import Config, ConfigError
from bringup.plan.cli import EXIT_BAD_INPUT, main
from inventory.sources import InventoryError, load_hosts
from tests.bad_input import (ENV_USERINFO, HOSTS_FILES, INCIDENT, LONGEST_LINE, MISSING_FACTS, PLAN_CONFIG,
                             PLAN_FACTS, PYINFRA_DATA, ROOT, USERINFO, data_value, rows)

# What the CLI cases give every run (tests/cli/test_bad_input.py): a GPU-less machine
# plans with target_sms set; the bad value is the only problem.
COMMAND_LINE = ("target_sms=12.0",)


def assert_one_line(text, *fragments):
    """``text`` is one bounded line holding every fragment, no traceback in it."""
    assert "Traceback" not in text, text
    lines = text.splitlines()
    assert len(lines) == 1, text
    missing = [fragment for fragment in fragments if fragment not in lines[0]]
    assert not missing, f"{missing} not in {lines[0]!r}"
    assert len(lines[0]) < LONGEST_LINE, lines[0][:300]


def data_refusal(*assignments, host="@local"):
    """The line refusing ``host`` whose ``--data`` are ``assignments`` (KEY=VALUE), as
    pyinfra parses them, through Config.from_data; fails when the settings pass."""
    data = {}
    for assignment in (*COMMAND_LINE, *assignments):
        key, value = assignment.split("=", 1)
        data[key] = data_value(value)
    with pytest.raises(ConfigError) as raised:
        Config.from_data(data, host=host)
    return str(raised.value)


@pytest.mark.parametrize("key,value,fix", PYINFRA_DATA, ids=[f"{k}={v!r}" for k, v, _ in PYINFRA_DATA])
def test_a_bad_data_setting_is_one_line_naming_host_setting_value_and_fix(key, value, fix):
    line = data_refusal(f"{key}={value}")
    # The value as pyinfra gives it, shown as Python writes it (control characters
    # escaped); service_env's values are never shown, only their variables.
    shown = f"'{value.split('=', 1)[0]}=<redacted>'" if key == "service_env" else repr(data_value(value))
    assert_one_line(line, f"@local: setting {key}={shown} is invalid: ", fix)


@pytest.mark.parametrize("key,value", USERINFO, ids=[f"{k}={v}" for k, v in USERINFO])
def test_a_url_with_a_password_is_refused_and_the_password_never_shown(key, value):
    """The line is also what the fleet summary records (control/host_plan.py load_config)."""
    line = data_refusal(f"{key}={value}")
    assert_one_line(line, f"@local: setting {key}='https://***@", "remove the user and password", "auth.conf")
    assert "Hunter2pw" not in line and "bob" not in line, line


@pytest.mark.parametrize("assignment", ENV_USERINFO)
def test_a_password_in_a_service_env_url_is_refused_and_never_shown(assignment):
    key = assignment.split("=", 1)[0]
    line = data_refusal(f"service_env={assignment}")
    assert_one_line(line, f"@local: setting service_env='{key}=<redacted>'", "remove the user and password",
                    "service_env_file")
    assert "Hunter2pw" not in line and "bob" not in line, line


@pytest.fixture
def plan_cli(monkeypatch, capsys):
    """``python -m bringup.plan ARGS`` in this process, from the repository root (where
    the CLI reads files/locks/): (exit status, stdout, stderr)."""
    monkeypatch.chdir(ROOT)

    def run(*argv):
        status = main([str(arg) for arg in argv])
        out, err = capsys.readouterr()
        return status, out, err
    return run


def assert_refused_by_the_plan_cli(status, out, err, *fragments):
    """Exit 2 (bad input), one line naming the host and the problem, no plan printed."""
    assert status == EXIT_BAD_INPUT, (status, err)
    assert out == "", "a refused input prints no plan"
    assert_one_line(err, "error: gpu-7", *fragments)


@pytest.mark.parametrize("content,message", PLAN_CONFIG, ids=[c.strip()[:40] for c, _ in PLAN_CONFIG])
def test_plan_cli_refuses_a_bad_settings_file(tmp_path, plan_cli, content, message):
    config = tmp_path / "settings.yaml"
    config.write_text(content)
    status, out, err = plan_cli("--json", INCIDENT, "--config", config, "--host", "gpu-7")
    assert_refused_by_the_plan_cli(status, out, err, message)
    # A setting's line names the setting (a key of the file); the file's own problems
    # (not YAML, not a mapping, an alias bomb) name the file.
    named = err.split("setting ", 1)[1].split("=", 1)[0] if ": setting " in err else None
    assert (named in content) if named else (str(config) in err), err


@pytest.mark.parametrize("content,message", PLAN_FACTS, ids=[c[:40] for c, _ in PLAN_FACTS])
def test_plan_cli_refuses_a_bad_facts_document(tmp_path, plan_cli, content, message):
    facts = tmp_path / "facts.json"
    facts.write_text(content)
    status, out, err = plan_cli("--json", facts, "--host", "gpu-7")
    assert_refused_by_the_plan_cli(status, out, err, str(facts), message)


def test_plan_cli_names_a_missing_facts_file(plan_cli):
    status, out, err = plan_cli("--json", MISSING_FACTS, "--host", "gpu-7")
    assert_refused_by_the_plan_cli(status, out, err, "No such file or directory", MISSING_FACTS)


@pytest.mark.parametrize("content,message", HOSTS_FILES, ids=[c.strip()[:40] for c, _ in HOSTS_FILES])
def test_a_bad_host_list_is_refused_in_one_line_as_the_inventory_loads(tmp_path, content, message):
    """inventory/gpu.py's load_hosts raises InventoryError, a SystemExit carrying the
    line: Python prints it and exits 1 before pyinfra connects to any host."""
    hosts, registered = tmp_path / "hosts.yml", tmp_path / "hosts.d"
    hosts.write_text(content)
    registered.mkdir()
    with pytest.raises(InventoryError) as raised:
        load_hosts(hosts, registered)
    assert raised.value.code == str(raised.value), "SystemExit's code is the message: exit status 1"
    assert_one_line(str(raised.value), f"{hosts}: ", message)


def test_the_table_is_big_enough():
    assert rows() >= 110
