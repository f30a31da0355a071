"""Order and lifetime of the sandbox suites, for CI's disk and time: the suites on light
nodes first, then every test of the one deployed node (a venv takes about 10 GB), which
is taken down after its last test, then the suites that deploy a venv of their own."""

import pytest

from sandbox import node as sandbox_nodes
from tests.sandbox_fixtures import DEPLOYED

# Suites that build a venv of their own: after the shared deployed node is gone.
LAST = ("test_debian13.py",)


def _group(item):
    if "deployed_node" in item.fixturenames:
        return 1
    return 2 if item.path.name in LAST else 0


def pytest_collection_modifyitems(config, items):
    items.sort(key=_group)  # stable: each suite keeps its own order


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Take the shared deployed node down right after the last test that uses it."""
    if "deployed_node" in item.fixturenames and (nextitem is None or "deployed_node" not in nextitem.fixturenames):
        sandbox_nodes.down([DEPLOYED])
