"""Operations for files and directories the deploy shares with the node's owner."""

import posixpath
import shlex
from io import StringIO

from pyinfra import host, state
from pyinfra.api import FileUploadCommand, StringCommand, operation
from pyinfra.api.util import get_file_sha1, get_template
from pyinfra.facts.files import Directory
from pyinfra.facts.server import Home

from bringup import envfile
from bringup.api_key import node_file_problem
from bringup.layout import UPLOAD_STAGE
from control import run
from facts.files import ManagedFile


def _reach_repair(found, user):
    """The ``chmod`` that lets the service user through a directory the deploy owns
    (``found``: pyinfra's ``Directory`` fact, its mode as octal digits), or None when it
    already does or is not the deploy's: root's directory must be open to others
    (``go+rx``); one the service user owns (``user`` not root), to its owner (``u+rx``).
    Its owner decides, not its group: validate (SERVICE_PATH_UNREACHABLE) judges by the
    owner alone and says deploy opens root's 0700 venv root, whatever its group (staff).

    >>> _reach_repair({"user": "root", "group": "root", "mode": 700}, "root")
    'go+rx'
    >>> _reach_repair({"user": "root", "group": "root", "mode": 755}, "root") is None
    True
    >>> _reach_repair({"user": "sglang", "group": "sglang", "mode": 700}, "sglang") is None
    True
    >>> _reach_repair({"user": "ubuntu", "group": "ubuntu", "mode": 700}, "root") is None
    True
    >>> _reach_repair({"user": "root", "group": "staff", "mode": 700}, "root")
    'go+rx'
    """
    if found.get("user") != user or found.get("mode") is None:
        return None
    mode = int(str(found["mode"]), 8)
    if user == "root":
        return "go+rx" if mode & 0o005 != 0o005 else None
    return "u+rx" if mode & 0o500 != 0o500 else None


@operation()
def directory_if_missing(path, user="root", group="root", mode="0755", reached=False):
    """
    Create ``path`` (and missing parents) with this owner and mode, only if it does
    not exist: a directory found there is the node's own and keeps its owner and mode
    (``/home/ubuntu``, a data disk's mount point). A link or a file there is refused,
    never followed (``install -d -o`` would hand a link's target to ``user``), when
    the facts are read and again when the command runs, since the node may change
    between the two. Missing parents are made 0755 (``umask 022``), never with the
    session's umask; the directory itself with ``mode`` (bringup/layout.py
    ``NodeLayout.directories``).

    + path: the directory
    + user, group, mode: for the directory created
    + reached: the service user must traverse it: a directory of this owner found
      closed to it (a 0700 venv root of root's) is opened (``_reach_repair``, never
      through a link); another owner's is left as it is (validate names it)

    **Example**:

    .. code:: python

        directory_if_missing(path="/var/cache/sglang", user="sglang", group="sglang", reached=True)
    """
    found = host.get_fact(Directory, path=path)
    quoted = shlex.quote(path)
    if found:
        repair = _reach_repair(found, user) if reached else None
        if repair:
            yield f"if [ -d {quoted} ] && [ ! -L {quoted} ]; then chmod {repair} -- {quoted}; fi"
            return
        host.noop(f"{path} exists; its owner and mode are left as they are")
        return
    refusal = shlex.quote(f"{host.name}: {path} is a link or a file, not a directory; move it away so the deploy "
                          "can create the directory (a link is never followed)")
    if found is False:
        yield f"echo {refusal} >&2; exit 1"
        return
    # mkdir makes the directory itself (it fails on anything there, a link included: no
    # follow), chown -h never follows one; the parents are root's, 0755 whatever the
    # session's umask (a subshell's umask 022).
    yield (f"if [ -L {quoted} ] || {{ [ -e {quoted} ] && [ ! -d {quoted} ]; }}; then echo {refusal} >&2; exit 1; fi; "
           f"[ -d {quoted} ] || {{ (umask 022 && mkdir -p -- {shlex.quote(posixpath.dirname(path) or '/')}) && "
           f"mkdir -m {shlex.quote(mode)} -- {quoted} && "
           f"chown -h -- {shlex.quote(f'{user}:{group}')} {quoted}; }}")


def _upload_stage(dest):
    """Where an upload lands first: beside ``dest`` (one file system, so the final
    rename is atomic), in a directory only root writes, under a name of this run's own
    (control/run.py): another run's upload to the same destination never shares it.

    >>> from unittest import mock
    >>> with mock.patch("control.run.RUN_ID", "0123456789abcdef"):
    ...     _upload_stage("/etc/sglang/sglang.env")
    '/etc/sglang/.sglang.env.gpu-bringup-new-0123456789abcdef'
    """
    directory, name = posixpath.split(dest)
    return f"{directory}/.{name}.{run.STAGE_MARK}-{run.run_id()}"


