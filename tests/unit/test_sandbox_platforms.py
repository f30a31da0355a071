"""A first run fetches what its node needs: the platform table (sandbox.platforms), that
`python -m sandbox up` ensures its own platform only, and that the apt repository builds,
signs and serves one directory at a time (no node booted, nothing downloaded)."""

import importlib
import io
import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sandbox import __main__ as sandbox_cli
from sandbox import aptrepo, node, platforms, pypimirror
from sandbox.aptrepo import __main__ as aptrepo_cli
from sandbox.aptrepo import debs
from sandbox.httpserve import StaticServer

# The module (sandbox.aptrepo re-exports its build() under the same name).
aptbuild = importlib.import_module("sandbox.aptrepo.build")

LOCKS = [Path(p) for p in (
    "files/locks/sglang-0.5.23-cp311-x86_64.txt", "files/locks/sglang-0.5.23-cp313-x86_64.txt",
    "files/locks/sglang-0.5.23-cp311-aarch64.txt", "files/locks/sglang-0.5.23-cp312-x86_64.txt",
    "files/locks/uv-cp311-x86_64.txt", "files/locks/uv-cp313-x86_64.txt",
    "sandbox/locks/handbuilt-venv-cp311-x86_64.txt", "sandbox/locks/handbuilt-venv-cp313-x86_64.txt",
    "sandbox/locks/operator-venv-cp311-x86_64.txt", "sandbox/locks/operator-venv-cp313-x86_64.txt")]


@pytest.mark.parametrize("os_name,machine,states,apt_dirs,locks", [
    ("debian12", "x86_64", [], [("debian12", "x86_64")],
     ["sglang-0.5.23-cp311-x86_64.txt", "uv-cp311-x86_64.txt"]),
    ("debian13", "x86_64", [], [("debian13", "x86_64")],
     ["sglang-0.5.23-cp313-x86_64.txt", "uv-cp313-x86_64.txt"]),
    ("debian12", "aarch64", [], [("debian12", "sbsa")], ["sglang-0.5.23-cp311-aarch64.txt"]),
    # The demo's node: incident (nvidia-repo + cuda-12.8 + handbuilt-venv) and operator.
    ("debian12", "x86_64", ["incident", "operator"], [("debian12", "x86_64")],
     ["sglang-0.5.23-cp311-x86_64.txt", "uv-cp311-x86_64.txt", "handbuilt-venv-cp311-x86_64.txt",
      "operator-venv-cp311-x86_64.txt"]),
    ("debian13", "x86_64", ["operator", "nvidia-repo"], [("debian13", "x86_64")],
     ["sglang-0.5.23-cp313-x86_64.txt", "uv-cp313-x86_64.txt", "operator-venv-cp313-x86_64.txt"]),
    ("debian12", "x86_64", ["cuda-12.8"], [("debian12", "x86_64")],
     ["sglang-0.5.23-cp311-x86_64.txt", "uv-cp311-x86_64.txt"]),
])
def test_what_a_platform_needs(os_name, machine, states, apt_dirs, locks):
    wanted = platforms.needs(os_name, machine, states, LOCKS)
    assert list(wanted.apt_dirs) == apt_dirs
    assert [lock.name for lock in wanted.locks] == locks


def test_every_platform_names_locks_that_exist():
    # Against this checkout's locks: a node of each platform has its venv's locks.
    for os_name, machine in [("debian12", "x86_64"), ("debian13", "x86_64"), ("debian12", "aarch64")]:
        names = {pypimirror.LOCK_NAME.sub("", lock.name) for lock in platforms.needs(os_name, machine).locks}
        assert {"uv", "sglang-0.5.23"} <= names, (os_name, machine, names)


@pytest.mark.parametrize("asked,present,looked_at", [
    ([("debian12", "x86_64")], [], [("debian12", "x86_64")]),
    # Debian 13's packages are hard links of Debian 12's x86_64 directory.
    ([("debian13", "x86_64")], [], [("debian12", "x86_64"), ("debian13", "x86_64")]),
    ([("debian12", "sbsa")], [], [("debian12", "sbsa")]),
    # What is built already is kept current (a new keyring URL reaches it too).
    ([], [("debian12", "x86_64"), ("debian12", "sbsa")], [("debian12", "x86_64"), ("debian12", "sbsa")]),
    ([], [], []),
])
def test_dirs_a_build_looks_at(asked, present, looked_at):
    assert aptbuild.dirs_to_build(asked, present) == looked_at


