"""The API key without a chicken-and-egg, through the real CLI on @local (an image
builder's target_sms, the real probe on this machine): ``service_api_key_source`` (a file
on the control machine) is checked by validate.py before anything changes, a node's key
file that is a link is refused by name, and deploy's upload lands whole, root:<group>
0640, a second run changing nothing. A distinctive key is planted in the source and
never appears in pyinfra's output at -vvv, in the reports or in the summary."""

import grp
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
SECRET = "sk-fleet-never-shown-7d41c2"
GROUP = "nogroup" if any(g.gr_name == "nogroup" for g in grp.getgrall()) else "root"


@pytest.fixture
def node_dir(tmp_path):
    """A node directory for the key file outside the trees the settings refuse (/tmp)."""
    path = Path("/var/cache") / f"gpu-bringup-test-{tmp_path.name}"
    path.mkdir(parents=True, exist_ok=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "api-key.yaml"
    path.write_text(f"api-key: {SECRET}\n")
    path.chmod(0o600)
    return path


def run(tmp_path, deploy_file, *data):
    args = [item for value in ("target_sms=12.0", *data) for item in ("--data", value)]
    env = {**os.environ, "GPU_BRINGUP_REPORTS": str(tmp_path / "reports"), "KEY_GROUP": GROUP}
    result = subprocess.run([PYINFRA, "-y", "-vvv", "@local", *args, deploy_file], check=False, cwd=ROOT,
                            capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    written = "".join(path.read_text() for path in (tmp_path / "reports").glob("**/*.json"))
    assert SECRET not in result.output and SECRET not in written, "the key was printed or saved"
    # Nor the key file's digest (the node's facts at -vvv): a weak key falls to a dictionary.
    digest = hashlib.sha1(f"api-key: {SECRET}\n".encode()).hexdigest()
    assert digest not in result.output and digest not in written, "the key file's digest was printed or saved"
    return result


def findings(tmp_path):
    report = json.loads((tmp_path / "reports" / "@local.json").read_text())
    return {f["code"]: f for f in report["plan"]["findings"] if f["code"].startswith("API_KEY_")}


def test_a_missing_source_is_a_blocker_before_anything_changes(tmp_path, node_dir):
    missing = tmp_path / "nowhere.yaml"
    result = run(tmp_path, "validate.py", f"service_api_key_source={missing}",
                 f"service_api_key_file={node_dir}/api-key.yaml")
    assert result.returncode == 1, result.output[-3000:]
    finding = findings(tmp_path)["API_KEY_FILE_UNUSABLE"]
    assert finding["severity"] == "blocker"
    assert finding["message"] == f"service_api_key_source={missing} does not exist on the control machine"
    assert "API_KEY_FILE_UNUSABLE" in result.stderr and str(missing) in result.stderr
    assert not (node_dir / "api-key.yaml").exists()


def test_a_link_at_the_nodes_key_file_is_a_blocker_naming_it(tmp_path, node_dir, source):
    (node_dir / "api-key.yaml").symlink_to(source)
    result = run(tmp_path, "validate.py", f"service_api_key_source={source}",
                 f"service_api_key_file={node_dir}/api-key.yaml")
    assert result.returncode == 1, result.output[-3000:]
    finding = findings(tmp_path)["API_KEY_FILE_UNUSABLE"]
    assert finding["message"] == f"service_api_key_file={node_dir}/api-key.yaml is a link (deploy never writes " \
        "through one)"
    assert f"rm {node_dir}/api-key.yaml" in finding["fix"]


def test_a_key_file_in_a_directory_another_user_writes_is_a_blocker(tmp_path, node_dir, source):
    """Review class "links and ownership": the directory's owner could swap root's stage
    file for a link between the upload and ``chown root:<group> && chmod 0640``."""
    import pwd
    nobody = pwd.getpwnam("nobody")
    os.chown(node_dir, nobody.pw_uid, nobody.pw_gid)
    result = run(tmp_path, "tests/fixtures/deploy/api_key_step.py", f"service_api_key_source={source}",
                 f"service_api_key_file={node_dir}/api-key.yaml")
    assert result.returncode == 1, result.output[-3000:]
    finding = findings(tmp_path)["API_KEY_FILE_UNUSABLE"]
    assert finding["message"].startswith(f"service_api_key_file={node_dir}/api-key.yaml is in {node_dir}, a directory")
    assert not list(node_dir.iterdir()), "nothing uploaded"


def test_a_key_file_in_a_directory_the_service_user_cannot_reach_is_a_blocker(tmp_path, node_dir, source):
    """Deploy's upload would succeed and SGLang, run as the service user, not read the key:
    validate said yes (only API_KEY_FILE_UPLOAD, a fix) for a 0700 directory of root's."""
    node_dir.chmod(0o700)
    result = run(tmp_path, "validate.py", f"service_api_key_source={source}",
                 f"service_api_key_file={node_dir}/api-key.yaml", "service_user=nobody")
    assert result.returncode == 1, result.output[-3000:]
    finding = findings(tmp_path)["API_KEY_FILE_UNUSABLE"]
    assert finding["message"] == (f"service_api_key_file={node_dir}/api-key.yaml is in {node_dir}, a directory the "
                                  "service user nobody cannot reach: SGLang could not read the key deploy uploads")
    assert f"let nobody traverse {node_dir}" in finding["fix"]
    assert not list(node_dir.iterdir()), "validate changes nothing"


def test_the_node_file_alone_is_checked_by_validate_not_first_at_the_service_step(tmp_path, node_dir):
    key = node_dir / "api-key.yaml"
    key.write_text(f"api-key: {SECRET}\n")
    key.chmod(0o644)
    result = run(tmp_path, "validate.py", f"service_api_key_file={key}")
    assert result.returncode == 1, result.output[-3000:]
    finding = findings(tmp_path)["API_KEY_FILE_UNUSABLE"]
    assert finding["message"].startswith(f"service_api_key_file={key} is owned root:root, not root:sglang")
    assert "set service_api_key_source" in finding["fix"]


def test_deploy_uploads_the_source_whole_root_group_0640_and_a_second_run_changes_nothing(tmp_path, node_dir,
                                                                                           source):
    dest = node_dir / "api-key.yaml"
    data = (f"service_api_key_source={source}", f"service_api_key_file={dest}")
    result = run(tmp_path, "validate.py", *data)
    assert result.returncode == 0, result.output[-3000:]
    assert findings(tmp_path)["API_KEY_FILE_UPLOAD"]["severity"] == "fix"
    assert not dest.exists(), "validate changes nothing"

    result = run(tmp_path, "tests/fixtures/deploy/api_key_step.py", *data)
    assert result.returncode == 0, result.output[-3000:]
    info = dest.lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o640
    assert (info.st_uid, grp.getgrgid(info.st_gid).gr_name) == (0, GROUP)
    assert dest.read_text() == source.read_text()
    assert [path.name for path in node_dir.iterdir()] == ["api-key.yaml"], "no stage file left"

    again = run(tmp_path, "tests/fixtures/deploy/api_key_step.py", *data)
    assert again.returncode == 0 and f"{dest} is up to date" in again.output, again.output[-3000:]
