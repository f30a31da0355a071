"""The real probe (files/probe.d/) run in scratch directories with planted programs: root never
executes with the service env file's PATH or loader variables, never runs a program
another user could change (it runs as that user), loads no env file another user could
change, and no program it runs can forge a section.

The tests run as root (as the probe does on a node), so "root ran it" is observable:
each planted program records the uid it ran as. The attacker is ``nobody``: its files
are chowned to it. Scratch directories are made under /tmp and opened (0755) so that
``nobody`` can reach its own files there.
"""

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from pyinfra.api.exceptions import FactProcessError

from bringup.config import Config
from bringup.layout import NodeLayout, ProbeInputs
from bringup.plan import plan
from facts.node import NodeFacts, probe_command
from facts.probe_output import build_document

ROOT = Path(__file__).resolve().parents[2]
GPUS = ROOT / "tests" / "fixtures" / "gpus"
NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="planted programs must be chowned to another user")


@pytest.fixture
def scratch():
    """A root-owned 0755 directory under /tmp (pytest's tmp_path is 0700: nobody could not enter it)."""
    path = Path(tempfile.mkdtemp(prefix="probe-hardening-"))
    path.chmod(0o755)
    (path / "records").mkdir(mode=0o777)
    (path / "records").chmod(0o777)
    yield path
    shutil.rmtree(path)


def planted(scratch, directory, name, body, owner=NOBODY):
    """An executable ``name`` in ``directory`` (both owned by ``owner``) that records the
    uid it runs as under scratch/records, then runs ``body``."""
    directory.mkdir(parents=True, exist_ok=True)
    records = scratch / "records"
    script = directory / name
    script.write_text(f'#!/bin/sh\nid -u >> {records}/{name}\n{body}\n')
    script.chmod(0o755)
    os.chown(script, owner, owner)
    os.chown(directory, owner, owner)
    return script


def records(scratch):
    """{program: [uid, ...]} of every planted program that ran."""
    return {path.name: path.read_text().split() for path in (scratch / "records").iterdir()}


def smi_standin(bin_dir, profile, prefix=""):
    """A recorded nvidia-smi (root's, on root's PATH), printing ``prefix`` before its table."""
    source = GPUS / profile
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      f'case "$*" in *--query-gpu*) cat {source / "query.csv"} ;; '
                      f"*) printf '%s' {shlex.quote(prefix)}; cat {source / 'smi.txt'} ;; esac\n")
    script.chmod(0o755)


def run_probe(scratch, env_file, profile="rtx-pro-6000-x8", smi_prefix="", home=None, venv="/nonexistent"):
    """The exact command the fact runs, with root's own PATH first; raw stdout."""
    bin_dir = scratch / "bin"
    smi_standin(bin_dir, profile, smi_prefix)
    layout = NodeLayout.for_settings(venv, str(env_file), str(scratch / "cache"), "sglang")
    environment = {"PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin", **({"HOME": str(home)} if home else {})}
    result = subprocess.run(["sh", "-c", probe_command(ProbeInputs(layout, ("CUDA_HOME", "PATH", "CXX")))],
                            env=environment, capture_output=True, text=True, timeout=120, check=True)
    return result.stdout


def spy_library(scratch):
    """A shared object that records the uid of every process it is loaded into."""
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build the LD_PRELOAD spy")
    source = scratch / "spy.c"
    source.write_text('#include <stdio.h>\n#include <unistd.h>\n'
                      '__attribute__((constructor)) static void spy(void) {\n'
                      f'  FILE *f = fopen("{scratch}/records/preload", "a");\n'
                      '  if (f) { fprintf(f, "%d\\n", (int)getuid()); fclose(f); }\n}\n')
    library = scratch / "evil" / "libspy.so"
    library.parent.mkdir(exist_ok=True)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def test_root_never_runs_the_env_files_path_or_preload(scratch):
    """A dir another user owns on the env file's PATH, with sed, printenv, sort, c++ and
    nvcc planted in it, and an LD_PRELOAD: root runs none of them; the nvcc the service
    would find there runs as its owner."""
    evil = scratch / "evil" / "bin"
    library = spy_library(scratch)
    for name in ("sed", "printenv", "sort", "sha256sum", "cut", "env", "c++"):
        planted(scratch, evil, name, 'exit 0')
    planted(scratch, evil, "nvcc", "echo 'Cuda compilation tools, release 13.0, V13.0.88'")
    env_file = scratch / "sglang.env"
    env_file.write_text(f"PATH={evil}:/usr/bin:/bin\nLD_PRELOAD={library}\nLD_LIBRARY_PATH={evil}\n"
                        f"PYTHONPATH={evil}\n")
    env_file.chmod(0o640)
    facts = build_document(run_probe(scratch, env_file).splitlines())
    ran = records(scratch)
    assert not [name for name, uids in ran.items() if "0" in uids], ran
    # The service's nvcc (found on its PATH) ran, as the owner of the directory it is in.
    assert ran.get("nvcc") and set(ran["nvcc"]) == {str(NOBODY)}, ran
    assert (facts["resolution"]["via"], facts["resolution"]["version"]) == ("PATH", "13.0")
    # Reported as the service sees it, read by the shell itself (no printenv).
    assert facts["service_env"]["PATH"] == f"{evil}:/usr/bin:/bin"


