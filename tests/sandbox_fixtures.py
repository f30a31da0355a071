"""Fixtures for tests that start real sandbox nodes (see sandbox/); tests/conftest.py
makes them available to every suite.

Reusable by other suites (tests/node/...):

    def test_x(sandbox_node, sandbox_ssh):
        entry = sandbox_node("t-gpu", "127.0.0.240", gpu="rtx-pro-6000-x8", toolkit="incident")
        out = sandbox_ssh(entry, "nvidia-smi -L").stdout

``sandbox_node`` starts nodes in the default registry (.sandbox/nodes.yaml; the
sandbox registers them for inventory/gpu.py in inventory/hosts.d/sandbox.yml,
sandbox/registration.py) and takes every node it started down at the end of the
session.

Engineers sharing one machine keep their nodes apart with SANDBOX_TEST_NET:
``SANDBOX_TEST_NET=127.0.5`` moves every test node's address into 127.0.5.0/24
(the last octet stays; see ``node_addr``). Bridged nodes (``network="bridge"``: a network
namespace of their own on the machine's one bridge, sandbox/network.py) keep their
198.18.0.x addresses: a second run of their suite at the same time is refused by ``up``,
which names the namespace holding the address.

A firewall rule inside a bridged node: ``close_port(entry, port)`` / ``open_port(entry, port)``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from unittest import mock

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    # `python3 -m sandbox` runs from the repo root; make the package importable
    # here the same way, whatever directory pytest was started from.
    sys.path.insert(0, str(REPO_ROOT))

from control import reports  # noqa: E402
from sandbox import node  # noqa: E402
from tests.hub_double import REVISION  # noqa: E402


def pytest_configure(config):
    """Register the `sandbox` marker (tests that start real nodes)."""
    config.addinivalue_line(
        "markers",
        "sandbox: starts real sandbox nodes (needs root, debootstrap, namespaces; "
        "first run builds the base image, about a minute)",
    )


def pytest_collection_modifyitems(config, items):
    """Every test under tests/sandbox/ carries the `sandbox` marker, so deselecting the
    sandbox is always explicit and complete; an unmarked one is an error."""
    unmarked = [item.nodeid for item in items
                if "/tests/sandbox/" in str(item.path) and item.get_closest_marker("sandbox") is None]
    if unmarked:
        raise pytest.UsageError(f"tests under tests/sandbox/ must be marked sandbox: {', '.join(unmarked)}")


def require_sandbox_host(tools=("debootstrap", "unshare", "ssh", "ssh-keygen", "gcc")) -> None:
    """Fail (never skip) when this machine cannot run sandbox nodes: a run that cannot
    reach the sandbox must not pass on unit tests alone. Deselecting the sandbox tests
    is explicit: ``pytest -m "not sandbox"`` (CI never does)."""
    if os.geteuid() != 0:
        pytest.fail("sandbox tests need root (mount/PID namespaces, chroot); run as root, or deselect them "
                    "explicitly with -m 'not sandbox'", pytrace=False)
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"host tools missing: {', '.join(missing)}; "
                    f"install the packages in sandbox/host-packages.txt")


def node_addr(addr: str, net: str | None = None) -> str:
    """A test node's address, moved into *net* (three octets; default $SANDBOX_TEST_NET) when set.

    >>> node_addr("127.0.0.240", net="127.0.5")
    '127.0.5.240'
    """
    net = net if net is not None else os.environ.get("SANDBOX_TEST_NET")
    return f"{net}.{addr.rsplit('.', 1)[1]}" if net else addr


def ssh_command(entry: dict, command: str, login: bool = False) -> list[str]:
    """argv of an OpenSSH client call to a node, strict host key checking on."""
    remote = f"bash -lc {_quote(command)}" if login else command
    return [
        "ssh", "-F", "/dev/null",
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={entry['ssh_known_hosts_file']}",
        "-o", "IdentitiesOnly=yes",
        "-o", "ConnectTimeout=10",
        "-i", entry["ssh_key"],
        "-p", str(entry["ssh_port"]),
        f"{entry['ssh_user']}@{entry['ssh_hostname']}",
        remote,
    ]


def _quote(text: str) -> str:
    """Single-quote *text* for the remote shell."""
    return "'" + text.replace("'", "'\\''") + "'"


def said_for(host: str, text: str, output: str) -> bool:
    """Whether pyinfra's ``output`` has a line saying ``text`` for ``host``: its ``[host]``
    prefix is padded to the inventory's longest host name, and the nodes other suites
    register meanwhile (make test's workers) change that.

    >>> said_for("a", "done", "[a]     done"), said_for("a", "done", "[ab] done")
    (True, False)
    """
    return re.search(rf"^\[{re.escape(host)}\] +{re.escape(text)}", output, re.M) is not None


def run_ssh(entry: dict, command: str, login: bool = False, check: bool = True, timeout: int = 300):
    """Run *command* on a node over SSH; return the CompletedProcess.

    The default *timeout* leaves room for apt on CI's shared machine; a test that builds passes more.
    """
    proc = subprocess.run(ssh_command(entry, command, login), capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"ssh {entry['ssh_hostname']}:{entry['ssh_port']} {command!r} "
                             f"exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def sandbox_host():
    """Skip unless this machine can run sandbox nodes (root + host packages)."""
    require_sandbox_host()


@pytest.fixture(scope="session")
def sandbox_ssh():
    """`run(entry, command, login=False, check=True) -> CompletedProcess` over real SSH."""
    return run_ssh


# Nodes started since the current test module began (tests/sandbox/conftest.py takes
# them down when the module ends: each systemd node holds memory, disk and inotify
# instances, and a suite's nodes are not needed by the next).
MODULE_NODES: list[str] = []


@pytest.fixture(scope="session")
def sandbox_node(sandbox_host):
    """Factory `start_node(name, addr, gpu="rtx-pro-6000-x8", toolkit="incident", port=None,
    states=(), os_name="debian12", log=None, machine=None, network="loopback") -> dict`.

    Starts (or restarts from clean) a node in the default registry, at
    ``node_addr(addr)``, and returns its registry entry (ssh_hostname, ssh_port,
    ssh_user, ssh_key, ssh_known_hosts_file, gpu_profile, toolkit, os, arch, states).
    *machine* is the node's CPU (``aarch64``: an arm64 node run through QEMU).
    *network* ``bridge``: a network namespace of the node's own on the bridge, *addr* one
    of 198.18.0.2-254 as it is (the entry then ends with ``network`` and ``netns``).
    Every node started through it is taken down at the end of the session.
    """
    started: list[str] = []

    def start_node(name: str, addr: str, gpu: str = "rtx-pro-6000-x8",
                   toolkit: str = "incident", port: int | None = None, states=(),
                   os_name: str = "debian12", log=None, machine: str | None = None,
                   network: str = "loopback") -> dict:
        where = addr if network == "bridge" else node_addr(addr)
        entry = node.up(name, where, gpu, toolkit, port, states=states, os_name=os_name, log=log,
                        machine=machine, network=network)
        if name not in started:
            started.append(name)
        if name not in MODULE_NODES:
            MODULE_NODES.append(name)
        return entry

    yield start_node
    if started:
        node.down(started)


# Settings every deploy of the shared node uses, passed as pyinfra --data (and as
# --node-data to the node suite): the real stack at its pins, the pre-warm reduced to
# two FlashInfer modules and SGLang's own (make demo pre-warms the full set; FlashInfer's
# sampling alone takes two cores a minute), a model
# for the unit's arguments (not started: there is no GPU to serve on), and a toolkit
# lock holding CUDA 13.0's GA release while the repository also serves update 2.
DEPLOY_DATA = ("prewarm_modules=activation:silu,norm,sglang-activation", "service_model=Qwen/Qwen3-0.6B",
               "service_enable=false", "cuda_toolkit_lock=tests/fixtures/locks/cuda-13.0.48-debian12-x86_64.txt")
DEPLOYED = "deployed"
# The shared node is found as nodes are (docs/nodes-as-found.md): the seeds' incident
# (NVIDIA's apt source, CUDA 12.8 by apt, a hand-built venv), the operator's marks and
# Debian's own toolkit.
DEPLOYED_STATES = ("incident", "operator", "distro-cuda")
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def pyinfra_cli(*args, data=DEPLOY_DATA, json_output=False, timeout=1800):
    """Run the real pyinfra CLI from the repo root; ``.output`` holds stdout and stderr."""
    settings = [arg for item in data for arg in ("--data", item)]
    command = [PYINFRA, "-y", *(["--json"] if json_output else []), *settings, *args]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result


def changed_operations(result) -> list:
    """Names of the operations a ``pyinfra --json`` run changed something with (or failed):
    empty when the run found the node converged."""
    operations = json.loads(result.stdout)["results"]["operations"]
    return [op["name"] for op in operations if op["success"] or op["error"]]


def reports_dir() -> Path:
    """This suite's reports directory: ``$GPU_BRINGUP_REPORTS`` (tests/sandbox/conftest.py
    gives each sandbox module its own) or the checkout's ``reports/``, as control/reports.py
    resolves it for the pyinfra runs the suite starts from the repo root."""
    return REPO_ROOT / reports.reports_dir()


def report_path(host: str) -> Path:
    return reports_dir() / f"{host}.json"


def summary_path() -> Path:
    return reports_dir() / "summary.json"


def hosts_path() -> Path:
    """The registered host list this suite's pyinfra runs read (GPU_BRINGUP_HOSTS), where
    registered_serving_nodes writes it: beside the suite's reports."""
    return reports_dir() / "hosts.yml"


