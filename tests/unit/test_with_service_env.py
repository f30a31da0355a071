"""files/with-service-env run for real (sh, as root here): ``--as`` reads an env file
only root may read (an operator's 0600 file, which deploy never loosens), runs the
command as the service user with exactly the file's assignments, and root never runs a
program with the PATH or loader variables the file chose."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

FILES = Path(__file__).resolve().parents[2] / "files"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RECORDER = "#!/bin/sh\n/usr/bin/id -u >> {record}\n"



@pytest.fixture
def scratch():
    """libexec (the two scripts), a directory another user owns holding programs that
    record who ran them, and a 0600 root:root env file pointing PATH there."""
    if os.geteuid() != 0:
        pytest.fail("runs as root (runuser), as make test does", pytrace=False)
    # Not pytest's tmp_path: its parents are root's 0700, closed to the service user.
    tmp_path = Path(tempfile.mkdtemp(prefix="with-service-env-"))
    tmp_path.chmod(0o755)
    libexec = tmp_path / "libexec"
    libexec.mkdir()
    for name in ("with-service-env", "service-env.sh"):
        shutil.copy(FILES / name, libexec / name)
    planted = tmp_path / "planted"
    planted.mkdir()
    record = tmp_path / "record"
    record.touch()
    record.chmod(0o666)
    for program in ("runuser", "env", "sh", "id", "cat"):
        (planted / program).write_text(RECORDER.format(record=record))
        (planted / program).chmod(0o755)
    os.chown(planted, 65534, 65534)
    env_file = tmp_path / "sglang.env"
    env_file.write_text(f'PATH={planted}:{BASE_PATH}\nLD_LIBRARY_PATH={planted}\nHF_TOKEN="hf a  b"\nX=1\nX=2\n')
    env_file.chmod(0o600)
    yield libexec, env_file, record
    shutil.rmtree(tmp_path)


def run(libexec, *args):
    return subprocess.run(["sh", str(libexec / "with-service-env"), *args], capture_output=True, text=True,
                          env={"PATH": BASE_PATH}, timeout=30)


def test_as_reads_a_root_only_env_file_and_runs_the_command_as_the_user(scratch):
    libexec, env_file, record = scratch
    result = run(libexec, "--as", "nobody", "/nonexistent", BASE_PATH, str(env_file),
                 "/bin/sh", "-c", 'printf "%s|" "$(/usr/bin/id -un)" "$HF_TOKEN" "$X" "$HOME" "$LD_LIBRARY_PATH"')
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("|")[:4] == ["nobody", "hf a  b", "2", "/nonexistent"]
    assert result.stdout.split("|")[4].endswith("/planted")


def test_the_command_gets_a_services_umask_not_the_callers(scratch):
    """Under a hardened sudo's umask 0077 the command runs with systemd's default for a
    service (0022): the pre-warm's files get the modes the service's own would get."""
    libexec, env_file, _ = scratch
    result = subprocess.run(["sh", "-c", 'umask 077; exec sh "$0" "$@"', str(libexec / "with-service-env"),
                             "--as", "nobody", "/nonexistent", BASE_PATH, str(env_file), "/bin/sh", "-c", "umask"],
                            capture_output=True, text=True, env={"PATH": BASE_PATH}, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0022"


def test_root_never_runs_a_program_the_env_files_path_names(scratch):
    libexec, env_file, record = scratch
    # "env" and "sh" are found on the env file's PATH only by the service user's env.
    result = run(libexec, "--as", "nobody", "/nonexistent", BASE_PATH, str(env_file), "id", "-u")
    assert result.returncode == 0, result.stderr
    assert "0" not in record.read_text().split(), record.read_text()
    assert record.read_text().split() == ["65534"], "the command ran from the env file's PATH, as the user"


def test_without_as_the_reader_is_the_caller_and_a_file_it_cannot_read_is_one_line(scratch):
    libexec, env_file, _ = scratch
    result = subprocess.run(["runuser", "-u", "nobody", "--", "sh", str(libexec / "with-service-env"), BASE_PATH,
                             str(env_file), "true"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip() == f"with-service-env: cannot read {env_file}"


def test_the_hub_token_is_on_no_command_line(scratch):
    """The env file's HF_TOKEN reaches the command (a model fetch) through runuser's
    environment, never as a word of runuser's command line, which every user may read
    (/proc/<pid>/cmdline) while the command runs; nor is any other key's value."""
    libexec, env_file, _ = scratch
    result = run(libexec, "--as", "nobody", "/nonexistent", BASE_PATH, str(env_file), "/bin/sh", "-c",
                 'printf "%s|%s|" "$HF_TOKEN" "$X"; tr "\\0" " " < /proc/$PPID/cmdline')
    assert result.returncode == 0, result.stderr
    token, x, parent = result.stdout.split("|", 2)
    assert (token, x) == ("hf a  b", "2")
    assert "runuser" in parent and "X=" not in parent, parent
    assert "hf a  b" not in parent and "HF_TOKEN=" not in parent, parent


