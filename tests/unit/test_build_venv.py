"""files/build-venv.sh run here for real, in scratch directories, with stand-ins for the
interpreter, pip and uv (no network): which venvs it keeps (the rollback, every adopted
hand-built venv, however a run is interrupted) and when it bootstraps uv again (a new uv
lock, a bootstrap that did not finish)."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_VENV = ROOT / "files" / "build-venv.sh"

# `python -m venv DIR`: a venv whose pip, given a uv lock, installs a uv that names the
# lock it came from each time it runs (in $STANDIN_LOG).
PYTHON = """#!/bin/sh
[ "$1" = -m ] && [ "$2" = venv ] || exit 2
mkdir -p "$3/bin"
cp "$STANDIN_BIN/pip.in" "$3/bin/pip"
printf '#!/bin/sh\\nexit 0\\n' > "$3/bin/python"
chmod 0755 "$3/bin/pip" "$3/bin/python"
"""
PIP = """#!/bin/sh
[ -n "${PIP_FAILS:-}" ] && exit 1
for lock; do :; done
case $(head -n 1 "$lock") in
    uv*) printf '#!/bin/sh\\ncase $1 in venv) mkdir -p "$5/bin" ;; pip) echo "uv %s" >> "$STANDIN_LOG" ;; esac\\n' \\
             "$(head -n 1 "$lock")" > "${0%/*}/uv"
         chmod 0755 "${0%/*}/uv" ;;
esac
"""
# ln and mv as they are, except that the one whose arguments hold $KILL_AT kills the
# script that ran it first (a run interrupted at that point: no trap, no cleanup).
INTERRUPTIBLE = """#!/bin/sh
case " $* " in
    *"${KILL_AT:-@none@}"*) if [ -e "$STANDIN_BIN/armed" ]; then rm -f "$STANDIN_BIN/armed"; kill -KILL $PPID; exit 1; fi ;;
esac
exec @real@ "$@"
"""


@pytest.fixture
def node(tmp_path):
    """Scratch directories for one venv root, the stand-ins, and a runner."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("python", PYTHON), ("pip.in", PIP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for name in ("ln", "mv"):
        (bin_dir / name).write_text(INTERRUPTIBLE.replace("@real@", shutil.which(name)))
        (bin_dir / name).chmod(0o755)
    if os.geteuid() != 0:
        # `install -o root -g root` needs root; the directories are what matters here.
        (bin_dir / "install").write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in -d) ;; -m|-o|-g) shift ;; '
                                         '*) mkdir -p "$1" ;; esac; shift; done\n')
        (bin_dir / "install").chmod(0o755)
    root = tmp_path / "opt"
    (root / "locks").mkdir(parents=True)
    log = tmp_path / "uv.log"

    def lock(name, text):
        path = root / "locks" / name
        path.write_text(text)
        return path

    def build(digest, uv_lock="uv==0.11.1", installer="uv", kill_at=None):
        venv_lock = lock(f"{digest}.txt", f"packaging==26.4 # {digest}\n")
        uv = lock("uv.txt", uv_lock + "\n")
        if kill_at:
            (bin_dir / "armed").write_text("")
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STANDIN_BIN": str(bin_dir),
               "STANDIN_LOG": str(log), "KILL_AT": kill_at or "@none@",
               "VENV_LINK": str(root / "venv"), "VENV_DIRS": str(root / "venvs"), "VENV_DIGEST": digest,
               "VENV_LOCK": str(venv_lock), "VENV_UV_LOCK": str(uv), "VENV_TOOLS": str(root / "tools"),
               "VENV_CACHE": str(root / "cache"), "VENV_INSTALLER": installer,
               "VENV_PYTHON": str(bin_dir / "python"), "VENV_TORCH_INFO": "",
               "VENV_RELEASES": str(root / "releases")}
        return subprocess.run(["sh", str(BUILD_VENV)], env=env, capture_output=True, text=True, timeout=60)

    def hand_built():
        """A venv built by hand at the live path, with a file that says so."""
        (root / "venv" / "bin").mkdir(parents=True)
        (root / "venv" / "HAND-BUILT").write_text("the operator's\n")

    def adopted():
        """The adopted venvs under venvs/ that still hold the hand-built one."""
        return sorted(path.parent.name for path in (root / "venvs").glob("adopted-*/HAND-BUILT"))

    def uv_runs():
        return log.read_text().splitlines() if log.exists() else []

    return {"root": root, "build": build, "hand_built": hand_built, "adopted": adopted, "uv_runs": uv_runs,
            "previous": lambda: os.readlink(root / "venvs" / "previous"),
            "live": lambda: os.readlink(root / "venv")}


def ok(run):
    assert run.returncode == 0, run.stdout + run.stderr
    return run


# -------------------------------------------------------------- the rollback


def test_an_adopted_venv_survives_the_next_lock_changes(node):
    node["hand_built"]()
    ok(node["build"]("a" * 16))
    [adopted] = node["adopted"]()
    assert node["previous"]() == adopted and node["live"]() == "venvs/" + "a" * 16
    ok(node["build"]("b" * 16))
    assert node["previous"]() == "a" * 16
    ok(node["build"]("c" * 16))
    # The operator's venv stays (no lock builds it again); older managed venvs go.
    assert node["adopted"]() == [adopted]
    assert sorted(path.name for path in (node["root"] / "venvs").glob("[!.]*")) == \
        sorted([adopted, "b" * 16, "c" * 16, "previous"])