def summary_rows() -> dict:
    """The rows of this suite's latest summary.json, by host."""
    return {row["host"]: row for row in json.loads(summary_path().read_text())["hosts"]}


def summary_row(host: str) -> dict:
    """``host``'s row in this suite's latest summary.json (its verdict, reason, ...)."""
    return summary_rows()[host]


def validate(host: str, expect_rc: int = 0, data=DEPLOY_DATA, options=(), timeout=1800) -> tuple:
    """Run validate.py on ``host`` (its old report removed first, so a crashed run
    cannot pass on a stale one), check its exit status, return (result, new report).
    ``options`` go to pyinfra first (``("-v",)``: each host's report in the output)."""
    report_path(host).unlink(missing_ok=True)
    result = pyinfra_cli(*options, "inventory/gpu.py", "--limit", host, "validate.py", data=data, timeout=timeout)
    assert result.returncode == expect_rc, result.output[-4000:]
    return result, json.loads(report_path(host).read_text())


class SuiteRun:
    """One run of ``pytest tests/node``: exit code, output, per-(host, check) outcome
    from its JUnit XML, and its Markdown report."""

    def __init__(self, proc, junit, report):
        self.rc, self.output = proc.returncode, proc.stdout + proc.stderr
        self.report = report.read_text() if report.exists() else ""
        self.results, self.measured = {}, {}
        if junit.exists():
            for case in ET.parse(junit).iter("testcase"):
                props = {p.get("name"): p.get("value") for p in case.iter("property")}
                if "node" not in props:
                    continue
                status = next((tag.upper() for tag in ("failure", "error", "skipped") if case.find(tag) is not None),
                              "STAND-IN" if "standin" in props else "PASS")
                self.results[(props["node"], props["check"])] = status
                self.measured[(props["node"], props["check"])] = props.get("measured") or props.get("standin")

    def hosts(self):
        return {host for host, _ in self.results}

    def checks(self, host):
        return {check for name, check in self.results if name == host}

    def failing(self, host):
        """Checks of ``host`` that did not pass: a skipped check is not a pass."""
        return {check for (name, check), status in self.results.items()
                if name == host and status in ("FAILURE", "ERROR", "SKIPPED")}

    def standins(self, host):
        """Checks of ``host`` that passed on its declared stand-in GPUs (gpu_standin)."""
        return {check for (name, check), status in self.results.items() if name == host and status == "STAND-IN"}

    def __repr__(self):
        return f"SuiteRun(rc={self.rc})\n{self.output[-6000:]}"


