"""Sandbox nodes: throwaway Debian hosts reached over real SSH, on loopback or a bridge.

A node is the cached base image of its OS and CPU (sandbox.image: Debian 12 or 13,
amd64, or arm64 run through QEMU: sandbox.cpus),
the cached layers of its field states (sandbox.field_states, sandbox.layers)
and a private overlay on top, assembled by ``files/node-init.sh`` in its own
mount, PID, UTS, IPC, cgroup and time namespaces (``unshare --fork``), which then
becomes the node's systemd (PID 1, the overlay as its root). ``files/node-boot.sh``
starts it, and starts it again in fresh namespaces when the node reboots (``reboot``
in the node, or ``reboot()`` here): the same overlay, address, port and host keys. systemd starts
the node's sshd, which listens on the node's address. Its network (sandbox.network):

    loopback (default)  this machine's network namespace; the address is one of 127.0.0.0/8
                        (all loopback on Linux, nothing is added to any interface), the port
                        22 unless taken there (then 2222-2299)
    bridge              (``up(..., network="bridge")``, ``--network bridge``) a named network
                        namespace of its own (``gbsbx-NAME-TAG``), made before the node boots
                        and entered by its boot loop (``nsenter --net``), so it outlives the
                        node's reboots; ``eth0`` at its address in 198.18.0.0/24 on this
                        machine's bridge ``gbsbx0`` (198.18.0.1, where the sandbox's mirrors
                        also listen; /etc/pip.conf trusts it), port 22; ``down`` removes
                        namespace and veth pair

Why namespaces: killing the namespace's first process makes the kernel kill
every process of the node and drop every mount it made, so neither ``down``
nor a crash can leave a mount or a stray sshd behind. What stays is the node
directory and the node's (empty) cgroup directory, which ``down`` (or the
next ``up`` of that name) deletes.

State, under the state directory (repo/.sandbox, or $SANDBOX_STATE_DIR):

    nodes.yaml            the node registry (atomic writes); each write also rewrites the
                          nodes' host list for inventory/gpu.py (sandbox.registration)
    ssh/id_ed25519[.pub]  the one client keypair of the sandbox
    ssh/known_hosts       host keys of the running nodes (strict checking)
    nodes/NAME/           upper/ work/ root/ (overlay), node.log, state.json (with
                          the node's OS, the keys of its layers and a bridged node's network)
    .lock                 serialises up/down/destroy
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

from sandbox import cpus, field_states, gpu_standin, image, platforms, registration
from sandbox import network as networks
from control.atomic import atomic_write
from sandbox.fsutil import discard, file_lock, mounts_under, safe_rmtree, write_file
from sandbox.httpserve import alive, answers, read_state
from sandbox.statedir import APTREPO_SERVER_JSON, PYPIMIRROR_JSON, read_registry, registry_path, state_dir

INIT_SCRIPT = Path(__file__).resolve().parent / "files" / "node-init.sh"
# The node's power switch: boots INIT_SCRIPT in fresh namespaces, again after a reboot.
BOOT_SCRIPT = Path(__file__).resolve().parent / "files" / "node-boot.sh"

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")
DEFAULT_PORT = 22
FALLBACK_PORTS = range(2222, 2300)
READY_TIMEOUT_S = 30.0
# A foreign CPU's node boots emulated (systemd, sshd's key loading): 2 s alone, far
# more beside a busy test run on two cores.
FOREIGN_READY_TIMEOUT_S = 120.0
# A process SIGKILLed in uninterruptible I/O dies when that I/O ends: an emulated arm64
# node's, beside venv builds and deleted node trees on two cores, took over 15 s once.
STOP_TIMEOUT_S = 60.0
# A mirror server picks the bridge up within half a second of its making (sandbox.httpserve).
MIRROR_BRIDGE_TIMEOUT_S = 5.0
# A reboot: systemd stops the node's units (each within its stop timeout) and boots again.
REBOOT_TIMEOUT_S = 120.0
# The host keys a node generates and its sshd serves (HostKey, below): the kinds clients
# negotiate first. No RSA key: ssh-keygen spent about 0.6 s of CPU on each 3072-bit one,
# 45 core-seconds of a CI run (about 70 nodes), for a key no client here picks.
HOST_KEY_TYPES = ("ed25519", "ecdsa")
CGROUP_PARENT = "gpu-bringup-sandbox"


class SandboxError(RuntimeError):
    """A sandbox operation failed; the message is meant for the operator."""


# --------------------------------------------------------------------------
# paths


def ssh_dir() -> Path:
    """Client key and known_hosts of the sandbox."""
    return state_dir() / "ssh"


def client_key() -> Path:
    """Private key every node accepts for root."""
    return ssh_dir() / "id_ed25519"


def known_hosts() -> Path:
    """known_hosts with every running node's host keys."""
    return ssh_dir() / "known_hosts"


