"""Node suite plumbing: which hosts, what each must look like, the venv's one python run
per host (venv_probe.py), the end-of-run report.

    pytest tests/node --inventory inventory/gpu.py [--node-limit 'gpu-*']
    pytest tests/node --hosts=ssh://root@10.0.0.5 [--node-config settings.yaml]
    pytest tests/node --connection=local

Without ``--inventory``, ``--hosts`` or ``--connection`` the checks are not collected,
so a plain ``pytest`` run never tries to reach a node.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from bringup.group import GroupError
from bringup.group_inventory import membership
from tests.node import connection
from tests.node.expected import NodeNotReady, gather
from tests.node.report import STANDIN, Results, first_line, outcome
from tests.node.venv_probe import run_venv_probe

NODE_DIR = Path(__file__).resolve().parent
SETTINGS = pytest.StashKey[dict]()   # testinfra host id -> settings (pyinfra host data)
DEFAULT_SETTINGS = pytest.StashKey[dict]()
EXPECTED = pytest.StashKey[dict]()   # testinfra host id -> Expected or NodeNotReady
VENV_RUNS = pytest.StashKey[dict]()  # testinfra host id -> venv_probe.VenvRun
# testinfra host id -> (Member, route target) of a serving group's member (None, "") alone, or
# why its group cannot be made (bringup/group_inventory.py, from the whole inventory)
MEMBERSHIPS = pytest.StashKey[dict]()
HOSTS = pytest.StashKey[dict]()      # testinfra host id -> its testinfra Host (a group's check reaches every member)
GROUP_RUNS = pytest.StashKey[dict]()  # serving group -> its members' answers (test_group.py)
RESULTS = pytest.StashKey[Results]()
_RESULTS = [Results()]  # the run's Results, for the report hook (which gets no config)


def pytest_addoption(parser):
    group = parser.getgroup("node suite", "tests/node: end-state checks of GPU nodes")
    group.addoption("--inventory", metavar="INVENTORY",
                    help="check the hosts of this pyinfra inventory (e.g. inventory/gpu.py), "
                         "with their SSH data and settings; host keys are checked")
    group.addoption("--node-limit", metavar="PATTERN", action="append", default=[],
                    help="only inventory hosts whose name or group matches (glob; repeat or comma-separate)")
    group.addoption("--node-data", metavar="KEY=VALUE", action="append", default=[],
                    help="override a setting for every host, as pyinfra's --data does (repeat)")
    group.addoption("--node-config", metavar="YAML",
                    help="settings (bringup.config keys) for --hosts/--connection hosts; default: the shipped defaults")
    group.addoption("--node-report", metavar="FILE",
                    help="also write the end-of-run pass/fail table (Markdown) to FILE")


def _targets_nodes(config):
    return any(config.getoption(name, None) for name in ("inventory", "hosts", "connection"))


def _inside(path):
    path = Path(path).resolve()
    return path == NODE_DIR or NODE_DIR in path.parents


def pytest_ignore_collect(collection_path, config):
    """Checks only with hosts to check; the helper modules' doctests only without."""
    if not _inside(collection_path) or collection_path.is_dir():
        return None
    is_check = collection_path.name.startswith("test_")
    if _targets_nodes(config):
        return None if is_check else True
    return True if is_check or collection_path.name == "conftest.py" else None


def pytest_configure(config):
    config.stash[EXPECTED] = {}
    config.stash[VENV_RUNS] = {}
    config.stash[RESULTS] = _RESULTS[0] = Results()
    config.stash[SETTINGS] = {}
    config.stash[MEMBERSHIPS] = {}
    config.stash[HOSTS] = {}
    config.stash[GROUP_RUNS] = {}
    config.stash[DEFAULT_SETTINGS] = _node_config(config)
    inventory = config.getoption("inventory", None)
    if inventory is None:
        if config.getoption("node_limit", None):
            raise pytest.UsageError("--node-limit selects hosts of --inventory; give --inventory too")
        explicit = [arg for arg in config.args if _inside(arg.split("::")[0])]
        named_checks = [arg for arg in explicit if Path(arg.split("::")[0]).name.startswith("test_")
                        or Path(arg.split("::")[0]).resolve() == NODE_DIR]
        if named_checks and not _targets_nodes(config):
            raise pytest.UsageError("tests/node checks nodes: give --inventory INVENTORY [--node-limit NAME], "
                                    "--hosts=HOSTSPEC,... or --connection=local")
        return
    if config.getoption("hosts", None):
        raise pytest.UsageError("give either --inventory or --hosts, not both")
    if config.getoption("node_config", None):
        raise pytest.UsageError("--node-config is for --hosts hosts; inventory hosts carry their own settings")
    try:
        hosts = connection.read_inventory(inventory, data=config.getoption("node_data"))
        selected = connection.limit_hosts(hosts, config.getoption("node_limit"))
        if not selected:
            names = ", ".join(host.name for host in hosts) or "none"
            raise connection.InventoryError(
                f"no host of {inventory} matches --node-limit {' '.join(config.getoption('node_limit'))} "
                f"(hosts: {names})")
        workdir = tempfile.mkdtemp(prefix="node-suite-")
        config.add_cleanup(lambda: shutil.rmtree(workdir, ignore_errors=True))
        ssh_config = connection.write_ssh_config(selected, os.path.join(workdir, "ssh_config"))
        specs = {connection.hostspec(host, ssh_config): host for host in selected}
    except connection.InventoryError as error:
        raise pytest.UsageError(str(error)) from error
    connection.register_backend()
    import testinfra

    config.option.hosts = ",".join(specs)
    data = {host.name: host.data for host in hosts}
    for spec, host in specs.items():
        node = testinfra.get_host(spec)
        name = node.backend.get_pytest_id()
        config.stash[SETTINGS][name], config.stash[HOSTS][name] = host.data, node
        config.stash[MEMBERSHIPS][name] = _membership(data, host.name)


