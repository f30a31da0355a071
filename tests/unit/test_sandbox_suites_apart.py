"""The sandbox suites run side by side (make test's workers, tests/sandbox/conftest.py):
no two of them may start a node at the same address, or with the same name, or the
later ``sandbox up`` is refused (a loopback address or a bridged one is one node's)."""

import re
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The suites, and the fixtures' shared deployed node (its tests run beside them).
SUITES = [*sorted((TESTS / "sandbox").glob("test_*.py")), TESTS / "sandbox_fixtures.py"]
# A node's address as the suites write it: loopback (127.0.0.1 is the servers', not a
# node's) or the bridge's.
ADDRESS = re.compile(r'"(127\.0\.0\.(?!1")\d+|198\.18\.0\.\d+)"')
# A node's name: the first argument of sandbox_node(...), or a module's NAME constant.
NAME = re.compile(r'sandbox_node\(\s*"([a-z0-9-]+)"|^NAME = "([a-z0-9-]+)"', re.M)


def shared(pattern):
    """What ``pattern`` finds in more than one suite, with those suites."""
    found = defaultdict(set)
    for suite in SUITES:
        for match in pattern.finditer(suite.read_text()):
            found[next(group for group in match.groups() if group)].add(suite.name)
    return {value: sorted(suites) for value, suites in found.items() if len(suites) > 1}


def test_the_patterns_find_the_suites_nodes():
    addresses = {value for suite in SUITES for value in ADDRESS.findall(suite.read_text())}
    assert {"127.0.0.61", "198.18.0.21", "127.0.0.181"} <= addresses, sorted(addresses)
    assert "127.0.0.1" not in addresses


def test_no_two_suites_share_a_node_address():
    assert shared(ADDRESS) == {}


def test_no_two_suites_share_a_node_name():
    assert shared(NAME) == {}
