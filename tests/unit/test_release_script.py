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

from bringup.release import parse_look, pending

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
    (etc / "sglang").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if os.geteuid() != 0:
        # chown and install -o/-g need root; the modes and contents are what matters here.
        (bin_dir / "chown").write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / "install").write_text('#!/bin/sh\nm=0644\nwhile [ $# -gt 2 ]; do case $1 in -m) m=$2; shift ;; '
                                         '-o|-g) shift ;; --) ;; esac; shift; done\ncp -- "$1" "$2" && chmod "$m" "$2"\n')
        for name in ("chown", "install"):
            (bin_dir / name).chmod(0o755)
    paths = {"root": root, "venv": root / "venv", "unit": etc / "sglang.service", "env": etc / "sglang" / "sglang.env",
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

    def run(action, path=None, **extra):
        env = {**os.environ, "PATH": f"{path or bin_dir}:{os.environ['PATH']}", "RELEASES": str(paths["releases"]),
               "VENV": str(paths["venv"]), "VENVS": str(root / "venvs"), "UNIT": str(paths["unit"]),
               "ENV_FILE": str(paths["env"]), **extra}
        # A session of its own: a kill stand-in ends the whole run (kill 0), as a lost
        # SSH session or a killed control process would.
        return subprocess.run(["sh", str(RELEASE), action], env=env, capture_output=True, text=True, timeout=30,
                              start_new_session=True, check=False)

    def look():
        done = ok(run("look"))
        assert SECRET not in done.stdout + done.stderr
        return parse_look(done.stdout.splitlines())

    def state():
        """What a rollback must put back: the link's target and the files' digests and modes."""
        return (os.readlink(paths["venv"]) if paths["venv"].is_symlink() else "dir", sha(paths["unit"]),
                sha(paths["env"]), stat.S_IMODE(paths["env"].stat().st_mode))

    return {**paths, "venv_dir": venv, "live": live, "run": run, "look": look, "state": state, "bin": bin_dir,
            "tmp": tmp_path}


def ok(done):
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def refused(done):
    """The one line of a restore that refused (exit 3, nothing changed)."""
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == "state=unchanged", done.stderr
    return done.stderr.splitlines()[-1]


def rollback(node):
    """rollback.py on the node: restore, (restart), settle."""
    ok(node["run"]("restore"))
    ok(node["run"]("settle"))


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
    assert refused(node["run"]("restore")) == "no previous release recorded"


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
    rollback(node)
    assert node["state"]() == before
    # The failed venv stays for inspection; a second rollback has nothing to go back to.
    assert (node["root"] / "venvs" / ("b" * 16) / "bin" / "python").exists()
    assert node["look"]()["current"] == node["look"]()["live"]
    assert refused(node["run"]("restore")) == "no previous release recorded"
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
    rollback(node)
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
    assert refused(node["run"]("restore")) == problem.format(dir=old)
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
    rollback(node)
    assert os.readlink(node["venv"]) == f"venvs/{adopted}"
    assert node["unit"].read_text() == "unit one\n" and node["env"].read_text() == "KNOB=1\n"



# ------------------------------------------------ restore: all three or none (issue 33, 5)

# mv as it is, except the one whose arguments hold a word of $FAIL_MV (a rename that
# fails midway: an I/O error, a file system gone read-only).
FAILING_MV = """#!/bin/sh
for pattern in $FAIL_MV; do
    case " $* " in *"$pattern"*) echo "mv: cannot move: Input/output error" >&2; exit 1 ;; esac
done
PATH=${PATH#*:} exec mv "$@"
"""
# A command that changes files, counted; the $KILL_AT-th ends the whole run (kill 0: the
# script and everything it started, no trap runs), as a lost session would.
KILLING = """#!/bin/sh
n=$(( $(cat "$KILL_COUNT" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$KILL_COUNT"
[ "$n" = "$KILL_AT" ] && kill -KILL 0
PATH=${PATH#*:} exec @name@ "$@"
"""


def stand_ins(node, name, text, commands):
    directory = node["tmp"] / name
    directory.mkdir(exist_ok=True)
    for command in commands:
        (directory / command).write_text(text.replace("@name@", command))
        (directory / command).chmod(0o755)
    return f"{directory}:{node['bin']}"


def changed(node):
    """A node on release b after a change from release a (the rollback's way back): returns
    (the state before the change, the state now)."""
    node["venv_dir"]("a" * 16)
    node["live"]("a" * 16, "unit one\n", f"HF_TOKEN={SECRET}\nKNOB=1\n")
    ok(node["run"]("seed"))
    before = node["state"]()
    deploy(node, "b" * 16, "unit two\n", f"HF_TOKEN={SECRET}\nKNOB=2\n")
    return before, node["state"]()


def records(node):
    """The records and their links, as they are (a refused restore leaves them so)."""
    return sorted((path.name, os.readlink(path) if path.is_symlink() else "") for path in node["releases"].iterdir())


def strays(node):
    """Stage files a restore left beside the destinations."""
    return sorted(path.name for folder in (node["root"], node["unit"].parent, node["env"].parent)
                  for path in folder.glob(".*release-*"))


def stat_line(node, part, line):
    """Rewrite the previous record's stat line of ``part`` (its owner and group, as they were)."""
    record = node["releases"] / node["look"]()["previous"] / "stat"
    record.write_text("".join(row if not row.startswith(part + " ") else line + "\n"
                              for row in record.read_text().splitlines(keepends=True)))


@pytest.mark.parametrize("damage, problem", [
    ("group gone", ("the env file {env} of the previous release belongs to group gone-group-33, which no longer "
                    "exists on this node")),
    ("owner gone", ("the unit {unit} of the previous release belongs to user gone-user-33, who no longer exists on "
                    "this node")),
    ("env dir missing", "the directory of the env file {env}, {env_dir}, is missing (or a link)"),
    ("record damaged", ("the previous release's record {record} does not match its digest (a copy changed or is "
                        "missing)")),
])
def test_a_restore_that_cannot_put_all_three_back_changes_nothing(node, damage, problem):
    _, failed = changed(node)
    held = records(node)
    record = node["releases"] / node["look"]()["previous"]
    if damage == "group gone":
        stat_line(node, "env", "env 640 root gone-group-33")
    elif damage == "owner gone":
        stat_line(node, "unit", "unit 644 gone-user-33 root")
    elif damage == "env dir missing":
        shutil.rmtree(node["env"].parent)
    else:
        (record / "env").write_text("KNOB=planted\n")
    held = records(node)
    done = node["run"]("restore")
    assert refused(done) == problem.format(env=node["env"], unit=node["unit"], env_dir=node["env"].parent,
                                           record=record)
    assert SECRET not in done.stdout + done.stderr
    assert records(node) == held and strays(node) == []
    if damage != "env dir missing":
        assert node["state"]() == failed
    else:
        # Nothing of the rest moved either.
        assert os.readlink(node["venv"]) == "venvs/" + "b" * 16 and node["unit"].read_text() == "unit two\n"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a read-only bind mount needs root")
def test_a_read_only_env_directory_refuses_the_restore_before_anything_moves(node):
    before, failed = changed(node)
    folder = node["env"].parent
    env = {**os.environ, "RELEASES": str(node["releases"]), "VENV": str(node["venv"]),
           "VENVS": str(node["root"] / "venvs"), "UNIT": str(node["unit"]), "ENV_FILE": str(node["env"])}
    # The env file's directory read-only in a mount namespace of the run's own (a read-only /etc).
    script = (f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
              f"exec sh {RELEASE} restore")
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env, capture_output=True, text=True, timeout=30,
                          check=False)
    if "mount" in done.stderr and done.returncode not in (3,):
        pytest.skip(f"no mount namespace here: {done.stderr.strip()}")
    assert refused(done) == (f"the directory of the env file {node['env']}, {folder}, is not writable "
                             "(a read-only file system?)")
    assert node["state"]() == failed and strays(node) == []
    rollback(node)
    assert node["state"]() == before