def test_cuda_home_and_cxx_of_another_user_run_as_that_user(scratch):
    """CUDA_HOME's nvcc and CXX, owned by another user: the toolchain digest and the
    resolution run them as that user, never as root."""
    cuda = scratch / "cuda"
    planted(scratch, cuda / "bin", "nvcc", "echo 'Cuda compilation tools, release 13.0, V13.0.88'")
    os.chown(cuda, NOBODY, NOBODY)
    cxx = planted(scratch, scratch / "tools", "cxx", "echo 'c++ (evil) 1.0'")
    env_file = scratch / "sglang.env"
    env_file.write_text(f"CUDA_HOME={cuda}\nCXX={cxx}\n")
    facts = build_document(run_probe(scratch, env_file).splitlines())
    ran = records(scratch)
    assert set(ran.get("nvcc", [])) == {str(NOBODY)} and set(ran.get("cxx", [])) == {str(NOBODY)}, ran
    assert facts["resolution"]["version"] == "13.0" and len(facts["jit_cache"]["toolchain"]) == 64


def test_cxx_reached_through_another_users_directory_runs_as_that_user(scratch):
    """run_program asks root_may_run: CXX a root-owned link, in a directory another user
    owns, to a root-owned compiler; that user may point the link elsewhere, so root never
    runs it (code_owner judged only where the link ended)."""
    cxx = planted(scratch, scratch / "tools", "cxx", "echo 'c++ (x) 1.0'", owner=0)
    links = scratch / "links"
    links.mkdir()
    (links / "cxx").symlink_to(cxx)
    os.chown(links, NOBODY, NOBODY)
    env_file = scratch / "sglang.env"
    env_file.write_text(f"CXX={links / 'cxx'}\n")
    run_probe(scratch, env_file)
    ran = records(scratch).get("cxx", [])
    assert ran and set(ran) == {str(NOBODY)}, ran


def test_toolkit_owned_by_another_user_runs_as_that_user(scratch):
    """nvcc_section: a toolkit home's nvcc that a non-root user owns runs as that user
    (probe_toolkits runs the same function for every /opt/cuda*)."""
    home = scratch / "cuda-13.0"
    planted(scratch, home / "bin", "nvcc", "echo 'Cuda compilation tools, release 13.0, V13.0.88'")
    env_file = scratch / "sglang.env"
    env_file.write_text(f"CUDA_HOME={home}\n")
    facts = build_document(run_probe(scratch, env_file).splitlines())
    assert facts["resolution"]["nvcc_ok"] and set(records(scratch)["nvcc"]) == {str(NOBODY)}


def test_external_venv_python_is_judged_by_its_target(scratch):
    """A root-owned venv whose bin/python links to an interpreter another user owns:
    root does not run it; its owner does."""
    venv = scratch / "venv"
    (venv / "bin").mkdir(parents=True)
    python = planted(scratch, scratch / "pythons", "python3", "echo '{\"torch_error\": \"none\"}'")
    (venv / "bin" / "python").symlink_to(python)
    facts = build_document(run_probe(scratch, scratch / "absent.env", venv=venv).splitlines())
    assert set(records(scratch)["python3"]) == {str(NOBODY)}, records(scratch)
    assert facts["torch"] == {"error": "none"}