def _privileged():
    """Whether this operation raises privileges (sudo, su, doas) over the SSH user."""
    arguments = host.current_op_global_arguments or {}
    return any(arguments.get(key) for key in ("_sudo", "_su_user", "_doas"))


@operation()
def whole_file(src, dest, user="root", group="root", mode="0644", found=None):
    """
    Put ``src`` at ``dest`` whole: uploaded beside it, given its owner and mode, then
    renamed over it, so no reader (apt, systemd, a login shell) ever sees half a file,
    and a link at ``dest`` is replaced, never followed. With sudo, the SSH user's
    upload first lands in a directory of that user's own (never a shared /tmp name).

    + src: a local path or a file-like object
    + dest: the node path
    + user, group, mode: what ``dest`` must end up with
    + found: the ``ManagedFile`` fact of ``dest``, when the caller read it already (one
      round trip per operation)

    **Example**:

    .. code:: python

        whole_file(src="files/release.sh", dest="/usr/local/libexec/gpu-bringup/release.sh", mode="0755")
    """
    digest = get_file_sha1(src)
    found = found if found is not None else host.get_fact(ManagedFile, path=dest)
    if found["kind"] in ("directory", "other"):
        message = f"{host.name}: {dest} is a {found['kind']}, not a file; move it away so the deploy can write it"
        yield f"echo {shlex.quote(message)} >&2; exit 1"
        return
    attributes_ok = (found["user"], found["group"]) == (user, group) and found["mode"] is not None \
        and int(found["mode"], 8) == int(mode, 8)
    if found["kind"] == "file" and found["sha1"] == digest:
        if attributes_ok:
            host.noop(f"{dest} is up to date")
        else:
            yield shlex.join(["chown", f"{user}:{group}", dest]) + " && " + shlex.join(["chmod", mode, dest])
        return
    stage = _upload_stage(dest)
    if _privileged():
        private = f"{host.get_fact(Home, _sudo=False, _su_user=None, _doas=False)}/{UPLOAD_STAGE}"
        yield StringCommand("mkdir", "-p", "-m", "0700", private, _sudo=False, _su_user=None, _doas=False)
        yield FileUploadCommand(src, stage, remote_temp_filename=f"{private}/{posixpath.basename(stage)}")
    else:
        yield FileUploadCommand(src, stage)
    yield " && ".join([shlex.join(["chown", f"{user}:{group}", stage]), shlex.join(["chmod", mode, stage]),
                       shlex.join(["mv", "-fT", stage, dest])])


@operation()
def api_key_file_checked(path: str, user: str):
    """
    Fail the host, nothing written, unless the API key file is one only root writes and
    only root and the service user read (validate's ``node_file_problem``). Its content is never read.

    + path: ``service_api_key_file``
    + user: the service user
    """
    problem = node_file_problem(host.get_fact(ManagedFile, path=path), user, uploaded=False)
    if not problem:
        host.noop(f"{path} is root:{user}, readable by the service only")
        return
    line = (f"{host.name}: setting service_api_key_file={path!r}: {problem}; create it as a YAML file holding "
            f"`api-key: <key>`, then `chown root:{user} {path} && chmod 0640 {path}`; nothing was changed")
    yield f"echo {shlex.quote(line)} >&2; exit 1"


@operation()
def api_key_put(src, dest, group):
    """
    Put the API key file ``src`` (on the control machine) at ``dest`` whole, ``root:<group>``
    0640 (``whole_file``); a link or anything but a file at ``dest`` is refused, never
    replaced. Nothing of the key is printed: the upload is a file (never a command line),
    and the node's fact (its digest) is read with pyinfra's fact output off.

    + src: ``service_api_key_source``
    + dest: ``service_api_key_file``
    + group: the service user's group (the account step made it)

    **Example**:

    .. code:: python

        api_key_put(src="secrets/api-key.yaml", dest="/etc/sglang/api-key.yaml", group="sglang")
    """
    saved = getattr(state, "print_fact_output", False)
    state.print_fact_output = False
    try:
        found = host.get_fact(ManagedFile, path=dest)
    finally:
        state.print_fact_output = saved
    if found["kind"] not in (None, "file"):
        message = (f"{host.name}: service_api_key_file={dest} is a {found['kind']}, not a file; remove it "
                   "(`rm` it on the node) so that deploy can write the key there; nothing was changed")
        yield f"echo {shlex.quote(message)} >&2; exit 1"
        return
    if found["kind"] is None or found["sha1"] != get_file_sha1(src):
        # The stage made root's 0600 first: an SFTP upload (paramiko sends no mode) or sudo's
        # cp would create it 0666 & ~umask, the key readable by every user until the chmod;
        # an existing file keeps its mode when written.
        stage = shlex.quote(_upload_stage(dest))
        yield f"rm -f -- {stage} && (umask 077 && : > {stage})"
    yield from whole_file._inner(src=src, dest=dest, user="root", group=group, mode="0640", found=found)


