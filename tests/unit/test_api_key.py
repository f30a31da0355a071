"""The API key file's decision table (bringup/api_key.py): the control machine's source
and the node's file, each way wrong, give API_KEY_FILE_UNUSABLE naming the file and the
fix; a good source the node lacks is API_KEY_FILE_UPLOAD; the old way
(service_api_key_file alone) keeps its rules. The key's value is never in a finding."""

import grp
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.api_key import api_key_findings
from control.api_key import source_state
from facts.files import KeyFileAccess

DEST, USER, SECRET = "/etc/sglang/api-key.yaml", "sglang", "sk-never-shown-4242"
GOOD_SOURCE = {"kind": "file", "readable": True, "size": 30, "has_key": True, "mode": 0o600, "sha1": "a" * 40}
NODE_GOOD = {"kind": "file", "user": "root", "group": USER, "mode": "640", "sha1": "a" * 40, "readable": True}
ABSENT = {"kind": None, "readable": None}

# (name, source, source state, node file, account step runs, expected [(code, severity, words in message)])
CASES = [
    ("source uploaded to a fresh node", "k.yaml", GOOD_SOURCE, ABSENT, True,
     [("API_KEY_FILE_UPLOAD", "fix", "not yet the key")]),
    ("source already on the node", "k.yaml", GOOD_SOURCE, NODE_GOOD, True, []),
    ("source differs from the node's", "k.yaml", GOOD_SOURCE, {**NODE_GOOD, "sha1": "b" * 40}, True,
     [("API_KEY_FILE_UPLOAD", "fix", "not yet the key")]),
    ("node's file of the wrong mode, source set", "k.yaml", GOOD_SOURCE, {**NODE_GOOD, "mode": "644"}, True,
     [("API_KEY_FILE_UPLOAD", "fix", "not yet the key")]),
    ("source missing", "k.yaml", {"kind": None}, ABSENT, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "service_api_key_source=k.yaml does not exist on the control machine")]),
    ("source unreadable", "k.yaml", {"kind": "file", "readable": False}, ABSENT, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "cannot be read by the user running pyinfra")]),
    ("source a directory", "k.yaml", {"kind": "directory"}, ABSENT, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "is a directory on the control machine")]),
    ("source without a key line", "k.yaml", {**GOOD_SOURCE, "has_key": False}, ABSENT, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "holds no `api-key: <key>` line")]),
    ("node's file a link, source set", "k.yaml", GOOD_SOURCE, {"kind": "link"}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", f"service_api_key_file={DEST} is a link")]),
    ("source set, the node's file in a directory another user writes", "k.yaml", GOOD_SOURCE,
     {**ABSENT, "writable_dir": "/var/cache/sglang"}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "is in /var/cache/sglang, a directory a user other than root may write")]),
    ("source set, the node's key directory closed to the service user", "k.yaml", GOOD_SOURCE,
     {**ABSENT, "closed_dir": "/srv/keys"}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", f"is in /srv/keys, a directory the service user {USER} cannot reach")]),
    ("source already on the node, its directory closed to the service user", "k.yaml", GOOD_SOURCE,
     {**NODE_GOOD, "readable": False, "closed_dir": "/srv/keys"}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "cannot reach")]),
    ("no account and no account step", "k.yaml", GOOD_SOURCE, ABSENT, False,
     [("API_KEY_FILE_UNUSABLE", "blocker", "leaves out the account step")]),
    ("node's file alone, good", "", None, NODE_GOOD, True, []),
    ("node's file alone, missing", "", None, ABSENT, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", f"service_api_key_file={DEST} does not exist")]),
    ("node's file alone, a link", "", None, {"kind": "link"}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "is a link")]),
    ("node's file alone, wrong owner", "", None, {**NODE_GOOD, "group": "root"}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "is owned root:root, not root:sglang")]),
    ("node's file alone, readable by others", "", None, {**NODE_GOOD, "mode": "644"}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "other users can read the key")]),
    ("node's file alone, group writes", "", None, {**NODE_GOOD, "mode": "660"}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "only root write it")]),
    ("node's file alone, a closed directory above", "", None, {**NODE_GOOD, "readable": False}, True,
     [("API_KEY_FILE_UNUSABLE", "blocker", "cannot be read by the service user")]),
]


@pytest.mark.parametrize(("name", "source", "state", "found", "account", "expected"), CASES,
                         ids=[case[0] for case in CASES])
def test_key_file_decision(name, source, state, found, account, expected):
    findings = api_key_findings(source, state, DEST, found, USER, account)
    assert [(f.code, f.severity) for f in findings] == [(code, severity) for code, severity, _ in expected]
    for finding, (_, _, words) in zip(findings, expected, strict=True):
        assert words in finding.message, finding.message
        named = DEST if "service_api_key_file" in finding.message else source
        assert named in finding.message and finding.fix


def test_without_a_key_file_nothing_is_said():
    assert api_key_findings("", None, "", ABSENT, USER, True) == []


def test_the_fix_for_a_missing_node_file_is_the_source_that_works_on_a_fresh_node():
    (finding,) = api_key_findings("", None, DEST, ABSENT, USER, True)
    assert "set service_api_key_source" in finding.fix and f"root:{USER} 0640" in finding.fix