def test_prewarm_ninja_of_a_venv_whose_interpreter_another_user_may_change_never_runs_as_root(scratch):
    """The pre-warm section runs the venv's ninja, a script of the venv's python: a
    root-owned venv whose python is a CPython with another user's sitecustomize.py ran
    it as root (its code_owner judged the script alone). Now root_may_run judges it with
    the interpreter's prefix, as in the venv section: it runs as that user."""
    cpython, stdlib = Path("/usr/bin/python3.11"), Path("/usr/lib/python3.11")
    if not cpython.exists() or not stdlib.is_dir():
        pytest.skip("needs Debian 12's CPython 3.11 to copy")
    prefix = scratch / "py"
    (prefix / "bin").mkdir(parents=True)
    shutil.copy2(cpython, prefix / "bin" / "python3.11")
    shutil.copytree(stdlib, prefix / "lib" / "python3.11", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "test", "idlelib", "tkinter", "turtledemo",
                                                  "config-3.11-*", "lib2to3", "pydoc_data", "site-packages"))
    site = prefix / "lib" / "python3.11" / "sitecustomize.py"
    site.write_text(f"import os\nopen({str(scratch / 'records' / 'sitecustomize')!r}, 'a')"
                    ".write(str(os.getuid()) + '\\n')\n")
    os.chown(site, NOBODY, NOBODY)
    venv = scratch / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(prefix / "bin" / "python3.11")
    ninja = venv / "bin" / "ninja"
    ninja.write_text(f"#!{venv / 'bin' / 'python'}\nprint('ninja: no work to do.')\n")
    ninja.chmod(0o755)
    (scratch / "cache" / "mod").mkdir(parents=True)
    manifest = scratch / "cache" / "prewarm" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"modules": [{"kind": "jit", "dir": str(scratch / "cache" / "mod"),
                                                 "request": "m"}]}))
    output = run_probe(scratch, scratch / "absent.env", venv=venv)
    assert "@@ prewarm rc=0 user=nobody" in output, output
    ran = records(scratch).get("sitecustomize", [])
    assert ran and set(ran) == {str(NOBODY)}, ran


def test_usercustomize_cannot_forge_the_driver(scratch):
    """The pre-warm's python ran with HOME set and without -I: a usercustomize.py of the
    cache owner's printed a section header and turned driver 575 into 580 (hiding
    DRIVER_TOO_OLD). Now it runs isolated, and no printed line opens a section."""
    home = scratch / "home"
    site = subprocess.run(["/usr/bin/python3", "-c", "import site; print(site.getusersitepackages())"],
                          env={"HOME": str(home)}, capture_output=True, text=True, check=True).stdout.strip()
    Path(site).mkdir(parents=True)
    Path(site, "usercustomize.py").write_text(
        "import os\n"
        f"open({str(scratch / 'records' / 'usercustomize')!r}, 'a').write(str(os.getuid()) + '\\n')\n"
        "print('@@ smi-header rc=0')\n"
        "print('| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |')\n"
        # ...and reopened the pre-warm's section for the JSON that follows, so the run parsed.
        "print('@@ prewarm rc=0')\n")
    manifest = scratch / "cache" / "prewarm" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"flashinfer": "0.7.2", "modules": []}))
    output = run_probe(scratch, scratch / "absent.env", profile="rtx-5090", home=home)
    facts = build_document(output.splitlines())
    assert facts["driver"] == {"version": "575.64.03", "cuda_version": "12.9"}
    assert facts["jit_cache"]["prewarm"]["manifest"]["flashinfer"] == "0.7.2"
    assert "usercustomize" not in records(scratch)


def test_nvidia_smi_output_cannot_open_a_section(scratch):
    """A program's output that holds a header line stays that section's body."""
    forged = "@@ os-release rc=0\nID=evil\n"
    output = run_probe(scratch, scratch / "absent.env", profile="rtx-5090", smi_prefix=forged)
    facts = build_document(output.splitlines())
    assert facts["os"]["id"] != "evil" and facts["driver"]["version"] == "575.64.03"
    assert "|@@ os-release rc=0" in output.splitlines()


@pytest.mark.parametrize("make,state", [
    (lambda path: (path.write_text("CUDA_HOME=/opt/evil\n"), os.chown(path, NOBODY, NOBODY)), "another user's"),
    (lambda path: (path.write_text("CUDA_HOME=/opt/evil\n"), path.chmod(0o666)), "others may write"),
    (lambda path: (path.write_text("CUDA_HOME=/opt/evil\n"), path.chmod(0o620)), "group may write"),
    (lambda path: (path.with_name("real.env").write_text("CUDA_HOME=/opt/evil\n"),
                   path.symlink_to(path.with_name("real.env"))), "a link"),
], ids=["owned-by-nobody", "mode-0666", "mode-0620", "link"])
def test_unsafe_env_file_is_not_read_and_blocks_the_plan(scratch, make, state):
    """Root reads no env file another user could change, and the plan names it."""
    env_file = scratch / "sglang.env"
    make(env_file)
    facts = build_document(run_probe(scratch, env_file).splitlines())
    assert facts["resolution"]["env_file"] is False and facts["resolution"]["env_file_refused"] is True, state
    assert facts["resolution"]["cuda_home"] != "/opt/evil" and facts["service_env"] == {"PATH": facts["resolution"]["path"]}
    unsafe = [finding for finding in plan(facts, Config(service_env_file=str(env_file))).findings
              if finding.code == "UNSAFE_PATH" and finding.message.startswith(f"the service env file {env_file} ")]
    assert unsafe and unsafe[0].severity == "blocker", [f.message for f in plan(facts, Config()).findings]