def test_a_rename_that_fails_midway_puts_back_what_was_renamed(node):
    before, failed = changed(node)
    path = stand_ins(node, "failing", FAILING_MV, ["mv"])
    done = node["run"]("restore", path=path, FAIL_MV=".sglang.env.release-new")
    assert done.returncode == 4, done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == "state=as-before"
    assert done.stderr.splitlines()[-1] == (
        f"could not put the env file {node['env']} of the previous release in place (mv: cannot move: Input/output "
        f"error); the unit {node['unit']} put back: the node is as it was before the rollback")
    assert node["state"]() == failed and strays(node) == []
    assert node["look"]()["previous_problem"] == ""
    # The cause gone, the same rollback puts all three back.
    rollback(node)
    assert node["state"]() == before


def test_a_put_back_that_fails_too_says_which_files_are_whose(node):
    before, _ = changed(node)
    path = stand_ins(node, "failing", FAILING_MV, ["mv"])
    done = node["run"]("restore", path=path, FAIL_MV=".sglang.env.release-new .sglang.service.release-old")
    assert done.returncode == 5, done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == "state=mixed"
    line = done.stderr.splitlines()[-1]
    assert (f"and could not put back the unit {node['unit']}: the node has the unit {node['unit']} of the previous "
            "release with the other files of the release it ran") in line, line
    assert "nothing changed" not in line
    assert node["unit"].read_text() == "unit one\n" and node["env"].read_text().endswith("KNOB=2\n")
    rollback(node)
    assert node["state"]() == before