def test_source_state_reads_the_control_file_without_returning_the_key(tmp_path):
    source = tmp_path / "api-key.yaml"
    source.write_text(f"api-key: {SECRET}\n")
    found = source_state(str(source))
    assert found["has_key"] and found["kind"] == "file" and SECRET not in repr(found)
    source.write_text("apikey: x\n")
    assert not source_state(str(source))["has_key"]
    # Review class "parsers disagree": SGLang reads the file as YAML; these give it no key.
    for text in ('api-key: ""\n', "api-key: # to do\n", "api-key: []\n", f"api-key: {SECRET}\napi-key: ''\n"):
        source.write_text(text)
        assert not source_state(str(source))["has_key"], text
    assert source_state(str(tmp_path))["kind"] == "directory"
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "gone.yaml")
    assert source_state(str(link))["kind"] is None


def key_file_access(path, user):
    """The real fact's command (facts.files.KeyFileAccess) run here, as root, parsed."""
    fact = KeyFileAccess()
    output = subprocess.run(["sh", "-c", fact.command(path, user)], capture_output=True, text=True, check=True,
                            timeout=30).stdout
    return fact.process(output.splitlines())


@pytest.fixture
def scratch(tmp_path):
    """A directory every user may traverse, outside /tmp's 0700 pytest tree."""
    path = Path("/var/cache") / f"gpu-bringup-test-{tmp_path.name}"
    path.mkdir(mode=0o755, parents=True, exist_ok=True)
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_fact_says_what_the_service_user_can_read(scratch):
    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
    key = scratch / "api-key.yaml"
    key.write_text(f"api-key: {SECRET}\n")
    os.chown(key, 0, nobody.pw_gid)
    key.chmod(0o640)
    found = key_file_access(str(key), "nobody")
    assert found == {"kind": "file", "user": "root", "group": group, "mode": "640", "sha1": found["sha1"],
                     "readable": True, "writable_dir": None, "closed_dir": None} and len(found["sha1"]) == 40
    assert SECRET not in repr(found)
    closed = scratch / "closed"
    closed.mkdir(mode=0o700)
    (closed / "api-key.yaml").write_text("api-key: x\n")
    os.chown(closed / "api-key.yaml", 0, nobody.pw_gid)
    (closed / "api-key.yaml").chmod(0o640)
    assert key_file_access(str(closed / "api-key.yaml"), "nobody")["readable"] is False
    # Where deploy uploads it: the directory the service user cannot reach, the file there or not yet.
    assert key_file_access(str(closed / "api-key.yaml"), "nobody")["closed_dir"] == str(closed)
    assert key_file_access(str(closed / "not-yet" / "api-key.yaml"), "nobody")["closed_dir"] == str(closed)
    assert key_file_access(str(scratch / "absent.yaml"), "nobody")["closed_dir"] is None
    assert key_file_access(str(closed / "api-key.yaml"), "no-such-user-7f3")["closed_dir"] is None
    link = scratch / "link.yaml"
    link.symlink_to(key)
    assert key_file_access(str(link), "nobody")["kind"] == "link"
    assert key_file_access(str(key), "no-such-user-7f3")["readable"] is None
    assert key_file_access(str(scratch / "absent.yaml"), "nobody")["kind"] is None


def test_the_fact_names_a_directory_above_the_key_that_another_user_may_write(scratch):
    """Review class "links and ownership": root's upload (stage, chown, rename) in a
    directory the service user owns could be swapped for a link to any file."""
    nobody = pwd.getpwnam("nobody")
    owned = scratch / "owned" / "deeper"
    owned.mkdir(parents=True)
    os.chown(owned.parent, nobody.pw_uid, nobody.pw_gid)
    assert key_file_access(str(owned / "api-key.yaml"), "nobody")["writable_dir"] == str(owned.parent)
    assert key_file_access(str(owned / "not-yet" / "api-key.yaml"), "nobody")["writable_dir"] == str(owned.parent)
    shared = scratch / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    assert key_file_access(str(shared / "api-key.yaml"), "nobody")["writable_dir"] == str(shared)
    link = scratch / "to-owned"
    link.symlink_to(owned.parent)
    assert key_file_access(str(link / "api-key.yaml"), "nobody")["writable_dir"] == str(owned.parent)
    assert key_file_access(str(scratch / "api-key.yaml"), "nobody")["writable_dir"] is None


@pytest.mark.parametrize("dest", ["/var/cache/sglang/api-key.yaml", "/var/lib/sglang/keys/api-key.yaml"])
def test_a_key_file_the_service_user_owns_the_directory_of_is_refused_as_a_setting(dest):
    """Review class "links and ownership": on a fresh node the cache and the home do not
    exist at validate, and deploy makes them the service user's before the upload."""
    from bringup.config import Config, ConfigError
    with pytest.raises(ConfigError, match="which the service user owns") as refused:
        Config.from_data({"service_api_key_source": "k.yaml", "service_api_key_file": dest})
    assert len(str(refused.value).splitlines()) == 1
    assert Config.from_data({"service_api_key_file": dest}).service_api_key_file == dest  # checked on the node only


def test_the_default_key_file_beside_an_env_file_in_the_service_home_is_refused_too():
    from bringup.config import Config, ConfigError
    with pytest.raises(ConfigError, match="/var/lib/sglang/api-key.yaml is inside /var/lib/sglang"):
        Config.from_data({"service_api_key_source": "k.yaml", "service_env_file": "/var/lib/sglang/sglang.env"})
