"""rollback.py through the real CLI on @local (issue 33, finding 6): it judges the release
it would restore, not the settings of the change. A host whose settings have blockers
(NO_GPU on this GPU-less machine, MODEL_UNAVAILABLE of a model behind a hub that refuses
the connection, tests/hub_double.py) is not refused for them: the release recorded on
the node is looked at (files/release.sh, run here for real on a venv root of root's under
/var/lib), and only the blockers about the paths the rollback writes (UNSAFE_PATH) refuse
it. This machine has no systemd, so a release that can be restored ends at "the service
is not enabled"; the restore itself over SSH is tests/sandbox/test_rollback.py's."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.hub_double import closed_endpoint

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
RELEASE = ROOT / "files" / "release.sh"
REPORTS = ROOT / "reports" / "cli-rollback"
MODEL = "Qwen/Qwen3-0.6B"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the release records are root's (release.sh chowns them)")


@pytest.fixture
def node():
    """A venv root of root's (0755 all the way up: no UNSAFE_PATH) with a recorded release
    a and, live, release b: what a rollback goes back from."""
    top = Path(tempfile.mkdtemp(prefix="cli-rollback-", dir="/var/lib"))
    top.chmod(0o755)
    root, etc = top / "opt", top / "sglang"
    (root / "venvs").mkdir(parents=True)
    etc.mkdir()
    paths = {"RELEASES": str(root / "releases"), "VENV": str(root / "venv"), "VENVS": str(root / "venvs"),
             "UNIT": str(etc / "sglang.service"), "ENV_FILE": str(etc / "sglang.env")}

    def release(action):
        done = subprocess.run(["sh", str(RELEASE), action], env={**os.environ, **paths}, capture_output=True,
                              text=True, timeout=30, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    for name, knob in (("a" * 16, "1"), ("b" * 16, "2")):
        venv = root / "venvs" / name
        (venv / "bin").mkdir(parents=True)
        # The probe runs it (a venv without torch): the system's python3.
        (venv / "bin" / "python").symlink_to("/usr/bin/python3")
        (venv / ".complete").write_text(name + "\n")
        if (root / "venv").is_symlink():
            (root / "venv").unlink()
        (root / "venv").symlink_to(f"venvs/{name}")
        (etc / "sglang.service").write_text(f"unit {knob}\n")
        (etc / "sglang.env").write_text(f"KNOB={knob}\n")
        (etc / "sglang.env").chmod(0o640)
        release("seed" if knob == "1" else "promote")
        if knob == "2":
            release("record")
    yield {"top": top, "root": root, "etc": etc}
    shutil.rmtree(top)


def rollback(node, *data):
    settings = (f"venv_path={node['root'] / 'venv'}", f"service_env_file={node['etc'] / 'sglang.env'}",
                f"service_model={MODEL}", f"service_env=HF_ENDPOINT={closed_endpoint()}", *data)
    args = [item for setting in settings for item in ("--data", setting)]
    result = subprocess.run([PYINFRA, "-y", "@local", *args, "rollback.py"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, GPU_BRINGUP_REPORTS=str(REPORTS)),
                            stdin=subprocess.DEVNULL, check=False)
    result.output = result.stdout + result.stderr
    assert (REPORTS / "@local.json").exists(), result.output
    report = json.loads((REPORTS / "@local.json").read_text())
    result.blockers = [f["code"] for f in report["plan"]["findings"] if f["severity"] == "blocker"]
    [result.row] = json.loads((REPORTS / "summary.json").read_text())["hosts"]
    return result


def test_the_blockers_of_the_change_do_not_refuse_the_rollback(node):
    result = rollback(node)
    # The settings are blocked (no GPU here) ...
    assert {"NO_GPU", "MODEL_UNAVAILABLE"} <= set(result.blockers), result.output
    # ... and the rollback is judged on the release it restores: there, complete; only this
    # machine's missing systemd stops it.
    assert "blocker(s)" not in result.output, result.output
    assert "@local: rollback refused, nothing changed: the service is not enabled; fix: " in result.output, \
        result.output
    assert result.row["verdict"] == "failed" and result.row["reason"] == "rollback refused: the service is not enabled"


def test_the_release_it_would_restore_is_what_it_judges(node):
    shutil.rmtree(node["root"] / "venvs" / ("a" * 16))
    result = rollback(node)
    assert "NO_GPU" in result.blockers and "blocker(s)" not in result.output, result.output
    assert (f"@local: rollback refused, nothing changed: its venv {node['root'] / 'venvs' / ('a' * 16)} is missing; "
            "fix: deploy the release you want with deploy.py") in result.output, result.output
    # Nothing changed: the live link is b's.
    assert os.readlink(node["root"] / "venv") == "venvs/" + "b" * 16


def test_a_path_another_user_can_change_still_refuses_it(node):
    node["top"].chmod(0o777)
    result = rollback(node)
    assert "rollback refused, nothing changed: 2 blocker(s): UNSAFE_PATH, UNSAFE_PATH" in result.output, result.output
    # NO_GPU and MODEL_UNAVAILABLE are no reason of the refusal.
    assert "blocker(s): NO_GPU" not in result.output
    assert result.row["verdict"] == "blocked" and result.row["reason"] == "UNSAFE_PATH, UNSAFE_PATH", result.row