def trash_dir() -> Path:
    """Where removed nodes' trees are deleted in the background (fsutil.discard): on the
    nodes' file system, so moving one there is a rename."""
    return state_dir() / "trash"


def node_dir(name: str) -> Path:
    """On-disk directory of node *name*."""
    return state_dir() / "nodes" / name


def _cgroup2_mount() -> Path:
    """Where the host mounts the cgroup v2 hierarchy (/sys/fs/cgroup, or
    /sys/fs/cgroup/unified on a v1/v2 hybrid host)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return Path(fields[4])
    raise SandboxError("no cgroup v2 hierarchy mounted on this host: systemd in the nodes needs one")


def node_cgroup(name: str) -> Path:
    """The node's cgroup v2 directory: the root of its cgroup namespace.

    Named after the node directory too, so nodes of the same name in two
    state directories do not share it.
    """
    tag = networks.short_hash(str(node_dir(name)))
    return _cgroup2_mount() / CGROUP_PARENT / f"{name}-{tag}"


def node_netns(name: str) -> str:
    """The named network namespace a bridged node *name* runs in (``ip netns exec`` takes
    it), tagged by its directory as its cgroup is (sandbox.network.netns_name)."""
    return networks.netns_name(name, str(node_dir(name)))


def node_veth(name: str) -> str:
    """This machine's end of bridged node *name*'s veth pair (a port of the bridge)."""
    return networks.veth_name(str(node_dir(name)))


# --------------------------------------------------------------------------
# locking and registry


def _state_lock():
    """Exclusive flock on <state>/.lock: one up/down/destroy at a time."""
    return file_lock(state_dir() / ".lock")


def _write_registry(nodes: dict[str, dict]) -> None:
    """Atomically replace the registry (the format is a contract, keep it), then the host
    list registered for inventory/gpu.py."""
    text = yaml.safe_dump({"nodes": nodes}, sort_keys=False, default_flow_style=False)
    atomic_write(registry_path(), text, 0o644)
    registration.publish()


def _registry_entry(name: str, addr: str, port: int, gpu: str, toolkit: str, os_name: str,
                    states: list[str], machine: str, net: str = networks.LOOPBACK) -> dict:
    """One node's registry entry, keys in the documented order (the host list registered for
    inventory/gpu.py takes the ssh_* ones); a bridged node's ends with ``network: bridge``
    and its ``netns``, a loopback node's has neither."""
    bridged = {"network": net, "netns": node_netns(name)} if net == networks.BRIDGE else {}
    return {
        "ssh_hostname": addr,
        "ssh_port": port,
        "ssh_user": "root",
        "ssh_key": str(client_key()),
        "ssh_known_hosts_file": str(known_hosts()),
        "gpu_profile": gpu,
        "toolkit": toolkit,
        "os": os_name,
        "arch": cpus.dpkg_arch(machine),
        "states": states,
        **bridged,
    }


def _write_known_hosts(nodes: dict[str, dict]) -> None:
    """Rebuild known_hosts from the host keys of the registered nodes."""
    lines = []
    for name, entry in sorted(nodes.items()):
        addr, port = entry["ssh_hostname"], int(entry["ssh_port"])
        host = addr if port == 22 else f"[{addr}]:{port}"
        for kind in HOST_KEY_TYPES:
            pub = node_dir(name) / "upper" / "etc" / "ssh" / f"ssh_host_{kind}_key.pub"
            if pub.is_file():
                keytype, blob = pub.read_text().split()[:2]
                lines.append(f"{host} {keytype} {blob}\n")
    atomic_write(known_hosts(), "".join(lines), 0o644)


# --------------------------------------------------------------------------
# processes