def suite_files(directory):
    """Where a node-suite run with its results in ``directory`` writes its JUnit XML and
    its report (``--junitxml``, ``--node-report``).

    >>> [path.name for path in suite_files(Path("/tmp/run"))]
    ['junit.xml', 'report.md']
    """
    return directory / "junit.xml", directory / "report.md"


def node_suite(tmp, *args, env=None, data=DEPLOY_DATA, checks="tests/node"):
    """Run the suite's CLI exactly as an operator would, against inventory/gpu.py (``checks``:
    the suite, or one of its check files)."""
    tmp.mkdir(parents=True, exist_ok=True)
    junit, report = suite_files(tmp)
    for path in (junit, report):
        path.unlink(missing_ok=True)
    data = [arg for item in data for arg in ("--node-data", item)]
    command = [str(Path(sys.executable).parent / "pytest"), checks, "--inventory", "inventory/gpu.py", *data, *args,
               f"--junitxml={junit}", f"--node-report={report}", "-p", "no:cacheprovider"]
    proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return SuiteRun(proc, junit, report)


FAKE_SGLANG = REPO_ROOT / "tests" / "fixtures" / "serving" / "fake_sglang.py"
FAKE_SGLANG_PATH = "/usr/local/lib/fake-sglang/sglang"
FAKE_SGLANG_DROP_IN = "/etc/systemd/system/sglang.service.d/fake-sglang.conf"


