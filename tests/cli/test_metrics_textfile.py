"""Readiness in a node_exporter textfile (``metrics_textfile_dir``), through the real CLI:
``pyinfra INVENTORY validate.py`` with ``@local`` (the real probe on this machine, an image
builder's target_sms) beside a host that cannot be reached (a local socket that closes
every connection). Each host's ``gpu_bringup_<host>.prom`` is read back with
prometheus_client's own text parser and compared with the run's summary and report."""

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bringup.summary import VERDICTS
from control.metrics import textfile_name
from tests.cli.test_host_keys import Listener

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
LOCAL, DOWN = "@local", "down-01"


def run(tmp_path, *data, purpose="validate.py", options=(), yes=True):
    listener = Listener()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    known_hosts.chmod(0o600)
    inventory = tmp_path / "inventory.py"
    inventory.write_text(
        f"hosts = [({LOCAL!r}, {{'target_sms': '12.0'}}), "
        f"({DOWN!r}, {{'ssh_hostname': '127.0.0.1', 'ssh_port': {listener.port}, 'ssh_user': 'nobody', "
        f"'ssh_known_hosts_file': {str(known_hosts)!r}, 'ssh_connect_retries': 0}})]\n")
    args = [item for value in data for item in ("--data", value)]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "GPU_BRINGUP_REPORTS": str(tmp_path / "reports")}
    try:
        result = subprocess.run([PYINFRA, *(["-y"] if yes else []), *options, *args, str(inventory), purpose], check=False, cwd=ROOT, 
                                capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    finally:
        listener.close()
    result.output = result.stdout + result.stderr
    return result


def samples(path):
    """{(metric, frozenset(labels)): value} of one textfile, read by prometheus_client."""
    found = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def series(found, name, **labels):
    return {dict(key).get("verdict", key): value for (metric, key), value in found.items()
            if metric == name and all(dict(key).get(k) == v for k, v in labels.items())}


def test_each_host_gets_its_textfile_with_verdict_findings_versions_and_time(tmp_path):
    textfiles = tmp_path / "textfile"
    started = time.time()
    result = run(tmp_path, f"metrics_textfile_dir={textfiles}")
    summary = json.loads((tmp_path / "reports" / "summary.json").read_text())
    rows = {row["host"]: row for row in summary["hosts"]}
    assert rows[DOWN]["verdict"] == "unreachable", result.output[-3000:]
    assert sorted(path.name for path in textfiles.iterdir()) == sorted([textfile_name(LOCAL), textfile_name(DOWN)])

    local = samples(textfiles / textfile_name(LOCAL))
    verdicts = series(local, "gpu_bringup_verdict", host=LOCAL, purpose="validate")
    assert set(verdicts) == set(VERDICTS)
    assert [name for name, value in verdicts.items() if value == 1] == [rows[LOCAL]["verdict"]]
    report = json.loads((tmp_path / "reports" / f"{LOCAL}.json").read_text())
    expected = {}
    for finding in report["plan"]["findings"]:
        key = (finding["severity"], finding["code"])
        expected[key] = expected.get(key, 0) + 1
    codes = {(dict(key)["severity"], dict(key)["code"]): value for (metric, key), value in local.items()
             if metric == "gpu_bringup_findings"}
    assert codes == expected and expected
    by_severity = {dict(key)["severity"]: value for (metric, key), value in local.items()
                   if metric == "gpu_bringup_findings_by_severity"}
    assert by_severity == {severity: sum(n for (s, _), n in expected.items() if s == severity)
                           for severity in ("blocker", "fix", "warning", "info")}
    found = {dict(key)["source"]: dict(key) for (metric, key), value in local.items()
             if metric == "gpu_bringup_stack_info" and value == 1}
    facts = report["facts"]
    assert found["found"]["torch"] == ((facts.get("torch") or {}).get("version") or "")
    assert found["found"]["driver"] == ((facts.get("driver") or {}).get("version") or "")
    assert found["planned"]["sglang"] == report["settings"]["stack_sglang"]
    assert found["planned"]["cuda"] == report["plan"]["toolkit"]["version"]
    when = series(local, "gpu_bringup_last_run_timestamp_seconds", host=LOCAL)
    assert len(when) == 1 and started <= next(iter(when.values())) <= time.time()

    down = samples(textfiles / textfile_name(DOWN))
    assert [name for name, value in series(down, "gpu_bringup_verdict", host=DOWN).items() if value == 1] == \
        ["unreachable"]
    assert not [key for key in down if key[0] == "gpu_bringup_stack_info"], "a host never probed has no versions"
    assert series(down, "gpu_bringup_good", host=DOWN) and set(series(down, "gpu_bringup_good").values()) == {0}

    for path in textfiles.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_dry_run_leaves_the_last_verdict(tmp_path):
    textfiles = tmp_path / "textfile"
    run(tmp_path, f"metrics_textfile_dir={textfiles}")
    before = {path.name: path.read_text() for path in textfiles.iterdir()}
    dry = run(tmp_path, f"metrics_textfile_dir={textfiles}", purpose="deploy.py", options=("--dry",))
    assert "dry run" in dry.stderr, dry.output[-3000:]
    assert {path.name: path.read_text() for path in textfiles.iterdir()} == before


def test_validate_with_json_and_without_y_writes_its_textfiles(tmp_path):
    """The way CI runs validate (``--json``, no ``-y``, no terminal): validate changes nothing,
    so its verdicts are real and its textfiles are written (pyinfra counts a deploy run like
    it as a dry run; validate is not one)."""
    textfiles = tmp_path / "textfile"
    result = run(tmp_path, f"metrics_textfile_dir={textfiles}", options=("--json",), yes=False)
    assert result.returncode == 1, result.output[-3000:]
    json.loads(result.stdout)
    assert sorted(path.name for path in textfiles.iterdir()) == ["gpu_bringup__local.prom", "gpu_bringup_down-01.prom"]
    assert series(samples(textfiles / "gpu_bringup_down-01.prom"), "gpu_bringup_verdict") == {"unreachable": 1.0} | {
        verdict: 0.0 for verdict in series(samples(textfiles / "gpu_bringup_down-01.prom"), "gpu_bringup_verdict")
        if verdict != "unreachable"}


def test_without_the_setting_no_textfile_and_an_unwritable_directory_is_one_line(tmp_path):
    result = run(tmp_path)
    assert "gpu_bringup_" not in result.output
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file")
    result = run(tmp_path, f"metrics_textfile_dir={blocked}")
    assert "control/metrics.py" not in result.output, result.output[-3000:]
    lines = [line for line in result.stderr.splitlines() if "metrics_textfile_dir=" in line]
    assert len(lines) == 2 and all("could not be written" in line for line in lines), result.stderr[-2000:]
    assert json.loads((tmp_path / "reports" / "summary.json").read_text())["counts"], "the summary is still written"