def test_a_venv_a_release_names_is_kept(node):
    # files/release.sh's record of what the service ran: its venv outlives the cleanup
    # (live + previous) for as long as the record names it, so a rollback finds it.
    for digest in ("a", "b"):
        ok(node["build"](digest * 16))
    record = node["root"] / "releases" / "0123456789abcdef"
    record.mkdir(parents=True)
    (record / "venv").write_text("venvs/" + "a" * 16 + "\n")
    for digest in ("c", "d"):
        ok(node["build"](digest * 16))
    assert sorted(path.name for path in (node["root"] / "venvs").glob("[!.]*")) == \
        sorted(["a" * 16, "c" * 16, "d" * 16, "previous"])
    (record / "venv").unlink()
    ok(node["build"]("e" * 16))
    assert not (node["root"] / "venvs" / ("a" * 16)).exists()


@pytest.mark.parametrize("kill_at", [
    "previous.new",      # the first link of the run: the rollback named, nothing moved yet
    "adopted-",          # the move of the hand-built venv under venvs/
    "venv.new",          # the new live link, after the move
])
def test_a_run_interrupted_around_the_adoption_keeps_the_hand_built_venv(node, kill_at):
    node["hand_built"]()
    killed = node["build"]("a" * 16, kill_at=kill_at)
    assert killed.returncode != 0
    # Whatever was done, the hand-built venv is somewhere, named as the rollback once it moved.
    found = node["adopted"]()
    if found:
        assert node["previous"]() == found[0]
    else:
        assert (node["root"] / "venv" / "HAND-BUILT").exists()
    ok(node["build"]("a" * 16))
    [adopted] = node["adopted"]()
    assert node["previous"]() == adopted and node["live"]() == "venvs/" + "a" * 16
    ok(node["build"]("b" * 16))
    assert node["adopted"]() == [adopted]


# -------------------------------------------------------------- uv


def tool_dirs(node):
    tools = node["root"] / "tools"
    return sorted(path.name for path in tools.iterdir()) if tools.exists() else []


def test_uv_is_keyed_by_its_lock_and_a_new_lock_bootstraps_a_new_one(node):
    first = ok(node["build"]("a" * 16, uv_lock="uv==0.11.1"))
    assert "uv bootstrapped" in first.stdout
    [old_dir] = tool_dirs(node)
    assert (node["root"] / "tools" / old_dir / ".complete").read_text() == old_dir + "\n"
    second = ok(node["build"]("b" * 16, uv_lock="uv==0.12.0"))
    assert "uv bootstrapped" in second.stdout, second.stdout
    assert node["uv_runs"]() == ["uv uv==0.11.1", "uv uv==0.12.0"]
    [new_dir] = tool_dirs(node)
    assert new_dir != old_dir
    # Same uv lock again: no second bootstrap.
    third = ok(node["build"]("c" * 16, uv_lock="uv==0.12.0"))
    assert "uv bootstrapped" not in third.stdout and node["uv_runs"]()[-1] == "uv uv==0.12.0"


def test_a_uv_left_by_an_unfinished_or_older_bootstrap_is_not_reused(node):
    tools = node["root"] / "tools"
    # The single tools/ venv of earlier releases, and one digest directory without its
    # marker (the bootstrap was killed after pip wrote uv): neither is used.
    for stale in (tools / "bin", tools / "0123456789abcdef" / "bin"):
        stale.mkdir(parents=True)
        (stale / "uv").write_text(f"#!/bin/sh\necho 'stale uv' >> {node['root'].parent / 'uv.log'}\n")
        (stale / "uv").chmod(0o755)
    digest = hashlib.sha256(b"uv==0.11.1\n").hexdigest()[:16]
    (tools / digest / "bin").mkdir(parents=True)
    shutil.copy(tools / "bin" / "uv", tools / digest / "bin" / "uv")
    run = ok(node["build"]("a" * 16, uv_lock="uv==0.11.1"))
    assert "uv bootstrapped" in run.stdout
    assert node["uv_runs"]() == ["uv uv==0.11.1"]
    assert tool_dirs(node) == [digest]


def test_a_failed_bootstrap_leaves_no_tools_and_no_venv(node, monkeypatch):
    monkeypatch.setenv("PIP_FAILS", "1")
    run = node["build"]("a" * 16)
    assert run.returncode == 1 and "uv could not be installed" in run.stdout
    assert not (node["root"] / "tools").exists()
    assert not (node["root"] / "venv").exists()


def test_pip_alone_bootstraps_nothing(node):
    ok(node["build"]("a" * 16, installer="pip"))
    assert tool_dirs(node) == [] and node["live"]() == "venvs/" + "a" * 16


def test_a_kept_uv_another_user_may_change_is_never_run_by_root(node):
    """The uv of an earlier bootstrap is run again only while root may run it
    (files/root-may-run.sh): one that became another user's is refused, nothing built."""
    if os.geteuid() != 0:
        pytest.skip("the rule is about what root runs: run as root (the sandbox machines do)")
    ok(node["build"]("a" * 16, uv_lock="uv==0.11.1"))
    [kept] = tool_dirs(node)
    os.chown(node["root"] / "tools" / kept / "bin" / "uv", 1, 1)
    run = node["build"]("b" * 16, uv_lock="uv==0.11.1")
    assert run.returncode == 1 and f"daemon may change {node['root']}/tools/{kept}/bin/uv" in run.stderr, \
        run.stdout + run.stderr
    assert "nothing was built" in run.stdout and node["uv_runs"]() == ["uv uv==0.11.1"]
    assert node["live"]() == "venvs/" + "a" * 16 and not (node["root"] / "venvs" / ("b" * 16)).exists()
