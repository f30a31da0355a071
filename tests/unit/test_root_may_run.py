"""One rule for "may root run this" (files/root-may-run.sh, docs/security.md), run here
for real as root on a copy of this machine's CPython prefix (/usr/bin/python3.11 and its
stdlib) in a scratch directory, with a throwaway user (daemon, uid 1) owning one part of
it at a time: the interpreter's own lib/python3.11, a sitecustomize.py, a .pth file in
site-packages, lib-dynload, libpython, pyvenv.cfg, a group-writable stdlib module, a link
in the stdlib to another user's file, a link hop in a directory every user may write.

Each is refused by the real probe (files/probe.d/ through facts/probe_script.py: the
venv_python fact names who and which path, the plan says VENV_PYTHON_UNUSABLE with the
fix) and by the real files/build-venv.sh (one line, nothing written), and a marker the
prefix's root-owned sitecustomize.py writes whenever the interpreter starts proves it
never ran. The same prefix root's alone is run (the marker says uid 0: the contrast
that makes the refusals mean something). Each check of the rule is needed: the script
with that check cut out lets its variant through (the mutation cases)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.layout import NodeLayout, ProbeInputs
from bringup.platforms import operator_python
from bringup.versions import major_minor
from facts.node import probe_command
from facts.probe_output import build_document

ROOT = Path(__file__).resolve().parents[2]
RULE = ROOT / "files" / "root-may-run.sh"
BUILD_VENV = ROOT / "files" / "build-venv.sh"
CPYTHON = Path("/usr/bin/python3.11")
STDLIB = Path("/usr/lib/python3.11")
THROWAWAY = 1  # daemon: owns nothing of the prefix on a real node
pytestmark = pytest.mark.skipif(not CPYTHON.exists() or not STDLIB.is_dir(),
                                reason="needs Debian 12's CPython 3.11 to copy (the sandbox machines have it)")


@pytest.fixture
def scratch(tmp_path):
    """Directories root alone may change, up to / (the test runs as root, the probe's
    and the build's user on a node)."""
    if os.geteuid() != 0:
        pytest.fail("the rule is about what root runs: run this suite as root (the sandbox machines do)")
    for folder in [tmp_path, *tmp_path.parents]:
        mode = folder.stat().st_mode
        assert folder.stat().st_uid == 0 and (not mode & 0o022 or mode & 0o1000), folder
    return tmp_path


@pytest.fixture
def prefix(scratch):
    """A copy of the CPython prefix, root's alone (links copied as the files they name,
    so nothing done to the copy reaches the system's own files), with a sitecustomize.py
    that appends the uid it runs as to a marker each time the interpreter starts."""
    top = scratch / "py"
    (top / "bin").mkdir(parents=True)
    shutil.copy2(CPYTHON, top / "bin" / "python3.11")
    shutil.copytree(STDLIB, top / "lib" / "python3.11", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "test", "idlelib", "tkinter", "turtledemo",
                                                  "config-3.11-*", "lib2to3", "pydoc_data"))
    marker = scratch / "marker"
    site = top / "lib" / "python3.11" / "sitecustomize.py"
    site.unlink(missing_ok=True)
    site.write_text(f"import os\nwith open({str(marker)!r}, 'a') as f:\n    f.write('uid=%d\\n' % os.getuid())\n")
    site.chmod(0o644)
    return {"top": top, "python": top / "bin" / "python3.11", "marker": marker, "stdlib": top / "lib" / "python3.11"}


