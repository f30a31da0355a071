"""Order and lifetime of the sandbox suites, for CI's disk and time.

Serial (``pytest``): the suites on light nodes first, then every test of the one
deployed node (a venv takes about 10 GB), which is taken down after its last test, then
the suites that deploy a venv of their own.

Parallel (``make test``: ``pytest -n 3 --dist loadgroup``, pytest-xdist): work units
(xdist groups) keep what shares state on one worker: every test of the deployed node
("deployed", in their serial order), the suites that build venvs of their own
("venv-suites", one after the other), each other sandbox module (its module-scoped
nodes), the CLI suites (they share ``@local``'s report). The two venv units come first,
so they start at once on two workers (two venv nodes at a time); the third worker takes
the light suites, longest first, whose nodes mostly wait (services starting, timeouts),
and the first two join it when they are done.

A module's light nodes go when the module ends, and each module writes its reports in a
directory of its own (``reports/<module>``): the workers' pyinfra runs never replace
each other's ``summary.json``."""

import os
from unittest import mock

import pytest

from control.reports import REPORTS_VARIABLE
from sandbox import node as sandbox_nodes
from tests.sandbox_fixtures import DEPLOYED, MODULE_NODES, REPO_ROOT

# Suites whose nodes each build a venv (about 10 GB until the node goes down). Serial:
# after the shared deployed node is gone. Parallel: one work unit, so that with the
# deployed node's at most two such nodes are up at a time, whatever the number of workers.
VENV_SUITES = ("test_debian13.py", "test_ubuntu.py", "test_ubuntu_driver.py")
# The other work units of two minutes or more (CI's --durations), longest first, handed
# out before the rest: a long one started last would leave the other workers idle at the end.
LONG_UNITS = ("test_serving_group", "cli", "test_driver_converge", "test_gb200", "test_model_source",
              "test_serving_gate", "test_arm64", "test_nodes_as_found")


def _group(item):
    if "deployed_node" in item.fixturenames:
        return 1
    return 2 if item.path.name in VENV_SUITES else 0


def _parallel_group(item):
    """Order of the work units in a parallel run: longest first."""
    if "deployed_node" in item.fixturenames:
        return (0, 0)
    if item.path.name in VENV_SUITES:
        return (1, 0)
    unit = work_unit(item)
    return (2, LONG_UNITS.index(unit)) if unit in LONG_UNITS else (3, 0)


def work_unit(item):
    """The xdist group ``item`` runs in, or None for a test that runs anywhere."""
    if "deployed_node" in item.fixturenames:
        return "deployed"
    if item.path.parent.name == "sandbox" and item.path.name in VENV_SUITES:
        return "venv-suites"
    if item.path.parent.name == "sandbox" and item.path.name.startswith("test_"):
        return item.path.stem
    if item.path.parent.name == "cli":
        return "cli"
    return None


def parallel(config):
    """Whether this process collects for ``--dist loadgroup`` (on xdist's workers, which
    collect, ``dist`` reads "no" and ``loadgroup`` holds the answer)."""
    return getattr(config.option, "loadgroup", False) or config.getoption("dist", "no") == "loadgroup"


# First: xdist's own hook on a worker names each item's group from these markers, and a
# conftest named on the command line is registered before xdist's, so would run after it.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if not parallel(config):
        items.sort(key=_group)  # stable: each suite keeps its own order
        return
    for item in items:
        unit = work_unit(item)
        if unit:
            item.add_marker(pytest.mark.xdist_group(unit))
    items.sort(key=_parallel_group)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Take the shared deployed node down right after the last test that uses it, and a
    module's own nodes when the next test is another module's (its module-scoped
    fixtures are torn down then too, and start their nodes again if it comes back)."""
    if "deployed_node" in item.fixturenames and (nextitem is None or "deployed_node" not in nextitem.fixturenames):
        sandbox_nodes.down([DEPLOYED])
    if nextitem is None or nextitem.path != item.path:
        done = [name for name in MODULE_NODES if name != DEPLOYED]
        if done:
            sandbox_nodes.down(done)
        MODULE_NODES[:] = [name for name in MODULE_NODES if name == DEPLOYED]


@pytest.fixture(scope="module", autouse=True)
def module_reports(request):
    """``reports/<module>`` for this module's pyinfra runs (a module's own fixture may
    name another); read back through tests/sandbox_fixtures.py's ``reports_dir``."""
    with mock.patch.dict(os.environ, {REPORTS_VARIABLE: str(REPO_ROOT / "reports" /
                                                         request.module.__name__.rsplit(".", 1)[-1])}):
        yield