def _proc_starttime(pid: int) -> int | None:
    """Start time of *pid* (clock ticks since boot), None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is the state; a zombie holds no namespace or mount any more
    # (this host's PID 1 does not always reap re-parented processes).
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _alive(pid: int | None, starttime: int | None) -> bool:
    """Whether *pid* is still the process we started (guards against reuse)."""
    return bool(pid) and _proc_starttime(pid) is not None and _proc_starttime(pid) == starttime


def _ns(pid: int, kind: str) -> str | None:
    """Namespace id of *pid* (e.g. 'pid:[4026532301]'), None if unreadable."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def _all_pids() -> list[int]:
    """Every pid visible in /proc."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def pids_in_namespaces(pidns: str | None, mntns: str | None) -> list[int]:
    """Live host pids inside the node's PID or mount namespace."""
    found = []
    for pid in _all_pids():
        if _proc_starttime(pid) is None:
            continue
        if (pidns and _ns(pid, "pid") == pidns) or (mntns and _ns(pid, "mnt") == mntns):
            found.append(pid)
    return found


def _launcher_pids(ndir: Path) -> list[int]:
    """`unshare` processes started for *ndir*, found by their command line.

    The fallback when state.json is missing (a crash between spawning and
    recording): the launcher's arguments name the node directory.
    """
    return _pids_with_argv(ndir, lambda argv: argv[0].endswith(b"unshare"))


def _boot_pids(ndir: Path) -> list[int]:
    """node-boot.sh loops started for *ndir*, found by their command line."""
    return _pids_with_argv(ndir, lambda argv: str(BOOT_SCRIPT).encode() in argv)


def _pids_with_argv(ndir: Path, match) -> list[int]:
    """Processes whose arguments name *ndir* and satisfy *match* (argv as bytes)."""
    found = []
    for pid in _all_pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and str(ndir).encode() in argv and match(argv):
            found.append(pid)
    return found