def theirs(path, text=None):
    """``path`` (written with ``text`` when given) owned by the throwaway user."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is not None:
        path.write_text(text)
    os.chown(path, THROWAWAY, THROWAWAY, follow_symlinks=False)
    return path


def prefix_dir(p):
    return "daemon", theirs(p["stdlib"]), p["python"]


def sitecustomize(p):
    site = p["stdlib"] / "sitecustomize.py"
    return "daemon", theirs(site), p["python"]


def pth_file(p):
    return "daemon", theirs(p["stdlib"] / "site-packages" / "evil.pth", "import os\n"), p["python"]


def lib_dynload(p):
    return "daemon", theirs(p["stdlib"] / "lib-dynload" / "_evil.cpython-311-x86_64-linux-gnu.so", ""), p["python"]


def libpython(p):
    return "daemon", theirs(p["top"] / "lib" / "libpython3.11.so.1.0", ""), p["python"]


def pyvenv_cfg(p):
    return "daemon", theirs(p["top"] / "bin" / "pyvenv.cfg", "home = /tmp\n"), p["python"]


def group_writable_module(p):
    module = p["stdlib"] / "os.py"
    module.chmod(0o664)
    return "nobody", module, p["python"]


def stdlib_link_elsewhere(p):
    elsewhere = theirs(p["top"].parent / "elsewhere" / "sitecustomize.py", "")
    site = p["stdlib"] / "sitecustomize.py"
    os.replace(site, p["top"].parent / "kept-sitecustomize.py")
    site.symlink_to(elsewhere)
    return "daemon", elsewhere, p["python"]


def link_hop_in_open_dir(p):
    links = p["top"].parent / "links"
    links.mkdir()
    (links / "python3.11").symlink_to(p["python"])
    links.chmod(0o777)
    return "nobody", links, links / "python3.11"


def not_named_python(p):
    """venv_python may name a CPython by any name: the rule is told it is one."""
    shutil.copy2(p["python"], p["top"] / "bin" / "cpython")
    return "daemon", theirs(p["stdlib"] / "site-packages" / "evil.pth", "import os\n"), p["top"] / "bin" / "cpython"


def sticky_site_packages(p):
    """Sticky keeps others from renaming root's entries, not from adding a .pth."""
    site = p["stdlib"] / "site-packages"
    site.mkdir(exist_ok=True)
    site.chmod(0o1777)
    return "nobody", site, p["python"]


def linked_site_packages(p):
    """site-packages a link to a root-owned directory holding another user's .pth."""
    elsewhere = p["top"].parent / "shared-site"
    elsewhere.mkdir()
    theirs(elsewhere / "evil.pth", "import os\n")
    shutil.rmtree(p["stdlib"] / "site-packages", ignore_errors=True)
    (p["stdlib"] / "site-packages").symlink_to(elsewhere)
    return "daemon", p["stdlib"] / "site-packages" / "evil.pth", p["python"]


def sticky_bin(p):
    """A sticky bin/ every user may add to: a pyvenv.cfg there would move its home."""
    (p["top"] / "bin").chmod(0o1777)
    return "nobody", p["top"] / "bin", p["python"]


def link_through_their_directory(p):
    """A link in a directory on the way (not the last component) names a link in a
    directory another user owns: they may point it at a tree of their own."""
    home = p["top"].parent / "home-u"
    home.mkdir()
    (home / "py").symlink_to(p["top"])
    os.chown(home, THROWAWAY, THROWAWAY)
    apps = p["top"].parent / "apps"
    apps.mkdir()
    (apps / "py").symlink_to(home / "py")
    return "daemon", home, apps / "py" / "bin" / "python3.11"


def beside_its_lib(p):
    """An interpreter beside lib/ (no bin/): CPython finds its stdlib searching up from
    its own directory, so that is the prefix judged."""
    named = p["top"] / "python3.11"
    shutil.copy2(p["python"], named)
    return "daemon", theirs(p["stdlib"] / "sitecustomize.py"), named


def copied_venv_home(p):
    """A venv whose python is a copy (venv --copies): CPython loads the stdlib of the
    home its root-owned pyvenv.cfg names, not of the venv."""
    venv = p["top"].parent / "copies-venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy2(p["python"], venv / "bin" / "python3.11")
    (venv / "pyvenv.cfg").write_text(f"home = {p['top'] / 'bin'}\n")
    return "daemon", theirs(p["stdlib"] / "sitecustomize.py"), venv / "bin" / "python3.11"


# variant -> the rule's check that refuses it (cut out in the mutation cases)
VARIANTS = {
    "prefix lib/python3.11": (prefix_dir, "rmr_tree"),
    "sitecustomize.py": (sitecustomize, "rmr_tree"),
    ".pth in site-packages": (pth_file, "rmr_tree"),
    "lib-dynload": (lib_dynload, "rmr_tree"),
    "libpython": (libpython, "rmr_interpreter"),
    "pyvenv.cfg": (pyvenv_cfg, "rmr_interpreter"),
    "group-writable module": (group_writable_module, "rmr_tree"),
    "stdlib link to another user's file": (stdlib_link_elsewhere, "rmr_tree"),
    # Two checks see it: the hop's directory, and the bin/ CPython reads pyvenv.cfg from.
    "link hop in a 0777 directory": (link_hop_in_open_dir, ("rmr_file", "rmr_interpreter")),
    "an interpreter not named python": (not_named_python, "rmr_tree"),
    "sticky world-writable site-packages": (sticky_site_packages, "rmr_tree"),
    "site-packages linked to another user's .pth": (linked_site_packages, "rmr_tree"),
    "sticky world-writable bin": (sticky_bin, "rmr_interpreter"),
    "a directory link through another user's directory": (link_through_their_directory, "rmr_file"),
    "an interpreter beside its lib, no bin": (beside_its_lib, "rmr_getpath"),
    "a copied venv python loading its home's stdlib": (copied_venv_home, "rmr_getpath"),
}