def test_up_ensures_its_platform_only(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(aptrepo, "ensure_built", lambda dirs, log=None: calls.append(("apt", list(dirs))))
    monkeypatch.setattr(pypimirror, "build", lambda locks=None: calls.append(("wheels", [p.name for p in locks])))

    def stop_here(log=None):
        raise node.SandboxError("stopped after the platform step")

    monkeypatch.setattr(node, "_ensure_inotify_instances", stop_here)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    rc = sandbox_cli.main(["up", "gpu13", "--addr", "127.0.0.13", "--gpu", "rtx-pro-6000-x8", "--os", "debian13",
                           "--arch", "amd64", "--state", "operator"])
    assert rc == 1 and "stopped after the platform step" in capsys.readouterr().err
    assert calls == [("apt", [("debian13", "x86_64")]),
                     ("wheels", ["sglang-0.5.23-cp313-x86_64.txt", "uv-cp313-x86_64.txt",
                                 "operator-venv-cp313-x86_64.txt"])]


def test_bad_node_fetches_nothing(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(aptrepo, "ensure_built", lambda dirs, log=None: calls.append(dirs))
    monkeypatch.setattr(pypimirror, "build", lambda locks=None: calls.append(locks))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    rc = sandbox_cli.main(["up", "gpu13", "--addr", "10.0.0.13", "--gpu", "rtx-pro-6000-x8"])
    assert rc == 1 and "not in 127.0.0.0/8" in capsys.readouterr().err and calls == []


def test_mirror_serve_downloads_nothing_unless_asked(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(pypimirror, "build", lambda locks=None: calls.append(locks))
    monkeypatch.setattr(pypimirror.SERVER, "start", lambda *a, **k: {"url": "http://127.0.0.1:1/"})
    monkeypatch.setattr(pypimirror, "running", lambda: None)
    monkeypatch.setattr(pypimirror, "STATE_DIR", tmp_path)
    pypimirror.serve()
    assert calls == []
    assert pypimirror.main(["serve"]) == 0
    assert calls == []


def test_fetch_cli_fetches_the_platform_asked_for(monkeypatch, capsys):
    """`python -m sandbox fetch OS-CPU`: that platform's apt directory and venv locks, and
    nothing for a platform it does not know."""
    built, fetched = [], []
    monkeypatch.setattr(aptrepo, "ensure_built", lambda dirs, log=None: built.append(tuple(dirs)))
    monkeypatch.setattr(pypimirror, "build", lambda locks=None: fetched.append(locks))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert sandbox_cli.main(["fetch", "debian12-x86_64"]) == 0
    assert built == [(("debian12", "x86_64"),)]
    assert [lock.name for lock in fetched[0]] == ["sglang-0.5.23-cp311-x86_64.txt", "uv-cp311-x86_64.txt"]
    assert sandbox_cli.main(["fetch", "debian12-arm64"]) == 1
    assert "platform 'debian12-arm64'" in capsys.readouterr().err and len(built) == 1


@pytest.fixture
def scratch_repo(tmp_path, tmp_path_factory, monkeypatch):
    """The apt repository's paths in a scratch directory, its packages cut to cuda-keyring
    (made from the key alone: no wheel). The key's home is a short path: gpg-agent's socket
    must fit in a socket address (108 bytes)."""
    sandbox = tmp_path / ".sandbox"
    serve_root = sandbox / "aptrepo"
    for name, value in {"SANDBOX": sandbox, "SERVE_ROOT": serve_root, "REPO_DIR": serve_root / aptbuild.REPO_REL,
                        "GNUPGHOME": tmp_path_factory.mktemp("gnupg"), "FINGERPRINT_FILE": serve_root / "fingerprint",
                        "LOCK_FILE": sandbox / "aptrepo.lock", "DEB_CACHE": tmp_path / "debs"}.items():
        monkeypatch.setattr(aptbuild, name, value)
    monkeypatch.setattr(debs, "all_packages", lambda sets, machine="x86_64", keyring=debs.KEYRING: [keyring])
    monkeypatch.setattr(aptrepo._serve, "running", lambda: None)
    return serve_root


def _get(url):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def _snapshot(directory):
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in directory.iterdir()}


def test_repository_builds_and_serves_one_directory_at_a_time(scratch_repo, tmp_path):
    url = "http://127.0.0.1:8913/compute/cuda/repos/debian12/x86_64/"
    first = aptbuild.build(url=url, dirs=[aptbuild.HOME_DIR], log=io.StringIO())
    assert first["changed"] and first["dirs"] == ["debian12/x86_64"]
    assert aptbuild.built_dirs() == [("debian12", "x86_64")]
    assert not aptbuild.distro_dir("debian13").exists() and not aptbuild.distro_dir("debian12", "sbsa").exists()
    server = StaticServer(scratch_repo, tmp_path / "server.json", tmp_path / "server.log")
    state = server.start("127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{state['port']}/compute/cuda/repos/"
        assert _get(base + "debian12/x86_64/InRelease")[0] == 200
        assert _get(base + "debian13/x86_64/InRelease")[0] == 404
        debian12 = _snapshot(aptbuild.REPO_DIR)
        # A Debian 13 node starts later: its directory is added, Debian 12's is not touched.
        added = aptrepo.ensure_built([("debian13", "x86_64")], log=io.StringIO())
        assert added["dirs"] == ["debian13/x86_64"] and _snapshot(aptbuild.REPO_DIR) == debian12
        status, release = _get(base + "debian13/x86_64/Release")
        assert status == 200 and b"Origin: NVIDIA" in release
        packages = _get(base + "debian13/x86_64/Packages")[1].decode()
        assert "Filename: ./cuda-keyring_1.1-1_all.deb" in packages
        # Its InRelease is signed by the repository's key.
        inrelease = tmp_path / "InRelease"
        inrelease.write_bytes(_get(base + "debian13/x86_64/InRelease")[1])
        verify = subprocess.run(["gpg", "--homedir", str(aptbuild.GNUPGHOME), "--verify", str(inrelease)],
                                capture_output=True, text=True, check=False)
        assert verify.returncode == 0, verify.stderr
        keyring_source = json.loads((aptbuild.distro_dir("debian13") / aptbuild.MANIFEST).read_text())["repo_url"]
        assert keyring_source == url.replace("debian12", "debian13")
    finally:
        server.stop()
    # Nothing stale: a second look at both changes nothing, and builds no sbsa directory.
    again = aptbuild.build(dirs=[("debian13", "x86_64")], log=io.StringIO())
    assert not again["changed"] and aptbuild.built_dirs() == [("debian12", "x86_64"), ("debian13", "x86_64")]


def test_build_cli_builds_the_platform_asked_for(scratch_repo, capsys):
    url = "http://127.0.0.1:8913/compute/cuda/repos/debian12/x86_64/"
    assert aptrepo_cli.main(["build", "--platform", "debian13-x86_64", "--url", url]) == 0
    assert json.loads(capsys.readouterr().out)["dirs"] == ["debian12/x86_64", "debian13/x86_64"]
    assert aptbuild.built_dirs() == [("debian12", "x86_64"), ("debian13", "x86_64")]
    with pytest.raises(SystemExit) as refused:
        aptrepo_cli.main(["build", "--platform", "rhel9-x86_64"])
    assert refused.value.code == 2 and "platform 'rhel9-x86_64': give OS-CPU" in capsys.readouterr().err


def test_a_cold_repository_is_served_and_fills_in(scratch_repo, tmp_path, monkeypatch):
    # The real server checks (running() asks its page): nothing built yet, it still answers.
    monkeypatch.setattr(aptrepo._serve, "SERVER", StaticServer(scratch_repo, tmp_path / "server.json", tmp_path / "log"))
    monkeypatch.setattr(aptrepo._serve, "FINGERPRINT_FILE", aptbuild.FINGERPRINT_FILE)
    monkeypatch.setattr(aptrepo._serve, "running", aptrepo._serve.SERVER.running)
    info, started = aptrepo.serve(port=0, log=io.StringIO())
    try:
        assert started and aptbuild.built_dirs() == [] and aptrepo.running() == info
        assert _get(info["repo_url"] + "InRelease")[0] == 404
        aptrepo.ensure_built([aptbuild.HOME_DIR], log=io.StringIO())
        assert _get(info["repo_url"] + "InRelease")[0] == 200 and _get(info["key_url"])[0] == 200
        # The keyring's source names the port being served.
        assert aptbuild.read_manifest()["repo_url"] == info["repo_url"] and aptrepo.running()["pid"] == info["pid"]
    finally:
        aptrepo.stop(pid=info["pid"])


def test_a_cold_mirror_is_served(tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "pypi-mirror"
    monkeypatch.setattr(pypimirror, "CACHE", cache)
    monkeypatch.setattr(pypimirror, "STATE_DIR", tmp_path)
    monkeypatch.setattr(pypimirror, "SERVER", StaticServer(cache, tmp_path / "pypimirror.json", tmp_path / "log"))
    state = pypimirror.serve(port=0)
    try:
        assert pypimirror.running() == state and list(cache.iterdir()) == []
    finally:
        pypimirror.stop()


def test_an_arm_first_run_builds_sbsa_alone_and_publishes_the_key(scratch_repo):
    built = aptbuild.build(url="http://127.0.0.1:8913/compute/cuda/repos/debian12/x86_64/",
                           dirs=platforms.needs("debian12", "aarch64", locks=()).apt_dirs, log=io.StringIO())
    assert built["dirs"] == ["debian12/sbsa"] and aptbuild.built_dirs() == [("debian12", "sbsa")]
    fingerprint = aptbuild.FINGERPRINT_FILE.read_text().strip()
    # Where server.json's key_url points; the directory has no index until a node of it starts.
    assert (aptbuild.REPO_DIR / aptbuild.pubkey_name(fingerprint)).read_text().startswith("-----BEGIN PGP")
    assert sorted(p.name for p in aptbuild.REPO_DIR.iterdir()) == [aptbuild.pubkey_name(fingerprint)]
