"""The paths root reads and hands out, planned from the probe's path chains: the env
file itself (root loads it) and the cache directory (deploy gives it to the service
user) are blockers when another user could change them; and the cache directory's
task never follows a link, even one planted after validate."""

import json
import os
import subprocess
import sys
from unittest import mock

import pytest

from bringup.config import Config
from bringup.plan import plan
from tasks.operations.files import directory_if_missing
from tests.unit.scenarios import FIXTURES, converged, varied

ENV = "/etc/sglang/sglang.env"
CACHE = "/var/cache/sglang"
ROOT_DIRS = [("/etc", "root", "755", "directory"), ("/", "root", "755", "directory")]


def chain(*entries):
    return [{"path": path, "user": user, "mode": mode, "kind": kind} for path, user, mode, kind in entries]


def env_chain(*first):
    return chain(*first, ("/etc/sglang", "root", "755", "directory"), *ROOT_DIRS)


def cache_chain(*first):
    return chain(*first, ("/var/cache", "root", "755", "directory"), ("/var", "root", "755", "directory"),
                 ("/", "root", "755", "directory"))


def unsafe(paths, settings=None):
    facts = varied(converged(), paths={"venv": [], "env_file": [], "cache_dir": [], **paths})
    return [f.message for f in plan(facts, Config.from_data(settings or {})).findings
            if f.code == "UNSAFE_PATH" and f.severity == "blocker"]


@pytest.mark.parametrize("env_file,named", [
    # Deploy's own: root's, 0640 (group-readable by the service) or 0644.
    (env_chain((ENV, "root", "640", "regular file")), None),
    (env_chain((ENV, "root", "644", "regular empty file")), None),
    # Not there yet: its directories are what matter.
    (env_chain(), None),
    (chain(("/etc/sglang", "sglang", "755", "directory"), *ROOT_DIRS), "/etc/sglang (directory, owner sglang"),
    # The finding: the service user's, 0666, planned ok and root loaded it.
    (env_chain((ENV, "sglang", "666", "regular file")), f"the service env file {ENV} (regular file, owner sglang"),
    (env_chain((ENV, "root", "666", "regular file")), "(regular file, owner root, mode 666) is writable by a non-root user"),
    (env_chain((ENV, "root", "620", "regular file")), "mode 620"),
    (env_chain((ENV, "ubuntu", "600", "regular file")), "owner ubuntu, mode 600"),
    # A link there (stat without -L: the link's own owner and mode) is followed by root.
    (env_chain((ENV, "root", "777", "symbolic link")), "(symbolic link, owner root, mode 777) is a symbolic link: root would read"),
    (env_chain((ENV, "root", "755", "directory")), "(directory, owner root, mode 755) is not a regular file"),
], ids=["root-0640", "root-empty", "absent", "dir-of-service-user", "service-user-0666", "root-0666",
        "group-writable", "other-owner", "link", "directory"])
def test_env_file_itself_is_checked(env_file, named):
    found = unsafe({"env_file": env_file})
    if named is None:
        assert found == []
    else:
        assert len(found) == 1 and named in found[0], found


@pytest.mark.parametrize("cache_dir,settings,named", [
    (cache_chain((CACHE, "sglang", "755", "directory")), {}, None),
    (cache_chain(), {}, None),
    # A cache under another user's home: that user can replace it.
    (chain(("/home/ubuntu/c", "sglang", "755", "directory"), ("/home/ubuntu", "ubuntu", "750", "directory"),
           ("/home", "root", "755", "directory"), ("/", "root", "755", "directory")),
     {"service_cache_dir": "/home/ubuntu/c"}, "/home/ubuntu (directory, owner ubuntu, mode 750) lets a non-root"),
    # On a 1777 /data any user plants c -> /etc/systemd/system: both the link and /data.
    (chain(("/data/c", "bob", "777", "symbolic link"), ("/data", "root", "1777", "directory"),
           ("/", "root", "755", "directory")), {"service_cache_dir": "/data/c"}, "/data (directory, owner root, mode 1777)"),
    (chain(("/data/c", "bob", "777", "symbolic link"), ("/data", "root", "755", "directory"),
           ("/", "root", "755", "directory")), {"service_cache_dir": "/data/c"},
     "the cache directory /data/c (symbolic link, owner bob, mode 777) is a symbolic link"),
    (cache_chain((CACHE, "ubuntu", "755", "directory")), {}, "(directory, owner ubuntu, mode 755) is another user's, who could plant"),
    (cache_chain((CACHE, "sglang", "777", "directory")), {}, "(directory, owner sglang, mode 777) is writable by any user"),
    (cache_chain((CACHE, "root", "644", "regular file")), {}, "(regular file, owner root, mode 644) is not a directory"),
], ids=["deploys-own", "absent", "under-a-home", "link-in-sticky-data", "link", "other-owner", "world-writable",
        "file"])