def probe(scratch, interpreter):
    layout = NodeLayout.for_settings("/nonexistent", "/nonexistent", str(scratch / "cache"), "sglang")
    command = probe_command(ProbeInputs(layout, (), venv_python=str(interpreter)), ("python",))
    result = subprocess.run(["sh", "-c", command], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                            timeout=120, check=True)
    return build_document(result.stdout.splitlines(), ["venv_python"])["venv_python"]


def build_venv(scratch, interpreter):
    root = scratch / "opt"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "VENV_LINK": str(root / "venv"), "VENV_DIRS": str(root / "venvs"),
           "VENV_DIGEST": "0123456789abcdef", "VENV_LOCK": str(scratch / "lock.txt"),
           "VENV_UV_LOCK": str(scratch / "uv.txt"), "VENV_TOOLS": str(root / "tools"),
           "VENV_CACHE": str(root / "cache"), "VENV_INSTALLER": "pip", "VENV_PYTHON": str(interpreter),
           "VENV_TORCH_INFO": "", "VENV_RELEASES": str(root / "releases")}
    (scratch / "lock.txt").write_text("")
    return subprocess.run(["sh", str(BUILD_VENV), "--no-index"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def judge(program):
    """files/root-may-run.sh run as a program on ``program``."""
    return subprocess.run(["sh", str(RULE), str(program)], capture_output=True, text=True, timeout=60, check=False)


def test_the_prefix_roots_alone_is_run_as_root(scratch, prefix):
    """The contrast: the copy runs, and its sitecustomize.py says so (uid 0)."""
    found = probe(scratch, prefix["python"])
    assert found["owner"] is None and found["blocked"] is None and found["ran"] == 0, found
    assert operator_python(str(prefix["python"]), found, major_minor("3.11"))[1] is None
    assert prefix["marker"].read_text().splitlines()[0] == "uid=0"
    rule = judge(prefix["python"])
    assert rule.returncode == 0 and rule.stderr == "", rule.stderr


@pytest.mark.parametrize("variant", VARIANTS, ids=list(VARIANTS))
def test_the_probe_refuses_an_interpreter_whose_prefix_another_user_may_change(scratch, prefix, variant):
    who, blocked, named = VARIANTS[variant][0](prefix)
    found = probe(scratch, named)
    assert (found["owner"], found["blocked"]) == (who, str(blocked)), found
    assert found["ran"] is None and found["version"] is None, found
    assert not prefix["marker"].exists(), "root ran an interpreter another user may change: " + \
        prefix["marker"].read_text()
    choice, problem = operator_python(str(named), found, major_minor("3.11"))
    assert choice is None and f"can be changed by {who} through {blocked}" in problem[0], problem
    assert f"chown -R root: {blocked} && chmod -R go-w {blocked}" in problem[1], problem


@pytest.mark.parametrize("variant", VARIANTS, ids=list(VARIANTS))
def test_build_venv_refuses_it_in_one_line_and_writes_nothing(scratch, prefix, variant):
    who, blocked, named = VARIANTS[variant][0](prefix)
    run = build_venv(scratch, named)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"root never runs {named}: {who} may change "
                                                                 f"{blocked} "), run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert not (scratch / "opt").exists(), "build-venv.sh wrote before it refused"
    assert not prefix["marker"].exists(), "build-venv.sh ran an interpreter another user may change"


def test_build_venv_runs_a_prefix_roots_alone(scratch, prefix):
    """The contrast for the build: past the rule, the interpreter runs (python -m venv)."""
    run = build_venv(scratch, prefix["python"])
    assert "root never runs" not in run.stderr, run.stderr
    assert prefix["marker"].read_text().startswith("uid=0"), run.stdout + run.stderr


def mutated(scratch, checks):
    """files/root-may-run.sh with its checks ``checks`` (a name or a tuple) cut out: each
    function returns 0 at once."""
    text = RULE.read_text()
    for check in (checks,) if isinstance(checks, str) else checks:
        head = f"{check}() {{\n"
        assert text.count(head) == 1, check
        text = text.replace(head, head + "    return 0\n")
    path = scratch / "root-may-run-cut.sh"
    path.write_text(text)
    return path


@pytest.mark.parametrize("variant", VARIANTS, ids=list(VARIANTS))
def test_each_check_of_the_rule_is_what_refuses_its_variant(scratch, prefix, variant):
    make, check = VARIANTS[variant]
    _, _, named = make(prefix)
    whole = subprocess.run(["sh", "-c", '. "$1"; root_may_run "$2" interpreter', "sh", str(RULE), str(named)],
                           capture_output=True, text=True, timeout=60, check=False)
    assert whole.returncode == 1, whole.stdout
    cut = subprocess.run(["sh", "-c", '. "$1"; root_may_run "$2" interpreter', "sh", str(mutated(scratch, check)),
                          str(named)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert cut.returncode == 0 and cut.stdout == "", f"without {check} the rule still refused: {cut.stdout}"


def test_a_script_is_judged_with_the_interpreter_its_first_line_names(scratch, prefix):
    """#!: the kernel runs the interpreter named there, so the rule follows it."""
    script = scratch / "bin" / "tool"
    script.parent.mkdir()
    script.write_text(f"#!{prefix['python']} -I\nprint('hi')\n")
    script.chmod(0o755)
    rule = judge(script)
    assert rule.returncode == 0, rule.stderr
    theirs(prefix["stdlib"] / "site-packages" / "evil.pth", "import os\n")
    rule = judge(script)
    assert rule.returncode == 1 and f"daemon may change {prefix['stdlib']}/site-packages/evil.pth" in rule.stderr


@pytest.mark.parametrize("where", ["interpreter", "venv"])
def test_the_probe_asks_a_venvs_python_as_the_owner_of_its_interpreters_prefix(scratch, prefix, where):
    """A root-owned venv whose python is the copied CPython: its torch query (the probe's
    venv section) runs as root only while the interpreter's prefix and the venv's own
    files are root's alone, else as the user who may change them (daemon cannot write
    the marker: root's directory)."""
    venv = scratch / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(prefix["python"])
    layout = NodeLayout.for_settings(str(venv), "/nonexistent", str(scratch / "cache"), "sglang")

    def venv_section():
        command = probe_command(ProbeInputs(layout, ()), ("venv",))
        out = subprocess.run(["sh", "-c", command], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                             timeout=120, check=True).stdout
        return next(line for line in out.splitlines() if line.startswith("@@ venv "))

    assert "user=" not in venv_section()
    assert prefix["marker"].read_text().splitlines() == ["uid=0"]
    prefix["marker"].unlink()
    site = prefix["stdlib"] if where == "interpreter" else venv / "lib" / "python3.11"
    theirs(site / "site-packages" / "evil.pth", "import os\n")
    assert "user=daemon" in venv_section()
    assert not prefix["marker"].exists(), "root ran a venv's python whose prefix another user may change"


EVIL_LIBRARY = """#include <stdio.h>
__attribute__((constructor)) static void ran(void) { FILE *f = fopen("%s", "a"); if (f) fclose(f); }
int evil(void) { return 0; }
"""


@pytest.mark.parametrize("mode", [0o755, 0o700])
def test_a_library_the_loader_finds_in_another_users_directory_is_refused(scratch, prefix, mode):
    """The libraries the system's loader lists for the interpreter (its RUNPATH here) are
    judged too, also when nobody may not read it (0700): a listing that is empty because
    it failed never passes. Cut rmr_libraries and it passes."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler to build an interpreter with a RUNPATH")
    ulib = scratch / "ulib"
    ulib.mkdir()
    (scratch / "evil.c").write_text(EVIL_LIBRARY % (scratch / "lib-ran"))
    (scratch / "main.c").write_text("int evil(void);\nint main(void) { return evil(); }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(ulib / "libevil.so"), str(scratch / "evil.c")], check=True)
    program = prefix["python"]
    subprocess.run([cc, "-o", str(program), str(scratch / "main.c"), f"-L{ulib}", "-levil", f"-Wl,-rpath,{ulib}"],
                   check=True)
    program.chmod(mode)
    theirs(ulib / "libevil.so")
    theirs(ulib)
    rule = judge(program)
    assert rule.returncode == 1 and f"daemon may change {ulib}" in rule.stderr, rule.stderr
    cut = subprocess.run(["sh", "-c", '. "$1"; root_may_run "$2" interpreter', "sh",
                          str(mutated(scratch, "rmr_libraries")), str(program)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert cut.returncode == 0, cut.stdout
    assert not (scratch / "lib-ran").exists()
