"""The sandbox's servers started from several processes at once (pytest's two workers
both ask for the wheel mirror when a run begins): one server, every caller told its
address, none left failing."""

import json
import os
import subprocess
import sys

import pytest

from tests.sandbox_fixtures import REPO_ROOT

pytestmark = pytest.mark.sandbox

# The cache is the machine's, already built or not: only the start is under test.
SERVE = """
from sandbox import pypimirror
pypimirror.build = lambda: None
print(pypimirror.serve()["pid"], flush=True)
"""


def test_the_wheel_mirror_started_by_three_processes_at_once_is_one_server(tmp_path):
    env = {**os.environ, "SANDBOX_STATE_DIR": str(tmp_path)}
    callers = [subprocess.Popen([sys.executable, "-c", SERVE], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(3)]
    answers = [caller.communicate(timeout=60) for caller in callers]
    try:
        assert [caller.returncode for caller in callers] == [0, 0, 0], answers
        pids = {out.strip() for out, _ in answers}
        state = json.loads((tmp_path / "pypimirror.json").read_text())
        assert pids == {str(state["pid"])}, answers
    finally:
        subprocess.run([sys.executable, "-m", "sandbox.pypimirror", "stop"], cwd=REPO_ROOT, env=env, check=True)
    assert not (tmp_path / "pypimirror.json").exists()