def test_cache_dir_chain_is_checked(cache_dir, settings, named):
    found = unsafe({"cache_dir": cache_dir}, settings)
    if named is None:
        assert found == []
    else:
        assert found and any(named in message for message in found), found


def run_plan_cli(tmp_path, paths, settings):
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(varied(converged(), paths={"venv": [], "env_file": [], "cache_dir": [], **paths})))
    config = tmp_path / "settings.yaml"
    config.write_text(json.dumps(settings))
    result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(facts), "--config", str(config), "--host", "gpu7"],
                            capture_output=True, text=True, cwd=FIXTURES.parents[1])
    assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
    return json.loads(result.stdout)


@pytest.mark.parametrize("paths,settings,named", [
    ({"env_file": env_chain((ENV, "sglang", "666", "regular file"))}, {}, f"the service env file {ENV}"),
    ({"env_file": env_chain((ENV, "root", "777", "symbolic link"))}, {}, "is a symbolic link"),
    ({"cache_dir": chain(("/data/c", "bob", "777", "symbolic link"), ("/data", "root", "755", "directory"),
                         ("/", "root", "755", "directory"))}, {"service_cache_dir": "/data/c"},
     "the cache directory /data/c"),
], ids=["env-file-0666", "env-file-link", "cache-dir-link"])
def test_plan_cli_blocks_on_the_env_file_and_the_cache_dir(tmp_path, paths, settings, named):
    printed = run_plan_cli(tmp_path, paths, settings)
    blockers = [f for f in printed["findings"] if f["code"] == "UNSAFE_PATH" and f["severity"] == "blocker"]
    assert not printed["ok"] and blockers and named in blockers[0]["message"] and blockers[0]["fix"], printed


def directory_command(path, user, group, found=None):
    """The command directory_if_missing yields on a node whose Directory fact is ``found``."""
    with mock.patch("tasks.operations.files.host") as host:
        host.get_fact.return_value = found
        host.name = "gpu7"
        return list(directory_if_missing._inner(path=str(path), user=user, group=group, mode="0755"))


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_cache_dir_task_never_follows_a_link(tmp_path):
    """A link planted at the cache dir after validate (the fact saw nothing there):
    the command refuses it at run time, and its target keeps its owner."""
    target = tmp_path / "systemd-system"
    target.mkdir()
    cache = tmp_path / "data" / "c"
    [command] = directory_command(cache, "nobody", "nogroup", found=None)
    cache.parent.mkdir()
    cache.symlink_to(target)
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert result.returncode == 1 and "gpu7: " in result.stderr and "is a link" in result.stderr, result
    assert target.stat().st_uid == 0 and cache.is_symlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_cache_dir_task_makes_a_missing_directory_for_the_service_user(tmp_path):
    cache = tmp_path / "var" / "cache" / "sglang"
    [command] = directory_command(cache, "nobody", "nogroup", found=None)
    subprocess.run(["sh", "-c", command], check=True)
    assert (cache.stat().st_uid, oct(cache.stat().st_mode & 0o7777)) == (65534, "0o755")
    assert cache.parent.stat().st_uid == 0
    # Run again (the directory now there): nothing changes, nothing fails.
    subprocess.run(["sh", "-c", command], check=True)


def test_cache_dir_task_refuses_a_link_the_facts_saw():
    [command] = directory_command("/data/c", "sglang", "sglang", found=False)
    assert command.startswith("echo 'gpu7: /data/c is a link or a file") and command.endswith("exit 1")