PLANTED = {"AWS_SECRET_ACCESS_KEY": "planted-aws-7Qx9", "WANDB_API_KEY": "planted-wandb-3Kd2",
           "HF_ENDPOINT": "https://svc:planted-pw-8Zt4@mirror.example", "HF_TOKEN": "hf_plantedtoken5Vn1",
           "QUOTED": "it's \"planted-quote-2Mm6\" $HOME `x` $(id) C:\\dir\\n\\"}


def _processes():
    """Every process's (pid, uid, argv text, environment text) that can be read now."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            environ = (proc / "environ").read_bytes().replace(b"\0", b"\n").decode("utf-8", "replace")
            uid = proc.stat().st_uid
        except OSError:
            continue
        found.append((proc.name, uid, argv, environ))
    return found


def test_no_value_of_the_env_file_is_in_any_process_argv_while_the_command_runs(scratch):
    """Every assignment of the env file (a cloud key, a W&B key, an endpoint's password,
    the hub token) reaches the command, and while it runs no process on the node has one
    in its argv (/proc/<pid>/cmdline: what ps shows every user), and no process root runs
    (runuser) has one in its environment: the values travel through a descriptor."""
    libexec, env_file, _ = scratch
    env_file.write_text("".join(f"{key}={value}\n" for key, value in PLANTED.items()) + f"PATH={BASE_PATH}\n")
    shown = " ".join(f'"${key}"' for key in PLANTED)
    command = subprocess.Popen(
        ["sh", str(libexec / "with-service-env"), "--as", "nobody", "/nonexistent", BASE_PATH, str(env_file),
         "/bin/sh", "-c", f'printf "%s|" {shown}; echo; exec sleep 20'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={"PATH": BASE_PATH})
    try:
        first = command.stdout.readline()
        assert first.rstrip("\n").split("|")[:-1] == list(PLANTED.values()), (first, command.stderr.read())
        processes = _processes()
    finally:
        command.kill()
        command.wait(timeout=10)
    values = ["planted-aws-7Qx9", "planted-wandb-3Kd2", "planted-pw-8Zt4", "hf_plantedtoken5Vn1",
              "planted-quote-2Mm6"]
    in_argv = [(pid, argv) for pid, _, argv, _ in processes if any(value in argv for value in values)]
    assert in_argv == [], in_argv
    root_with_values = [(pid, argv) for pid, uid, argv, environ in processes
                        if uid == 0 and any(value in environ for value in values)]
    assert root_with_values == [], root_with_values


def test_a_value_of_many_quotes_is_handed_over_in_linear_time(scratch):
    """Review (bounds that are not bounds): each quote of a value was quoted by a loop
    that copied the rest of the value (20000 quotes took 11 s, 100000 over 120 s, while
    a fetch waited). A 100000-character value of quotes reads back exactly, in seconds."""
    libexec, env_file, _ = scratch
    value = "a'" * 50000
    env_file.write_text(f'K1="{value}"\nK2=tail\n')
    result = run(libexec, "--as", "nobody", "/nonexistent", BASE_PATH, str(env_file), "/bin/sh", "-c",
                 'printf "%s|%s" "$K1" "$K2"')
    assert result.returncode == 0, result.stderr[-500:]
    assert result.stdout == f"{value}|tail"
