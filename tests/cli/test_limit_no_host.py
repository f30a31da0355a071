"""A batch of a rolling restart (docs/deploy.md, "Rolling restarts") whose ``--limit``
matches no host: pyinfra warns, runs nothing and exits 0, and the fleet summary says so
instead of an exit status pyinfra does not give. Through the real CLI on
inventory/gpu.py; the one host listed is never connected to (192.0.2.0/24 is TEST-NET-1)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def test_a_limit_that_matches_no_host_says_nothing_ran(tmp_path):
    hosts = tmp_path / "hosts.yml"
    hosts.write_text(yaml.safe_dump({"all": {}, "hosts": {"gpu-01": {
        "ssh_hostname": "192.0.2.1", "ssh_known_hosts_file": str(tmp_path / "known_hosts")}}}))
    reports = tmp_path / "reports"
    result = subprocess.run([PYINFRA, "-y", "inventory/gpu.py", "deploy.py", "--limit", "gpu-9*"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, GPU_BRINGUP_HOSTS=str(hosts), GPU_BRINGUP_REPORTS=str(reports)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No host matches found for --limit pattern: gpu-9*" in result.stdout + result.stderr
    assert "-- no host: no host was targeted, nothing ran (pyinfra exits 0)" in result.stderr, result.stderr
    assert json.loads((reports / "summary.json").read_text())["hosts"] == []
