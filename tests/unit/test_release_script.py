"""files/release.sh run here for real, in scratch directories: what a release records
(the venv link's target, the unit, the env file, root's only), when the rollback moves
on (never over what the service last ran), and that a rollback puts exactly that back,
once."""

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from bringup.release import parse_look

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "files" / "release.sh"
SECRET = "hf_s3cr3t_value"


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def node(tmp_path):
    """One venv root with venvs, a unit and an env file, and a runner of release.sh."""
    root = tmp_path / "opt"
    (root / "venvs").mkdir(parents=True)
    etc = tmp_path / "etc"
    etc.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if os.geteuid() != 0:
        # chown and install -o/-g need root; the modes and contents are what matters here.
        (bin_dir / "chown").write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / "install").write_text('#!/bin/sh\nm=0644\nwhile [ $# -gt 2 ]; do case $1 in -m) m=$2; shift ;; '
                                         '-o|-g) shift ;; --) ;; esac; shift; done\ncp -- "$1" "$2" && chmod "$m" "$2"\n')
        for name in ("chown", "install"):
            (bin_dir / name).chmod(0o755)
    paths = {"root": root, "venv": root / "venv", "unit": etc / "sglang.service", "env": etc / "sglang.env",
             "releases": root / "releases"}

    def venv(name, complete=True):
        """A venv under venvs/ (complete: its marker names it)."""
        (root / "venvs" / name / "bin").mkdir(parents=True)
        (root / "venvs" / name / "bin" / "python").write_text("#!/bin/sh\n")
        (root / "venvs" / name / "bin" / "python").chmod(0o755)
        if complete:
            (root / "venvs" / name / ".complete").write_text(name + "\n")

    def live(venv_name, unit_text, env_text):
        """Make (venv link, unit, env file) live, as deploy's steps write them."""
        link = paths["venv"]
        if link.is_symlink():
            link.unlink()
        link.symlink_to(f"venvs/{venv_name}")
        paths["unit"].write_text(unit_text)
        paths["env"].write_text(env_text)
        paths["env"].chmod(0o640)

    def run(action):
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RELEASES": str(paths["releases"]),
               "VENV": str(paths["venv"]), "VENVS": str(root / "venvs"), "UNIT": str(paths["unit"]),
               "ENV_FILE": str(paths["env"])}
        return subprocess.run(["sh", str(RELEASE), action], env=env, capture_output=True, text=True, timeout=30)

    def look():
        done = ok(run("look"))
        assert SECRET not in done.stdout + done.stderr
        return parse_look(done.stdout.splitlines())

    def state():
        """What a rollback must put back: the link's target and the files' digests and modes."""
        return (os.readlink(paths["venv"]) if paths["venv"].is_symlink() else "dir", sha(paths["unit"]),
                sha(paths["env"]), stat.S_IMODE(paths["env"].stat().st_mode))

    return {**paths, "venv_dir": venv, "live": live, "run": run, "look": look, "state": state}


def ok(done):
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def deploy(node, venv_name, unit_text, env_text):
    """What deploy does around a change: seed, change, promote, (restart), record."""
    ok(node["run"]("seed"))
    node["venv_dir"](venv_name)
    node["live"](venv_name, unit_text, env_text)
    ok(node["run"]("promote"))
    ok(node["run"]("record"))


def test_nothing_live_records_nothing(node):
    assert "no release recorded" in ok(node["run"]("seed")).stdout
    assert node["look"]()["current"] == ""
    refused = node["run"]("restore")
    assert refused.returncode == 3 and refused.stderr.strip() == "no previous release recorded"


def test_a_rollback_puts_back_exactly_what_ran_before_the_change_once(node):
    node["venv_dir"]("a" * 16)
    node["live"]("a" * 16, "unit one\n", f"HF_TOKEN={SECRET}\nKNOB=1\n")
    ok(node["run"]("seed"))
    before = node["state"]()
    deploy(node, "b" * 16, "unit two\n", f"HF_TOKEN={SECRET}\nKNOB=2\n")
    look = node["look"]()
    assert look["previous_venv"] == "venvs/" + "a" * 16 and look["previous_problem"] == ""
    assert look["current"] == look["live"]
    # Root's only: the directory 0700, every copy 0600.
    assert stat.S_IMODE(node["releases"].stat().st_mode) == 0o700
    for copy in node["releases"].glob("*/*"):
        if not copy.is_symlink():
            assert stat.S_IMODE(copy.stat().st_mode) == 0o600, copy
    failed = node["state"]()
    ok(node["run"]("restore"))
    assert node["state"]() == before
    # The failed venv stays for inspection; a second rollback has nothing to go back to.
    assert (node["root"] / "venvs" / ("b" * 16) / "bin" / "python").exists()
    assert node["look"]()["current"] == node["look"]()["live"]
    second = node["run"]("restore")
    assert (second.returncode, second.stderr.strip()) == (3, "no previous release recorded")
    assert node["state"]() == before != failed