def test_a_restore_killed_at_any_step_converges_when_run_again(node):
    before, _ = changed(node)
    pristine = node["tmp"] / "pristine"
    trees = ("opt", "etc")
    for tree in trees:
        shutil.copytree(node["tmp"] / tree, pristine / tree, symlinks=True)
    path = stand_ins(node, "killing", KILLING, ["mv", "ln", "install", "rm", "cp"])
    count = node["tmp"] / "count"
    at = 0
    while True:
        at += 1
        for tree in trees:
            shutil.rmtree(node["tmp"] / tree)
            shutil.copytree(pristine / tree, node["tmp"] / tree, symlinks=True)
        count.unlink(missing_ok=True)
        killed = node["run"]("restore", path=path, KILL_AT=str(at), KILL_COUNT=str(count))
        steps = int(count.read_text())
        if steps < at:
            assert killed.returncode == 0, killed.stderr
            break
        assert killed.returncode == -9, (at, killed.returncode, killed.stderr)
        # Whatever it left, the rollback run again puts the whole release back.
        rollback(node)
        assert node["state"]() == before, f"killed at step {at}"
        look = node["look"]()
        assert look["current"] == look["live"] and look["previous"] == "", f"killed at step {at}"
        assert strays(node) == [], f"killed at step {at}"
    assert at > 10, "the kill reached too few steps"


# --------------------------------- an adopted hand-built venv is found by its identity (issue 33, 13)

def build_venv(node, digest):
    """files/build-venv.sh for real, with tests/unit/test_build_venv.py's stand-ins."""
    from tests.unit.test_build_venv import PIP, PYTHON

    bin_dir = node["tmp"] / "build-bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for name, text in (("python", PYTHON), ("pip.in", PIP)):
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
    root = node["root"]
    (root / "locks").mkdir(exist_ok=True)
    (root / "locks" / f"{digest}.txt").write_text(f"packaging==26.4 # {digest}\n")
    (root / "locks" / "uv.txt").write_text("uv==0.11.1\n")
    env = {**os.environ, "PATH": f"{node['bin']}:{os.environ['PATH']}", "STANDIN_BIN": str(bin_dir),
           "STANDIN_LOG": str(node["tmp"] / "uv.log"), "VENV_LINK": str(node["venv"]),
           "VENV_DIRS": str(root / "venvs"), "VENV_DIGEST": digest, "VENV_LOCK": str(root / "locks" / f"{digest}.txt"),
           "VENV_UV_LOCK": str(root / "locks" / "uv.txt"), "VENV_TOOLS": str(root / "tools"),
           "VENV_CACHE": str(root / "cache"), "VENV_INSTALLER": "pip", "VENV_PYTHON": str(bin_dir / "python"),
           "VENV_TORCH_INFO": "", "VENV_RELEASES": str(node["releases"])}
    return ok(subprocess.run(["sh", str(ROOT / "files" / "build-venv.sh")], env=env, capture_output=True, text=True,
                             timeout=60, check=False))


def test_the_rollback_finds_the_adopted_hand_built_venv_after_a_failed_deploy_and_another_lock(node):
    # A hand-built venv at the live path, served; the first deploy records it.
    (node["venv"] / "bin").mkdir(parents=True)
    (node["venv"] / "bin" / "python").write_text("#!/bin/sh\n")
    (node["venv"] / "bin" / "python").chmod(0o755)
    (node["venv"] / "HAND-BUILT").write_text("the operator's\n")
    node["unit"].write_text("unit one\n")
    node["env"].write_text("KNOB=1\n")
    ok(node["run"]("seed"))
    # Deploy with lock a: the venv step adopts it (venvs/adopted-<time>), then the deploy
    # fails before the service step (no promote, no record).
    build_venv(node, "a" * 16)
    [adopted] = [path.parent.name for path in (node["root"] / "venvs").glob("adopted-*/HAND-BUILT")]
    # Deploy with lock b: venvs/previous now names a's venv, not the adopted one.
    ok(node["run"]("seed"))
    build_venv(node, "b" * 16)
    assert os.readlink(node["root"] / "venvs" / "previous") == "a" * 16
    node["unit"].write_text("unit two\n")
    node["env"].write_text("KNOB=2\n")
    ok(node["run"]("promote"))
    ok(node["run"]("record"))
    look = node["look"]()
    assert (look["previous_venv"], look["previous_problem"]) == (f"venvs/{adopted}", "")
    rollback(node)
    assert os.readlink(node["venv"]) == f"venvs/{adopted}"
    assert (node["venv"] / "HAND-BUILT").exists()
    assert node["unit"].read_text() == "unit one\n" and node["env"].read_text() == "KNOB=1\n"
    look = node["look"]()
    assert look["current"] == look["live"] and look["previous"] == ""