@operation()
def whole_template(src, dest, user="root", group="root", mode="0644", **data):
    """
    Render a jinja2 template (``src``, with ``data``) and put it at ``dest`` whole
    (``whole_file``).

    **Example**:

    .. code:: python

        whole_template(src="files/templates/cuda-home.sh.j2", dest="/etc/profile.d/zz-cuda-home.sh",
                       home=toolkit_home("13.0"), version="13.0")
    """
    rendered = get_template(src).render({"host": host, **data})
    yield from whole_file._inner(src=StringIO(rendered), dest=dest, user=user, group=group, mode=mode)


def kept_mode(found, mode):
    """The mode a shared file ends up with: ``mode`` at most, and never looser than the
    file's own (an operator's 0600 env file holding a token stays 0600; a 0666 one
    becomes 0640).

    >>> kept_mode({"kind": "file", "mode": "600"}, "0640"), kept_mode({"kind": "file", "mode": "666"}, "0640")
    ('0600', '0640')
    >>> kept_mode({"kind": None, "mode": None}, "0640"), kept_mode({"kind": "link", "mode": None}, "0644")
    ('0640', '0644')
    """
    if found.get("kind") != "file" or not found.get("mode"):
        return mode
    return f"{int(found['mode'], 8) & int(mode, 8):04o}"


def _read_unprinted(path):
    """The ``ManagedFile`` fact of ``path`` with its text, its output kept out of
    pyinfra's log: at -vvv pyinfra prints every fact's output, and this one is the whole
    file (an env file's HF_TOKEN, base64-encoded). Other hosts' facts read meanwhile are
    not printed either (one switch for the whole state)."""
    saved = getattr(state, "print_fact_output", False)  # pyinfra-testing's state has none
    state.print_fact_output = False
    try:
        return host.get_fact(ManagedFile, path=path, text=True)
    finally:
        state.print_fact_output = saved


def _attributes_ok(found, user, group, mode):
    return found.get("kind") == "file" and (found["user"], found["group"]) == (user, group) \
        and found["mode"] is not None and int(found["mode"], 8) == int(mode, 8)


@operation()
def shared_env_file(path, managed, header, quoted=(), path_entry="", default_path="", user="root", group="root",
                    mode="0644", drop=()):
    """
    Set the keys the plan manages in a ``KEY=value`` file shared with the operator
    (the service's EnvironmentFile, ``/etc/environment``), keeping every other line
    (bringup/envfile.py), and write it whole. A file holding a line systemd reads
    otherwise than the deploy (a continued line, an escape, an open quote) fails the
    host, naming the line and its key (never a value), nothing changed.

    + path: the file
    + managed: key -> value
    + header: the comment above keys that were not in the file yet
    + quoted: keys whose values are written in double quotes
    + path_entry: put this entry first on the file's PATH, keeping its others
    + default_path: the PATH to start from when the file has none
    + user, group: the file's owner
    + mode: the loosest mode the file may have; a stricter one found stays (``kept_mode``)
    + drop: keys deploy wrote for a reason that is gone: their lines are taken out

    **Example**:

    .. code:: python

        shared_env_file(path="/etc/environment", managed={"CUDA_HOME": toolkit_home("13.0")},
                        header="# gpu-bringup", quoted=["PATH"], path_entry=f"{toolkit_home('13.0')}/bin",
                        default_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    """
    # Content, kind, owner and mode in one round trip (whole_file reuses it).
    found = _read_unprinted(path)
    text = found["text"] or ""
    if text and not text.endswith("\n"):
        text += "\n"
    values = dict(managed)
    if path_entry:
        values["PATH"] = envfile.path_first(envfile.parse_env_file(text).get("PATH"), path_entry, default_path)
    try:
        merged = envfile.merge(text, values, header, quoted, drop)
    except envfile.EnvFileError as error:
        message = f"{host.name}: {path} {error}; nothing changed"
        yield f"echo {shlex.quote(message)} >&2; exit 1"
        return
    mode = kept_mode(found, mode)
    if merged == text and _attributes_ok(found, user, group, mode):
        host.noop(f"{path} holds {', '.join(values)} as planned")
        return
    yield from whole_file._inner(src=StringIO(merged), dest=path, user=user, group=group, mode=mode, found=found)