def plant_fake_sglang(entry: dict, knob: str, model: str, hub_cache: bool = True) -> None:
    """The test double of SGLang's HTTP server (tests/fixtures/serving/fake_sglang.py) on
    the node, run by an operator's drop-in in place of the unit's ExecStart, listening on
    the node's own address (loopback nodes share this machine's network; a bridged node's
    is on its own eth0), with ``knob`` in
    Environment= (quoted: systemd splits it at spaces); /etc/sglang/sglang.env exists.
    No product path holds it: deploy leaves sglang.service.d/ as it finds it.

    ``hub_cache``: ``model`` is also planted in a hub cache of the operator's
    (FAKE_HUB_CACHE, named by an ``HF_HUB_CACHE`` line of theirs in the env file, which
    deploy keeps), so validate finds it there (bringup/plan/model_source.py): the double
    needs no weights, but a model that cannot be had is a blocker."""
    cache = f" && {plant_fake_model_command(model)}" if hub_cache else ""
    run_ssh(entry, f"install -d -m 0755 /usr/local/lib/fake-sglang /etc/systemd/system/sglang.service.d "
                   f"/etc/sglang && printf %s {_quote(FAKE_SGLANG.read_text())} > {FAKE_SGLANG_PATH} && "
                   f"chmod 0755 {FAKE_SGLANG_PATH} && touch /etc/sglang/sglang.env && "
                   f"printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/python3 -I {FAKE_SGLANG_PATH} serve "
                   f"--model-path {model} --host {entry['ssh_hostname']} --port 30000\\nEnvironment=\"%s\"\\n' "
                   f"{_quote(knob)} > {FAKE_SGLANG_DROP_IN}{cache}")


# The operator's tiny lock the light serving nodes build their venv from (pip, from the mirror).
OPERATOR_LOCK = "sandbox/locks/operator-venv-cp311-x86_64.txt"


@contextlib.contextmanager
def registered_serving_node(sandbox_node, name: str, addr: str, *prepare: str, **options):
    """A light serving node for a module (no toolkit; the fake SGLang ready after 2 s,
    ``prepare``'s shell commands run after it), named in a registered host list
    (``hosts_path()``: the mirrors' addresses, ``service_host`` the node's), which the
    pyinfra runs in the block read (GPU_BRINGUP_HOSTS). Yields the node's
    entry and the registered document. ``options``: registered_serving_nodes' (``network="bridge"``:
    the node in a network namespace of its own)."""
    with registered_serving_nodes(sandbox_node, {name: addr}, *prepare, **options) as (entries, registered):
        yield entries[name], registered


@contextlib.contextmanager
def registered_serving_nodes(sandbox_node, nodes: dict, *prepare: str, network: str = "loopback",
                             gpu: str = "rtx-pro-6000-x8", states=()):
    """Several light serving nodes (``nodes``: name -> address, started in that order) in
    one registered host list, as registered_serving_node makes one: ``prepare`` runs on
    each. ``network="bridge"``: each in a network namespace of its own on the bridge
    (addresses 198.18.0.2-254), its host data naming the wheel mirror on the bridge
    (sandbox.registration), so they can be one serving group whose members reach each other
    by address, and a firewall rule closes a port of one of them (close_port). ``states``
    go to every node (a serving group's route probe needs ``ip``: ``("iproute2",)``).
    Yields the entries by name and the registered document."""
    from sandbox import aptrepo, pypimirror
    from sandbox.registration import inventory_document

    aptrepo.ensure_served()
    pypimirror.serve([REPO_ROOT / OPERATOR_LOCK])
    entries = {}
    for name, addr in nodes.items():
        entries[name] = sandbox_node(name, addr, gpu=gpu, toolkit="none", states=states, network=network)
        plant_fake_sglang(entries[name], "FAKE_SGLANG_READY_AFTER=2", "fake/model")
        for command in prepare:
            run_ssh(entries[name], command)
    registry = node.read_registry()
    registered = inventory_document({name: registry[name] for name in nodes}, pypi=pypimirror.running())
    hosts = {host: {**data, "service_host": entries[host]["ssh_hostname"]} for host, data in registered["hosts"].items()}
    hosts_file = hosts_path()
    hosts_file.parent.mkdir(parents=True, exist_ok=True)
    hosts_file.write_text(yaml.safe_dump({"all": registered["all"], "hosts": hosts}))
    with mock.patch.dict(os.environ, GPU_BRINGUP_HOSTS=str(hosts_file)):
        yield entries, registered