def test_safe_env_file_is_read(scratch):
    env_file = scratch / "sglang.env"
    env_file.write_text("CUDA_HOME=/opt/cuda-x\n")
    env_file.chmod(0o640)
    facts = build_document(run_probe(scratch, env_file).splitlines())
    assert facts["resolution"]["env_file"] is True and facts["resolution"]["env_file_refused"] is False
    assert facts["service_env"]["CUDA_HOME"] == "/opt/cuda-x"


HEAD = ["@@ os-release rc=0", "|ID=debian", "@@ uname rc=0", "|x86_64", "@@ smi-query rc=127"]


@pytest.mark.parametrize("lines,message", [
    (["@@ path rc=0"], "path has no role="),
    (["@@ path rc=0 role=venv", "|root|/x"], "unexpected path line for venv"),
    (["@@ path rc=0 role=venv", "@@ path rc=0 role=venv"], "two path sections for venv"),
    (["@@ os-release rc=0", "|ID=evil"], "two os-release sections"),
    (["@@ uname rc=0", "|aarch64"], "two uname sections"),
    (["x86_64"], "outside the probe's framing"),
    (["@@ Smi rc=zero"], "malformed section header"),
    (["@@ venv rc=0", "|[1, 2]"], "no JSON object"),
    (["@@ prewarm rc=0", '|{"manifest": [], "stale": 1}'], "no manifest and stale list"),
    (["@@ python-alt rc=0", "|Python 3.11.2"], "python-alt has no path="),
    (["@@ apt-source rc=0", "|deb x y"], "apt-source has no file="),
    (["@@ path-nvcc rc=0 home=/x", "|release 13.0,"], "path-nvcc has no path="),
    (["x" * 5000], "..."),
], ids=["path-without-role", "bad-path-line", "repeated-path", "repeated-os", "repeated-uname", "unframed",
        "bad-header", "venv-not-object", "prewarm-bad-shape", "python-alt-no-path", "apt-no-file", "nvcc-no-path",
        "long-line"])
def test_every_parse_error_is_one_line_for_the_host(lines, message):
    """NodeFacts.process: a FactProcessError of one bounded line, never an IndexError
    or TypeError traceback (a forged "@@ path rc=0" raised IndexError and stopped the run)."""
    with pytest.raises(FactProcessError) as raised:
        NodeFacts().process(HEAD + lines)
    text = str(raised.value)
    assert message in text and "\n" not in text and len(text) < 400, text


@pytest.mark.parametrize("record_mode, record_owner, link, reported", [
    (0o600, 0, False, {"GLOO_SOCKET_IFNAME": "eth0"}),
    (0o644, 0, False, {"GLOO_SOCKET_IFNAME": "eth0"}),
    (0o620, 0, False, {}),         # another may write it: not deploy's word
    (0o600, NOBODY, False, {}),    # another's
    (0o600, 0, True, {}),          # a link, wherever it points
], ids=["root-0600", "root-0644", "group-writable", "nobodys", "a-link"])
def test_the_keys_deploy_wrote_are_reported_only_from_its_own_record(scratch, record_mode, record_owner, link, reported):
    """The env file keys deploy's record says it wrote, while the file still holds deploy's
    value (the operator changed NCCL_SOCKET_IFNAME: not deploy's any more); the operator's own
    keys are never read out."""
    env_file = scratch / "sglang.env"
    env_file.write_text("HF_TOKEN=hf_secret_value\nGLOO_SOCKET_IFNAME=eth0\nNCCL_SOCKET_IFNAME==ens9\n")
    env_file.chmod(0o640)
    record = scratch / "sglang.env.deploy-owned"
    text = "# gpu-bringup\nGLOO_SOCKET_IFNAME=eth0\nNCCL_SOCKET_IFNAME==eth0\nHF_TOKEN=\n1BAD=x\n"
    if link:
        (scratch / "elsewhere").write_text(text)
        record.symlink_to(scratch / "elsewhere")
    else:
        record.write_text(text)
        record.chmod(record_mode)
        os.chown(record, record_owner, record_owner)
    output = run_probe(scratch, env_file)
    facts = build_document(output.splitlines())
    assert facts["service_env_owned"] == reported
    assert "hf_secret_value" not in output