def test_a_hand_built_venv_replaced_by_another_is_not_the_one_recorded(node):
    (node["venv"] / "bin").mkdir(parents=True)
    (node["venv"] / "bin" / "python").write_text("#!/bin/sh\n")
    (node["venv"] / "bin" / "python").chmod(0o755)
    node["unit"].write_text("unit one\n")
    node["env"].write_text("KNOB=1\n")
    ok(node["run"]("seed"))
    node["unit"].write_text("unit two\n")
    ok(node["run"]("promote"))
    ok(node["run"]("record"))
    # Another directory at the same path (the recorded one deleted): not what ran.
    shutil.rmtree(node["venv"])
    (node["venv"] / "bin").mkdir(parents=True)
    (node["venv"] / "bin" / "python").write_text("#!/bin/sh\n")
    (node["venv"] / "bin" / "python").chmod(0o755)
    problem = f"the hand-built venv it ran is no longer at {node['venv']} nor under {node['root'] / 'venvs'}"
    assert refused(node["run"]("restore")) == problem


def test_the_adopted_hand_built_venv_is_found_after_a_reboot_renumbered_its_device(node):
    # review of issue 33, class "half-done and reported done" (finding 13 after a reboot):
    # a device number is not kept across reboots (dynamic NVMe or device-mapper minors, a
    # btrfs subvolume's anonymous device); the inode and the birth time are.
    (node["venv"] / "bin").mkdir(parents=True)
    (node["venv"] / "bin" / "python").write_text("#!/bin/sh\n")
    (node["venv"] / "bin" / "python").chmod(0o755)
    (node["venv"] / "HAND-BUILT").write_text("the operator's\n")
    node["unit"].write_text("unit one\n")
    node["env"].write_text("KNOB=1\n")
    ok(node["run"]("seed"))
    build_venv(node, "a" * 16)
    [adopted] = [path.parent.name for path in (node["root"] / "venvs").glob("adopted-*/HAND-BUILT")]
    # The node rebooted: the same directory now has another device number.
    [identity] = {path.resolve() for path in node["releases"].glob("*/venv_id")}
    device, rest = identity.read_text().split(" ", 1)
    if rest.split(" ", 1)[1].strip() == "-":
        pytest.skip("this file system records no birth time")
    identity.write_text(f"{int(device) + 1} {rest}")
    node["unit"].write_text("unit two\n")
    node["env"].write_text("KNOB=2\n")
    ok(node["run"]("promote"))
    ok(node["run"]("record"))
    assert node["look"]()["previous_venv"] == f"venvs/{adopted}"
    rollback(node)
    assert os.readlink(node["venv"]) == f"venvs/{adopted}" and node["unit"].read_text() == "unit one\n"


def test_a_rollback_killed_before_the_restart_is_pending_for_deploy(node):
    # Review of issue 33, class "convergence by did I write it": releases/current names
    # what the service was last started with. A rollback killed after the restore and
    # before systemd's restart has not started it: deploy's service step must see the
    # release live and not started (pending) and restart for it.
    before, _ = changed(node)
    ok(node["run"]("restore"))
    assert node["state"]() == before
    look = node["look"]()
    assert pending(look), look
    # rollback.py run again: the same restore, the restart, then settle.
    rollback(node)
    look = node["look"]()
    assert look["current"] == look["live"] and look["previous"] == "" and not pending(look)
    assert node["state"]() == before


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


def test_the_look_says_a_seed_records_only_a_unit_under_a_venv_root(node):
    # deploy seeds only when it would record (tasks/operations/release.py): a node whose
    # seed records nothing (no unit, or no venv root yet) reports no change at every run.
    node["venv_dir"]("a" * 16)
    assert node["look"]()["recordable"] == ""
    node["live"]("a" * 16, "unit one\n", "KNOB=1\n")
    assert node["look"]()["recordable"] == "yes"
    shutil.rmtree(node["root"])
    assert node["look"]()["recordable"] == ""


def test_the_releases_directory_is_made_alone_under_the_venv_root(node):
    node["root"].chmod(0o755)
    node["venv_dir"]("a" * 16)
    node["live"]("a" * 16, "unit one\n", "KNOB=1\n")
    ok(node["run"]("seed"))
    assert stat.S_IMODE(node["releases"].stat().st_mode) == 0o700
    assert stat.S_IMODE(node["root"].stat().st_mode) == 0o755