def firewall_script(port: int, closed: bool) -> str:
    """The nft script that closes (``closed``) or opens again ``port`` of a node: a table
    of its own per port (``inet sandbox-closed-PORT``) whose input chain drops every TCP
    packet to the port that does not come in on ``lo``, made afresh or removed (a table
    added then deleted first: idempotent either way, nft 1.0.6 has no ``destroy``).

    >>> print(firewall_script(29500, closed=False))
    add table inet sandbox-closed-29500
    delete table inet sandbox-closed-29500
    >>> firewall_script(29500, closed=True).splitlines()[-1]
    'add rule inet sandbox-closed-29500 input iifname != "lo" tcp dport 29500 drop'
    """
    table = f"inet sandbox-closed-{int(port)}"
    script = [f"add table {table}", f"delete table {table}"]
    if closed:
        script += [f"add table {table}",
                   f"add chain {table} input {{ type filter hook input priority 0; policy accept; }}",
                   f'add rule {table} input iifname != "lo" tcp dport {int(port)} drop']
    return "\n".join(script)


def _nft_in_node(entry: dict, script: str) -> None:
    """Run an nft script in a bridged node's network namespace, from this machine."""
    if "netns" not in entry:
        raise AssertionError(f"{entry['ssh_hostname']} is a loopback node: its firewall would be this machine's; "
                             "start it with network='bridge'")
    proc = subprocess.run(["ip", "netns", "exec", entry["netns"], "nft", "-f", "-"], input=script + "\n",
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise AssertionError(f"nft in {entry['netns']} exited {proc.returncode}:\n{script}\n{proc.stderr}")


def close_port(entry: dict, port: int) -> None:
    """A firewall rule inside that node: nftables in the bridged node's own network
    namespace (run from this machine with ``ip netns exec``) drops inbound TCP to ``port``
    from the network, so a connect from another node times out (DROP, not refused); the
    node's own connections over ``lo`` still pass, and no other node's port is touched."""
    _nft_in_node(entry, firewall_script(port, closed=True))


def open_port(entry: dict, port: int) -> None:
    """Take close_port's rule for ``port`` out of the node's firewall (nothing there: nothing to do)."""
    _nft_in_node(entry, firewall_script(port, closed=False))


# The operator's hub cache plant_fake_sglang puts the double's model in, named by a line
# of the operator's in the service env file.
FAKE_HUB_CACHE = "/var/cache/fake-hub"
ENV_FILE = "/etc/sglang/sglang.env"


def plant_fake_model_command(model: str) -> str:
    """The shell command that gives a node's service ``model`` from an operator's hub
    cache (FAKE_HUB_CACHE, an ``HF_HUB_CACHE`` line in the env file): a model that can be
    had, for tests that start the service (a hub model neither cached nor reachable is
    MODEL_UNAVAILABLE, a blocker; sandbox nodes cannot reach huggingface.co)."""
    return (f"{plant_hub_entry_command(FAKE_HUB_CACHE, model, 'root')} && install -d -m 0755 /etc/sglang && "
            f"touch {ENV_FILE} && {{ grep -q '^HF_HUB_CACHE=' {ENV_FILE} || "
            f"echo HF_HUB_CACHE={FAKE_HUB_CACHE} >> {ENV_FILE}; }}")


def remove_fake_model(entry: dict) -> None:
    """Undo plant_fake_model_command on a node: the cache, its env file line and the
    HF_HUB_OFFLINE=1 a deploy wrote for it and its record of it (the shared node goes back
    to its state)."""
    run_ssh(entry, f"rm -rf {FAKE_HUB_CACHE} {ENV_FILE}.deploy-owned; [ ! -f {ENV_FILE} ] || sed -i -e '/^HF_HUB_CACHE={FAKE_HUB_CACHE.replace('/', '[/]')}$/d' "
                   f"-e '/^HF_HUB_OFFLINE=1$/d' {ENV_FILE}")


def plant_hub_entry_command(cache: str, model: str, owner: str) -> str:
    """The shell command that plants ``model`` in the hub cache ``cache`` on a node, owned
    by ``owner``, as huggingface_hub lays an entry out (tests/hub_double.py): refs/main
    naming a snapshot whose config.json and model.safetensors link into blobs/ (weights:
    a whole entry, bringup/plan/model_source.py entry_partial); readable by every user."""
    entry = f"{cache}/models--{model.replace('/', '--')}"
    config = '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}'
    return (f"install -d -m 0755 {entry}/refs {entry}/blobs {entry}/snapshots/{REVISION} && "
            f"printf %s {REVISION} > {entry}/refs/main && printf '%s\\n' {_quote(config)} > {entry}/blobs/0f3a && "
            f"ln -sfn ../../blobs/0f3a {entry}/snapshots/{REVISION}/config.json && "
            f"head -c 64 /dev/zero > {entry}/blobs/9a1c && "
            f"ln -sfn ../../blobs/9a1c {entry}/snapshots/{REVISION}/model.safetensors && "
            f"chmod 0644 {entry}/refs/main {entry}/blobs/0f3a {entry}/blobs/9a1c && chown -R {owner}: {cache}")


def make_demo(entry, suite):
    """``make demo`` against the shared node: its name, address, field states and the
    suites' settings instead of the Makefile's defaults (the full pre-warm); its node
    suite's JUnit XML and report go to the directory ``suite``."""
    junit, report = suite_files(suite)
    variables = [f"DEMO_NODE={DEPLOYED}", f"DEMO_ADDR={entry['ssh_hostname']}", f"DEMO_GPU={entry['gpu_profile']}",
                 f"DEMO_STATES={','.join(DEPLOYED_STATES)}", f"DEMO_DATA={' '.join(DEPLOY_DATA)}",
                 f"DEMO_SUITE_ARGS=--junitxml={junit} --node-report={report}"]
    result = subprocess.run(["make", "--no-print-directory", "demo", *variables], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=3600, stdin=subprocess.DEVNULL)
    result.output = result.stdout + result.stderr
    return result


@pytest.fixture(scope="session")
def deployed_node(sandbox_node, tmp_path_factory):
    """One node in the incident's state, validated, then brought up by deploy.py
    through the real CLI (toolkit, env, venv, pre-warm, unit). Shared by the suites
    that check a deployed node; each restores what it breaks. The entry holds
    ``before`` (the validate report before deploy), ``before_suite`` and
    ``after_suite`` (the node suite's runs before deploy and make demo's after it),
    ``deploy_seconds`` and ``rollback`` (the first deploy's venvs/previous: its name,
    then the files at its top)."""
    from sandbox import aptrepo, pypimirror

    aptrepo.ensure_served()
    pypimirror.serve()
    entry = sandbox_node(DEPLOYED, "127.0.0.61", gpu="rtx-pro-6000-x8", toolkit="none", states=DEPLOYED_STATES)
    _, before = validate(DEPLOYED)
    before_suite = node_suite(tmp_path_factory.mktemp("node-suite-before"), "--node-limit", DEPLOYED)
    # The README's first command brings it up: make demo restarts the node from clean
    # (validate and the node suite above changed nothing), validates, deploys, validates
    # again and runs the node suite, which must be green for make to exit 0.
    started = time.monotonic()
    suite = tmp_path_factory.mktemp("node-suite-after")
    demo = make_demo(entry, suite)
    assert demo.returncode == 0, demo.output[-6000:]
    assert "== 2. deploy" in demo.output and "== 4. the node suite" in demo.output, demo.output[-3000:]
    seconds = time.monotonic() - started
    after_suite = SuiteRun(demo, *suite_files(suite))
    # What the first deploy kept as the rollback (later suites build other venvs).
    rollback = run_ssh(entry, "readlink /opt/sglang/venvs/previous; ls /opt/sglang/venvs/previous/").stdout.split()
    return dict(entry, name=DEPLOYED, before=before, before_suite=before_suite, after_suite=after_suite,
                deploy_seconds=seconds, rollback=rollback)