def _children(pid: int) -> list[int]:
    """Direct children of *pid*."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


# --------------------------------------------------------------------------
# node lifecycle


def _read_state(name: str) -> dict:
    """state.json of node *name* ({} if absent or unreadable), its current boot's processes
    in it: after a reboot inside the node, the recorded ones are the last boot's."""
    try:
        state = json.loads((node_dir(name) / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    if not _alive(state.get("init_pid"), state.get("init_starttime")) and \
            _alive(state.get("boot_pid"), state.get("boot_starttime")):
        current = _current_boot(state["boot_pid"])
        if current:
            state.update(current)
            atomic_write(node_dir(name) / "state.json", json.dumps(state, indent=2) + "\n", 0o644)
    return state


def _current_boot(boot: int) -> dict | None:
    """The launcher (unshare) and init of the boot loop *boot*'s current boot, None between boots."""
    launchers = _children(boot)
    inits = _children(launchers[0]) if launchers else []
    if not inits:
        return None
    launcher, init = launchers[0], inits[0]
    record = {"launcher_pid": launcher, "launcher_starttime": _proc_starttime(launcher),
              "init_pid": init, "init_starttime": _proc_starttime(init),
              "pidns": _ns(init, "pid"), "mntns": _ns(init, "mnt")}
    return record if record["init_starttime"] and record["pidns"] else None


def _kill_node(name: str) -> None:
    """Kill every process of node *name* and wait until its namespaces are gone."""
    ndir = node_dir(name)
    state = _read_state(name)
    inits, launchers = set(), set()
    # The boot loop first: a node must not boot again while it is being stopped.
    boots = set(_boot_pids(ndir))
    if _alive(state.get("boot_pid"), state.get("boot_starttime")):
        boots.add(state["boot_pid"])
    for pid in boots:
        _sigkill(pid)
    if _alive(state.get("init_pid"), state.get("init_starttime")):
        inits.add(state["init_pid"])
    if _alive(state.get("launcher_pid"), state.get("launcher_starttime")):
        launchers.add(state["launcher_pid"])
    # The recorded namespaces are this node's only while its processes live: the
    # kernel reuses a dead namespace's id for the next one (another node's).
    pidns, mntns = (state.get("pidns"), state.get("mntns")) if inits or launchers else (None, None)
    # Also whatever runs for this directory without a record (a crash between
    # spawning and writing state.json).
    for launcher in _launcher_pids(ndir):
        launchers.add(launcher)
        for child in _children(launcher):
            inits.add(child)
            pidns = pidns or _ns(child, "pid")
        mntns = mntns or _ns(launcher, "mnt")
    # Killing the namespace's PID 1 makes the kernel kill the whole PID
    # namespace. Init first so the launcher reaps it and exits by itself
    # (this host's PID 1 does not reap what is left to it); then the
    # launcher, which also holds the mount namespace.
    # Start times taken before the kill: a pid reused afterwards is not ours.
    started = {p: _proc_starttime(p) for p in inits | launchers | boots}
    for pid in inits:
        _sigkill(pid)
    _wait_gone(sorted(launchers), 1.0)
    for pid in launchers:
        _sigkill(pid)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while True:
        left = [p for p, st in started.items() if st is not None and _alive(p, st)]
        left += pids_in_namespaces(pidns, mntns)
        if not left:
            break
        if time.monotonic() > deadline:
            raise SandboxError(f"{name}: processes still alive after SIGKILL: {sorted(set(left))}")
        time.sleep(0.05)
    _remove_cgroup(node_cgroup(name))


def _remove_cgroup(top: Path) -> None:
    """Delete the (emptied) cgroup *top* and the ones the node's systemd made in it."""
    if not top.is_dir():
        return
    # Children first: a cgroup with sub-cgroups cannot be removed.
    for path, _dirs, _files in os.walk(top, topdown=False):
        os.rmdir(path)


def _sigkill(pid: int) -> None:
    """SIGKILL *pid*, ignoring a process that is already gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_gone(pids: list[int], timeout: float) -> bool:
    """Wait up to *timeout* seconds for *pids* to exit (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    while any(_proc_starttime(p) is not None for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _remove_node(name: str) -> None:
    """Stop node *name*, delete its network namespace and veth pair (a bridged node's),
    its directory, and drop it from the registry."""
    _kill_node(name)
    networks.remove(node_netns(name), node_veth(name))
    ndir = node_dir(name)
    if mounts_under(ndir):
        # Only possible if someone mounted into the node from the host.
        raise SandboxError(f"{name}: host mounts under {ndir}: {mounts_under(ndir)}")
    discard(ndir, trash_dir())
    nodes = read_registry()
    if name in nodes:
        del nodes[name]
        _write_registry(nodes)
    _write_known_hosts(nodes)


def _validate(name: str, addr: str, gpu: str, toolkit: str, os_name: str, states: list[str],
              machine: str, net: str = networks.LOOPBACK) -> None:
    """Reject bad names, addresses outside the network's (127.0.0.0/8 on loopback,
    198.18.0.2-254 bridged: sandbox.network.address_problem), unknown profiles, OSes, CPUs
    and states early."""
    if not NAME_RE.match(name):
        raise SandboxError(f"bad node name {name!r}: use [a-z0-9-], at most 31 characters")
    problem = networks.address_problem(addr, net)
    if problem:
        raise SandboxError(problem)
    if gpu not in gpu_standin.profiles():
        raise SandboxError(f"unknown GPU profile {gpu!r}; known: {', '.join(gpu_standin.profiles())}")
    if toolkit not in gpu_standin.TOOLKITS:
        raise SandboxError(f"unknown toolkit {toolkit!r}; known: {', '.join(gpu_standin.TOOLKITS)}")
    if os_name not in image.OSES:
        raise SandboxError(f"unknown OS {os_name!r}; known: {', '.join(image.OSES)}")
    if machine not in cpus.DPKG_ARCHES:
        raise SandboxError(f"unknown CPU {machine!r}; known: {', '.join(cpus.DPKG_ARCHES)}")
    unknown = [state for state in states if state not in field_states.STATES]
    if unknown:
        raise SandboxError(f"unknown state {unknown[0]!r}; known: {', '.join(field_states.STATES)}")
    # The states' layers are built and locked (hand-built venvs) for this machine's CPU.
    if states and machine != cpus.host_machine():
        raise SandboxError(f"--state {','.join(states)} is built for {cpus.dpkg_arch(cpus.host_machine())} nodes "
                           f"only; start the {cpus.dpkg_arch(machine)} node without --state")
    # Both would own /usr/local/cuda-12.8 and /etc/profile.d/cuda-12.8.sh.
    if toolkit == "incident" and "cuda-12.8" in field_states.expand(states):
        raise SandboxError("--toolkit incident (the stand-in 12.8) and a state with cuda-12.8 exclude each other")


def _port_free(addr: str, port: int) -> bool:
    """Whether sshd could listen on addr:port (binds like sshd does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((addr, port))
        except OSError:
            return False
    return True


def _choose_port(addr: str, port: int | None, net: str = networks.LOOPBACK) -> int:
    """Port 22 unless taken on *addr* (then the first free of 2222-2299); a bridged node's
    is 22 (or *port*) as it is: its address is in its own namespace, not this machine's,
    and nothing else listens there."""
    if net == networks.BRIDGE:
        return DEFAULT_PORT if port is None else port
    if port is not None:
        if not _port_free(addr, port):
            raise SandboxError(f"{addr}:{port} is already in use")
        return port
    for candidate in (DEFAULT_PORT, *FALLBACK_PORTS):
        if _port_free(addr, candidate):
            return candidate
    raise SandboxError(f"no free SSH port on {addr}")


def _ensure_client_key() -> None:
    """Create the sandbox's client keypair once."""
    _mkdir(ssh_dir(), 0o700)
    if client_key().is_file():
        return
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpu-bringup-sandbox",
          "-f", str(client_key())])
    os.chmod(client_key(), 0o600)
    os.chmod(str(client_key()) + ".pub", 0o644)


def _mkdir(path: Path, mode: int) -> None:
    """mkdir (parents included) with an explicit mode, whatever the umask."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)


def _run(cmd: list[str]) -> None:
    """Run a host command, raising SandboxError with its output on failure."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxError(f"{' '.join(cmd)} failed: {proc.stderr.strip() or proc.stdout.strip()}")


def _prepare_upper(name: str, addr: str, port: int, gpu: str, toolkit: str, base: Path,
                   lowers: list[Path], machine: str, driver: bool = True, states: tuple = (),
                   os_name: str = image.DEFAULT_OS, bridged: bool = False) -> None:
    """Write the node's own files into its overlay upper layer (*lowers*: top first, base last);
    a *bridged* node's also get the site's pip configuration for the mirror on the bridge."""
    upper = node_dir(name) / "upper"
    st = os.stat(base)
    os.chmod(upper, st.st_mode & 0o7777)
    etc = gpu_standin.ensure_dir(upper, lowers, "etc")
    write_file(etc / "hostname", f"{name}\n", 0o644)
    write_file(
        etc / "hosts",
        f"127.0.0.1\tlocalhost\n{addr}\t{name}\n\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n",
        0o644,
    )
    # Host keys of its own, as a freshly installed host generates them.
    sshd_dir = gpu_standin.ensure_dir(upper, lowers, "etc/ssh")
    for kind in HOST_KEY_TYPES:
        key = sshd_dir / f"ssh_host_{kind}_key"
        _run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", f"root@{name}", "-f", str(key)])
        os.chmod(key, 0o600)
        os.chmod(str(key) + ".pub", 0o644)
    # A machine id of its own (the journal and dbus key on it), as a fresh install gets.
    write_file(etc / "machine-id", os.urandom(16).hex() + "\n", 0o444)
    sshd_d = gpu_standin.ensure_dir(upper, lowers, "etc/ssh/sshd_config.d")
    write_file(sshd_d / "sandbox.conf", _sshd_config(addr, port), 0o644)
    dot_ssh = gpu_standin.ensure_dir(upper, lowers, "root/.ssh")
    os.chmod(dot_ssh, 0o700)
    pub = Path(str(client_key()) + ".pub").read_text()
    write_file(dot_ssh / "authorized_keys", pub, 0o600)
    if "cloud-login" in states:
        # The image's login user (the cloud-login layer made it, uid 1000) gets the key too.
        user_ssh = upper / "home" / image.cloud_login_user(os_name) / ".ssh"
        gpu_standin.ensure_dir(upper, lowers, str(user_ssh.relative_to(upper)))
        write_file(user_ssh / "authorized_keys", pub, 0o600)
        os.chown(user_ssh / "authorized_keys", 1000, 1000)
        os.chown(user_ssh, 1000, 1000)
        os.chmod(user_ssh, 0o700)
    if bridged:
        write_file(etc / "pip.conf", PIP_CONF, 0o644)
    gpu_standin.install_driver(upper, lowers, gpu, machine, driver=driver)
    gpu_standin.install_pci(upper, lowers, gpu)
    gpu_standin.install_toolkit(upper, lowers, toolkit)


# A site whose wheel mirror is plain HTTP on an address other than loopback tells pip to
# trust it (pip ignores such a find-links page otherwise; uv takes it as it is).
PIP_CONF = ("# The site's pip configuration (the sandbox's, for a bridged node): the wheel mirror is\n"
            f"# plain HTTP on the bridge, {networks.GATEWAY}.\n"
            f"[global]\ntrusted-host = {networks.GATEWAY}\n")


def _sshd_config(addr: str, port: int) -> str:
    """The node's sshd settings: its own address, its host keys, keys only (a drop-in, as
    operators add them). Its HostKey lines name the keys it has, so sshd does not look for
    the default RSA key."""
    host_keys = "".join(f"HostKey /etc/ssh/ssh_host_{kind}_key\n" for kind in HOST_KEY_TYPES)
    return (f"ListenAddress {addr}:{port}\n{host_keys}"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n")


def _spawn(name: str, addr: str, port: int, lower: str, extra: dict, netns: str | None = None) -> dict:
    """Start the node's namespaces detached from us; return its state record.

    *lower* is the overlay's lowerdir (layers, then the base); *extra* goes
    into state.json as is (the node's OS and layers). With *netns* (a bridged node) the
    boot loop runs in that named network namespace (nsenter), so every boot does.
    """
    ndir = node_dir(name)
    log = ndir / "node.log"
    enter = ["nsenter", f"--net={networks.netns_path(netns)}"] if netns else []
    cmd = [
        "setsid", *enter, "/bin/sh", str(BOOT_SCRIPT), lower, str(ndir), name,
    ]
    # The node's cgroup namespace is rooted at the cgroup the launcher is in
    # when it unshares: a fresh one per node, for its systemd to manage.
    cgroup = node_cgroup(name)
    cgroup.mkdir(parents=True, exist_ok=True)
    # The shell backgrounds the launcher and exits at once, so the launcher is
    # nobody's child here (the CLI may exit; pytest keeps no zombie) and
    # setsid keeps a Ctrl-C at the terminal from reaching the node.
    shell = '(echo 0 >"$CGROUP/cgroup.procs" && exec "$@") </dev/null >>"$LOG" 2>&1 & echo $!'
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "LANG": "C.UTF-8", "LOG": str(log), "CGROUP": str(cgroup)}
    out = subprocess.run(["/bin/sh", "-c", shell, "sh", *cmd], env=env,
                         capture_output=True, text=True, check=True).stdout
    boot = int(out.strip())
    state = {"name": name, "addr": addr, "port": port, **extra,
             "boot_pid": boot, "boot_starttime": _proc_starttime(boot)}
    # Record the boot loop before anything else can fail.
    atomic_write(ndir / "state.json", json.dumps(state, indent=2) + "\n", 0o644)
    return _wait_boot(name, state)


def _wait_boot(name: str, state: dict, after: int | None = None, timeout: float = 5.0) -> dict:
    """Wait for the boot loop of *state* to start a node's init (one other than the pid
    *after*: the one before a reboot); record it in state.json and return the state."""
    deadline = time.monotonic() + timeout
    while True:
        current = _current_boot(state["boot_pid"])
        if current and current["init_pid"] != after:
            break
        if not _alive(state["boot_pid"], state["boot_starttime"]) or time.monotonic() > deadline:
            raise SandboxError(f"{name}: the node did not boot:\n{_log_tail(node_dir(name) / 'node.log')}")
        time.sleep(0.01)
    state.update(current)
    atomic_write(node_dir(name) / "state.json", json.dumps(state, indent=2) + "\n", 0o644)
    return state


def _log_tail(log: Path, lines: int = 20) -> str:
    """Last lines of a node log, for error messages."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_ready(name: str, state: dict) -> None:
    """Wait until the node's sshd answers with an SSH banner."""
    timeout = READY_TIMEOUT_S if state.get("machine", cpus.host_machine()) == cpus.host_machine() \
        else FOREIGN_READY_TIMEOUT_S
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(state["init_pid"], state["init_starttime"]):
            raise SandboxError(f"{name}: node died while starting:\n{_log_tail(node_dir(name) / 'node.log')}")
        try:
            with socket.create_connection((state["addr"], state["port"]), timeout=1) as sock:
                if sock.recv(64).startswith(b"SSH-2.0-"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    # node.log ends where systemd starts: what came after is in the node's journal.
    journal = node_dir(name) / "upper" / "var" / "log" / "journal"
    raise SandboxError(f"{name}: sshd not answering after {timeout:.0f} s:\n"
                       f"{_log_tail(node_dir(name) / 'node.log')}\n"
                       f"(boot log: journalctl -D {journal} -b)")


# systemd in each node takes inotify instances from root's share (units, journald,
# path watches); Debian's default of 128 runs out at about a dozen nodes, and then
# a node boots without sshd ("Failed to create inotify object: Too many open files").
INOTIFY_INSTANCES = 1024
INOTIFY_SETTING = Path("/proc/sys/fs/inotify/max_user_instances")


def _ensure_inotify_instances(log=None) -> None:
    """Raise the host's fs.inotify.max_user_instances to INOTIFY_INSTANCES when lower."""
    try:
        current = int(INOTIFY_SETTING.read_text())
    except (OSError, ValueError):
        return
    if current >= INOTIFY_INSTANCES:
        return
    try:
        INOTIFY_SETTING.write_text(f"{INOTIFY_INSTANCES}\n")
    except OSError as error:
        raise SandboxError(f"fs.inotify.max_user_instances is {current}: too few for systemd in several nodes; "
                           f"raise it (sysctl -w fs.inotify.max_user_instances={INOTIFY_INSTANCES}): {error}")
    print(f"sandbox: raised fs.inotify.max_user_instances from {current} to {INOTIFY_INSTANCES} "
          "(systemd in each node needs some)", file=log or sys.stderr)


def _mirrors_on_bridge(log=None) -> None:
    """Wait until the running mirror servers (the apt repository, the wheel mirror) answer
    on the bridge too, so the host list registered next gives bridged nodes URLs that
    answer; a server that names no bridge (started by an older sandbox) is said, not waited
    for: restarted, it listens there."""
    deadline = time.monotonic() + MIRROR_BRIDGE_TIMEOUT_S
    for path in (APTREPO_SERVER_JSON, PYPIMIRROR_JSON):
        info = read_state(path)
        if not alive(info):
            continue
        bridged = networks.via_bridge(info)
        if bridged is None:
            print(f"sandbox: the server of {path} does not listen on the bridge: bridged nodes cannot reach "
                  f"{info.get('url')}; stop it and serve again", file=log or sys.stderr)
            continue
        while not answers(bridged["url"], timeout=1.0):
            if time.monotonic() > deadline:
                raise SandboxError(f"the server of {path} does not answer on the bridge at {bridged['url']}")
            time.sleep(0.1)


def up(name: str, addr: str, gpu: str, toolkit: str = "none", port: int | None = None,
       states: list[str] | tuple[str, ...] = (), os_name: str = image.DEFAULT_OS, log=None,
       machine: str | None = None, network: str = networks.LOOPBACK) -> dict:
    """Start node *name* from a clean overlay and return its registry entry.

    *machine* is the node's CPU as ``uname -m`` prints it (default: this machine's); a
    foreign one (``aarch64`` on x86_64) runs its programs through QEMU (sandbox.cpus).
    *network* ``bridge`` gives the node a network namespace of its own on the bridge
    (sandbox.network; *addr* one of 198.18.0.2-254) instead of this machine's loopback.

    What the node's platform needs from the apt repository and the wheel mirror is built
    and fetched first, once per machine (sandbox.platforms).
    *states* (sandbox.field_states) are mounted as cached layers under the
    node's overlay, built first when missing (minutes, once per machine). A
    node of that name that is running, dead or half-started is removed first,
    so ``up`` always yields a fresh node.
    """
    machine = machine or cpus.host_machine()
    _validate(name, addr, gpu, toolkit, os_name, list(states), machine, network)
    bridged = network == networks.BRIDGE
    # The platform's apt directory and wheels, fetched on first use (no other platform's).
    platforms.ensure(os_name, machine, states, log or sys.stderr)
    _ensure_inotify_instances(log)
    states = field_states.canonical(list(states))
    # Before the state lock: a layer build takes minutes and must not block
    # other nodes' up and down (the layers have a lock of their own).
    try:
        base = image.base_root(log, os_name=os_name, machine=machine)
    except cpus.BinfmtError as error:
        raise SandboxError(str(error)) from None
    layers = field_states.ensure_layers(os_name, states, log or sys.stderr) if states else []
    lowers = [layer.upper for layer in reversed(layers)] + [base]
    with _state_lock():
        _ensure_client_key()
        others = {n: e for n, e in read_registry().items() if n != name}
        clash = [n for n, e in others.items() if e.get("ssh_hostname") == addr]
        if clash:
            raise SandboxError(f"address {addr} is already used by node {clash[0]}")
        _remove_node(name)
        netns = node_netns(name) if bridged else None
        if bridged:
            # The bridge is this machine's: a node of another state directory may hold the address.
            holder = networks.address_holder(addr, exclude=netns)
            if holder:
                raise SandboxError(f"address {addr} is already used by the bridged node of network namespace {holder}")
        port = _choose_port(addr, port, network)
        ndir = node_dir(name)
        _mkdir(ndir.parent, 0o755)
        _mkdir(ndir, 0o700)
        for sub in ("upper", "work", "root"):
            _mkdir(ndir / sub, 0o755)
        write_file(ndir / "node.log", "", 0o644)
        extra = {"os": os_name, "machine": machine, "layers": [layer.key for layer in layers]}
        try:
            _prepare_upper(name, addr, port, gpu, toolkit, base, lowers, machine,
                           driver="no-driver" not in states, states=tuple(states), os_name=os_name,
                           bridged=bridged)
            if bridged:
                try:
                    networks.ensure_bridge()
                    networks.create(netns, node_veth(name), addr)
                except networks.NetworkError as error:
                    raise SandboxError(f"{name}: {error}") from None
                extra |= {"network": network, "netns": netns}
            state = _spawn(name, addr, port, ":".join(map(str, lowers)), extra, netns=netns)
            _wait_ready(name, state)
            if bridged:
                _mirrors_on_bridge(log)
        except BaseException:
            # Leave nothing running (nor a namespace); keep the directory (and its
            # node.log) for a look, the next up or down of this name deletes it.
            _kill_node(name)
            with contextlib.suppress(networks.NetworkError):
                networks.remove(node_netns(name), node_veth(name))
            raise
        entry = _registry_entry(name, addr, port, gpu, toolkit, os_name, states, machine, network)
        nodes = read_registry()
        nodes[name] = entry
        _write_registry(nodes)
        _write_known_hosts(nodes)
        return entry


def reboot(name: str, timeout: float = REBOOT_TIMEOUT_S) -> dict:
    """Reboot node *name* as a machine would and wait until its sshd answers again; return
    its state. The node's systemd gets Ctrl-Alt-Del (SIGINT: reboot.target, every unit
    stopped in order), ends in reboot(2), and files/node-boot.sh boots the same overlay
    again: what the node wrote stays, /run and what the boot mounts are new, and the
    module installed for the kernel is the one loaded (files/node-init.sh). A bridged
    node boots again in the same network namespace (its boot loop runs there): the same
    eth0, address and firewall rules."""
    with _state_lock():
        if name not in read_registry():
            raise SandboxError(f"{name}: no such node (python -m sandbox status lists them)")
        state = _read_state(name)
        if not _alive(state.get("init_pid"), state.get("init_starttime")):
            raise SandboxError(f"{name}: not running; start it again with python -m sandbox up")
        old = state["init_pid"]
        os.kill(old, signal.SIGINT)
        state = _wait_boot(name, state, after=old, timeout=timeout)
        _wait_ready(name, state)
        return state


def down(names: list[str] | None = None) -> list[str]:
    """Remove the named nodes (all nodes when *names* is None); return those removed."""
    with _state_lock():
        present = set(read_registry())
        if (state_dir() / "nodes").is_dir():
            present |= {p.name for p in (state_dir() / "nodes").iterdir() if p.is_dir()}
        targets = sorted(present) if names is None else [n for n in names if n in present]
        for name in targets:
            _remove_node(name)
        if names is None and not read_registry():
            _write_registry({})
        return targets


def status() -> list[dict]:
    """Every known node with its registry entry and whether it is running."""
    nodes = read_registry()
    names = set(nodes)
    if (state_dir() / "nodes").is_dir():
        names |= {p.name for p in (state_dir() / "nodes").iterdir() if p.is_dir()}
    rows = []
    for name in sorted(names):
        state = _read_state(name)
        running = _alive(state.get("init_pid"), state.get("init_starttime"))
        rows.append({
            "name": name,
            "state": "running" if running and name in nodes else ("starting" if running else "dead"),
            "pid": state.get("init_pid") if running else None,
            "entry": nodes.get(name),
        })
    return rows


def destroy() -> None:
    """Remove every node, the client keys and the cached base image, and the bridge once no
    node (of any state directory) is on it."""
    down(None)
    networks.remove_bridge_if_unused()
    with _state_lock():
        safe_rmtree(ssh_dir())
        safe_rmtree(state_dir() / "nodes")
        # The background deletes' leftovers (a reboot stops them); rm beside a running one is harmless.
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(trash_dir())], check=False)
        _write_registry({})
    image.delete_cache()