def test_a_rerun_after_an_interrupted_deploy_keeps_the_true_before_state(node):
    node["venv_dir"]("a" * 16)
    node["live"]("a" * 16, "unit one\n", "KNOB=1\n")
    ok(node["run"]("seed"))
    before = node["state"]()
    # The first run changed the env file and died before the restart (no promote, no record).
    node["live"]("a" * 16, "unit one\n", "KNOB=2\n")
    ok(node["run"]("seed"))
    ok(node["run"]("promote"))
    ok(node["run"]("record"))
    ok(node["run"]("restore"))
    assert node["state"]() == before


def test_no_change_keeps_the_rollback(node):
    node["venv_dir"]("a" * 16)
    node["live"]("a" * 16, "unit one\n", "KNOB=1\n")
    ok(node["run"]("seed"))
    deploy(node, "b" * 16, "unit two\n", "KNOB=2\n")
    previous = node["look"]()["previous"]
    # A run that changes nothing: the release still live is no rollback of itself.
    assert "still live" in ok(node["run"]("promote")).stdout
    assert node["look"]()["previous"] == previous


@pytest.mark.parametrize("damage, problem", [
    ("missing", "its venv {dir} is missing"),
    ("incomplete", "its venv {dir} is incomplete (no .complete)"),
    ("no python", "its venv {dir} has no bin/python"),
])
def test_a_rollback_to_a_venv_gone_is_refused_and_changes_nothing(node, damage, problem):
    node["venv_dir"]("a" * 16)
    node["live"]("a" * 16, "unit one\n", "KNOB=1\n")
    ok(node["run"]("seed"))
    deploy(node, "b" * 16, "unit two\n", "KNOB=2\n")
    old = node["root"] / "venvs" / ("a" * 16)
    {"missing": lambda: shutil.rmtree(old),
     "incomplete": lambda: (old / ".complete").unlink(),
     "no python": lambda: (old / "bin" / "python").unlink()}[damage]()
    after = node["state"]()
    refused = node["run"]("restore")
    assert (refused.returncode, refused.stderr.strip()) == (3, problem.format(dir=old))
    assert node["state"]() == after
    assert node["look"]()["previous_problem"] == problem.format(dir=old)


def test_an_adopted_hand_built_venv_is_the_rollback(node):
    (node["venv"] / "bin").mkdir(parents=True)
    (node["venv"] / "bin" / "python").write_text("#!/bin/sh\n")
    (node["venv"] / "bin" / "python").chmod(0o755)
    node["unit"].write_text("unit one\n")
    node["env"].write_text("KNOB=1\n")
    ok(node["run"]("seed"))
    # build-venv.sh adopts it: names it previous, moves it under venvs/, links the new one.
    adopted = "adopted-20261202T000000Z"
    (node["root"] / "venvs" / "previous").symlink_to(adopted)
    node["venv"].rename(node["root"] / "venvs" / adopted)
    node["venv_dir"]("b" * 16)
    node["live"]("b" * 16, "unit two\n", "KNOB=2\n")
    ok(node["run"]("promote"))
    assert node["look"]()["previous_venv"] == f"venvs/{adopted}"
    ok(node["run"]("record"))
    ok(node["run"]("restore"))
    assert os.readlink(node["venv"]) == f"venvs/{adopted}"
    assert node["unit"].read_text() == "unit one\n" and node["env"].read_text() == "KNOB=1\n"


@pytest.mark.parametrize("action", ["seed", "promote", "record"])
def test_a_bare_node_gets_no_venv_root_from_a_release_step(node, action):
    # A bare node: no venv root yet. release.sh runs under umask 077, so a venv root it
    # made would be 0700 and close the service user out of its venv (issue 32): the venv
    # step makes the root, with its mode, from the layout (bringup/layout.py).
    shutil.rmtree(node["root"])
    node["unit"].write_text("unit\n")
    done = ok(node["run"](action))
    assert "no release recorded" in done.stdout
    assert not node["root"].exists()


def test_the_releases_directory_is_made_alone_under_the_venv_root(node):
    node["root"].chmod(0o755)
    node["venv_dir"]("a" * 16)
    node["live"]("a" * 16, "unit one\n", "KNOB=1\n")
    ok(node["run"]("seed"))
    assert stat.S_IMODE(node["releases"].stat().st_mode) == 0o700
    assert stat.S_IMODE(node["root"].stat().st_mode) == 0o755
