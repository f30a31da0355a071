"""The paths the service user must reach (SERVICE_PATH_UNREACHABLE), planned from the
probe's path chains: a directory of the layout deploy made and owns is a fix (deploy
opens it), another's a blocker naming the path, the directory and the command (issue 32:
a bare node's venv root made 0700 by release.sh's umask 077)."""

import pytest

from bringup.config import Config
from bringup.plan import plan
from tests.unit.scenarios import converged, varied

VENV, TARGET, CACHE = "/opt/sglang/venv", "/opt/sglang/venvs/0123456789abcdef", "/var/cache/sglang"


def chain(*entries):
    return [{"path": path, "user": user, "mode": mode, "kind": kind} for path, user, mode, kind in entries]


def venv_chain(root="700", opt="755", root_user="root"):
    return chain((VENV, "root", "777", "symbolic link"), ("/opt/sglang", root_user, root, "directory"),
                 ("/opt", "root", opt, "directory"), ("/", "root", "755", "directory"))


def target_chain(leaf="755", venvs="755", root="700"):
    return chain((TARGET, "root", leaf, "directory"), ("/opt/sglang/venvs", "root", venvs, "directory"),
                 ("/opt/sglang", "root", root, "directory"), ("/opt", "root", "755", "directory"),
                 ("/", "root", "755", "directory"))


def cache_chain(leaf="755", owner="sglang", var_cache="755"):
    return chain((CACHE, owner, leaf, "directory"), ("/var/cache", "root", var_cache, "directory"),
                 ("/var", "root", "755", "directory"), ("/", "root", "755", "directory"))


def unreachable(paths, settings=None):
    facts = varied(converged(), paths={"venv": venv_chain("755"), "env_file": [], "cache_dir": cache_chain(),
                                       **paths})
    return [(f.severity, f.message, f.fix) for f in plan(facts, Config.from_data(settings or {})).findings
            if f.code == "SERVICE_PATH_UNREACHABLE"]


@pytest.mark.parametrize("paths,settings,expected", [
    # The node as deployed: every directory open to others.
    ({"venv_target": target_chain(root="755")}, None, []),
    # Issue 32: the venv root 0700 (root's, deploy's): deploy opens it.
    ({"venv": venv_chain("700")}, None,
     [("fix", "/opt/sglang (directory, owner root, mode 700) keeps the service user sglang out of /opt/sglang/venv",
       "deploy opens /opt/sglang to sglang (chmod go+rx): it made it, mode 0755")]),
    # Named once, though the venv's target is below it too.
    ({"venv": venv_chain("700"), "venv_target": target_chain(root="700")}, None,
     [("fix", "/opt/sglang (directory, owner root, mode 700) keeps the service user sglang out of /opt/sglang/venv",
       "deploy opens /opt/sglang to sglang (chmod go+rx): it made it, mode 0755")]),
    # The link's target: venvs/ closed, or the venv itself not listable.
    ({"venv_target": target_chain(venvs="711", root="755")}, None, []),
    ({"venv_target": target_chain(venvs="700", root="755")}, None,
     [("fix", f"/opt/sglang/venvs (directory, owner root, mode 700) keeps the service user sglang out of {TARGET}",
       "deploy opens /opt/sglang/venvs to sglang (chmod go+rx): it made it, mode 0755")]),
    ({"venv_target": target_chain(leaf="711", root="755")}, None,
     [("blocker", f"{TARGET} (directory, owner root, mode 711) keeps the service user sglang out of {TARGET}",
       f"chmod o+rx {TARGET}, or set the path where sglang can reach it")]),
    # Not deploy's: an operator's /opt, or a venv root another user owns.
    ({"venv": venv_chain("755", opt="700")}, None,
     [("blocker", "/opt (directory, owner root, mode 700) keeps the service user sglang out of /opt/sglang/venv",
       "chmod o+x /opt, or set the path where sglang can reach it")]),
    # Deploy's own closed and an operator's above it: both named (opening the venv root
    # alone would leave the service user out: a fix only would let deploy go on).
    ({"venv": venv_chain("700", opt="700")}, None,
     [("fix", "/opt/sglang (directory, owner root, mode 700) keeps the service user sglang out of /opt/sglang/venv",
       "deploy opens /opt/sglang to sglang (chmod go+rx): it made it, mode 0755"),
      ("blocker", "/opt (directory, owner root, mode 700) keeps the service user sglang out of /opt/sglang/venv",
       "chmod o+x /opt, or set the path where sglang can reach it")]),
    ({"venv": venv_chain("700", root_user="ubuntu")}, None,
     [("blocker", "/opt/sglang (directory, owner ubuntu, mode 700) keeps",
       "chmod o+x /opt/sglang, or set the path where sglang can reach it")]),
    # Open to its group only: the probe does not say whose group, so not judged.
    ({"venv": venv_chain("750")}, None, []),
    # The cache: the service user's own needs its owner's bits; /var/cache others'.
    ({"cache_dir": cache_chain(leaf="700")}, None, []),
    ({"cache_dir": cache_chain(leaf="300")}, None,
     [("fix", f"{CACHE} (directory, owner sglang, mode 300) keeps the service user sglang out of {CACHE}",
       f"deploy opens {CACHE} to sglang (chmod u+rx): it made it, mode 0755")]),
    ({"cache_dir": cache_chain(var_cache="700")}, None,
     [("blocker", f"/var/cache (directory, owner root, mode 700) keeps the service user sglang out of {CACHE}",
       "chmod o+x /var/cache, or set the path where sglang can reach it")]),
    # The interpreter the venv runs: an operator's venv_python under a prefix closed to
    # others (root's, so its own checks pass) is never deploy's: a blocker.
    ({"python": chain(("/opt/cpython-3.11/bin/python3.11", "root", "755", "regular file"),
                      ("/opt/cpython-3.11/bin", "root", "755", "directory"),
                      ("/opt/cpython-3.11", "root", "700", "directory"), ("/opt", "root", "755", "directory"))},
     None,
     [("blocker", "/opt/cpython-3.11 (directory, owner root, mode 700) keeps the service user sglang out of "
       "/opt/cpython-3.11/bin/python3.11, the interpreter the venv /opt/sglang/venv runs",
       "chmod o+x /opt/cpython-3.11, or set the path where sglang can reach it")]),
    ({"python": chain(("/usr/bin/python3.11", "root", "755", "regular file"), ("/usr/bin", "root", "755", "directory"))},
     None, []),
    # An external venv closed to the service user is VENV_UNREADABLE's, not this one's.
    ({"venv": venv_chain("700")}, {"venv_managed": False}, []),
], ids=["deployed", "venv-root-0700", "named-once", "venvs-0711", "venvs-0700", "target-not-listable",
        "operators-opt", "ours-and-operators", "another-owner", "group-only", "cache-own-0700", "cache-own-0300", "var-cache-0700", "python-prefix-0700", "system-python",
        "external-venv"])
def test_service_reach(paths, settings, expected):
    found = unreachable(paths, settings)
    assert len(found) == len(expected), found
    for (severity, message, fix), (want_severity, want_message, want_fix) in zip(found, expected, strict=True):
        assert (severity, fix) == (want_severity, want_fix)
        assert message.startswith(want_message), message


def test_an_older_report_without_chains_finds_nothing():
    facts = varied(converged(), paths=None)
    assert not [f for f in plan(facts, Config()).findings if f.code == "SERVICE_PATH_UNREACHABLE"]