def _membership(data, name):
    """(Member, route target) of inventory host ``name``, or why its group cannot be made."""
    try:
        return membership(data, name)
    except GroupError as error:
        return str(error)


def _node_config(config):
    """Settings of --hosts hosts: --node-config, then --node-data."""
    overrides = {}
    for item in config.getoption("node_data", None) or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise pytest.UsageError(f"--node-data {item!r}: use KEY=VALUE")
        overrides[key] = value
    path = config.getoption("node_config", None)
    if not path:
        return overrides
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError) as error:
        raise pytest.UsageError(f"--node-config {path}: {error}") from error
    if not isinstance(data, dict):
        raise pytest.UsageError(f"--node-config {path}: expected a mapping of settings")
    return {**data, **overrides}


@pytest.fixture(scope="module")
def expected(host, request):
    """This host's settings, facts and plan (bringup.plan), gathered once per session."""
    found = expected_of(request.config, host.backend.get_pytest_id(), host)
    if isinstance(found, NodeNotReady):
        pytest.fail(str(found), pytrace=False)
    return found


def expected_of(config, name, host):
    """Host ``name``'s Expected (or the NodeNotReady why not), gathered once per session: a
    serving group's member planned as its group places it, as deploy plans it."""
    cache = config.stash[EXPECTED]
    if name not in cache:
        settings = config.stash[SETTINGS].get(name, config.stash[DEFAULT_SETTINGS])
        place = config.stash[MEMBERSHIPS].get(name)
        try:
            if isinstance(place, str):
                raise NodeNotReady(place)
            if place is None and settings.get("service_group"):
                raise NodeNotReady(f"{name}: service_group {settings['service_group']!r}: a serving group's member is "
                                   "checked from its inventory (--inventory), which gives its members and ranks")
            cache[name] = gather(host, name, settings, *(place or ()))
        except NodeNotReady as error:
            cache[name] = error
    return cache[name]


@pytest.fixture(scope="module")
def venv_probe(host, expected, request):
    """The venv's python run on this host (venv_probe.py: what test_venv.py and
    test_sglang.py read), run once per session."""
    runs = request.config.stash[VENV_RUNS]
    if expected.name not in runs:
        runs[expected.name] = run_venv_probe(host, expected)
    return runs[expected.name]


def _identify(item):
    """(host, check) of a node check item, else None."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "_testinfra_host" not in callspec.params:
        return None
    check = item.originalname.removeprefix("test_")
    for parameter in ("label", "variable"):
        if parameter in callspec.params:
            check += f"[{callspec.params[parameter]}]"
    return callspec.params["_testinfra_host"].backend.get_pytest_id(), check


# Checks run (and are reported) from the bottom of the stack up.
MODULE_ORDER = ("test_driver", "test_cuda", "test_comm", "test_toolkit", "test_resolution", "test_service_env",
                "test_venv", "test_group", "test_jit_cache", "test_service_unit", "test_sglang", "test_permissions")


def _module_rank(item):
    name = getattr(item, "module", None) and item.module.__name__.rsplit(".", 1)[-1]
    return MODULE_ORDER.index(name) if name in MODULE_ORDER else len(MODULE_ORDER)


def _alone(config, item):
    """Whether ``item`` is a serving group's check of a host in no group (not collected there)."""
    ident = _identify(item)
    if ident is None or getattr(item, "module", None) is None or not item.module.__name__.endswith(".test_group"):
        return False
    place = config.stash[MEMBERSHIPS].get(ident[0])
    settings = config.stash[SETTINGS].get(ident[0], config.stash[DEFAULT_SETTINGS])
    return place == (None, "") or (place is None and not settings.get("service_group"))


def pytest_collection_modifyitems(config, items):
    alone = [item for item in items if _alone(config, item)]
    if alone:
        config.hook.pytest_deselected(items=alone)
        items[:] = [item for item in items if item not in alone]
    if any(_identify(item) for item in items):
        items.sort(key=_module_rank)  # stable: module-scoped fixtures keep their grouping
    for item in items:
        ident = _identify(item)
        if ident:
            # Also land in --junitxml as <property name="node"/"check">.
            item.user_properties += [("node", ident[0]), ("check", ident[1])]


def pytest_runtest_logreport(report):
    props = dict(report.user_properties)
    status = outcome(report)
    if "node" not in props or status is None:
        return
    message = (first_line(report.longreprtext) if status in ("FAIL", "ERROR", "SKIP")
               else props.get(STANDIN, ""))
    _RESULTS[0].add(props["node"], props["check"], status, message)


def pytest_sessionfinish(session, exitstatus):
    """A skipped check is not a pass: the run fails when any host has one."""
    results = session.config.stash.get(RESULTS, None)
    if results and exitstatus == 0 and any(results.failing(host) for host in results.hosts):
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    results = config.stash.get(RESULTS, None)
    if results is None or not results.hosts:
        return
    text = results.render()
    terminalreporter.write_sep("=", "node suite report")
    for line in text.splitlines():
        terminalreporter.write_line(line)
    path = config.getoption("node_report", None)
    if path:
        Path(path).write_text(text + "\n", encoding="utf-8")
        terminalreporter.write_line(f"(written to {path})")
