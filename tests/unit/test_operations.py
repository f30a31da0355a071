"""The custom operations (tasks/operations/), in pyinfra's own style: one JSON case per
file under tests/unit/operations/<module>.<operation>/ (arguments and the facts the
operation reads in; the exact commands it yields, or its noop message, out), run by
pyinfra-testing without a host."""

import dataclasses
import json
from pathlib import Path
from unittest import mock

import pytest
from gevent import monkey

# pyinfra-testing imports pyinfra_cli (for its JSON encoder), whose import patches the
# standard library with gevent; in make test's pytest-xdist workers that strands
# execnet's own queue ("LoopExit: This operation would block forever"). The cases do
# no I/O, so the patch is left out.
with mock.patch.object(monkey, "patch_all"):
    import pyinfra_testing.operations as harness
from pyinfra_testing.util import FakeFact, FakeHost  # noqa: E402

from control import fleet, run  # noqa: E402

CASES = Path(__file__).resolve().parent / "operations"
HOST = "gpu-node-01"


def _named_host(state, facts=None):
    # pyinfra-testing 0.2.1's create_host names the host after its last fact (a
    # shadowed loop variable); messages name the host, so give it a fixed name.
    # A case's "fleet.recorded" (among its facts) is what earlier operations of the run
    # recorded for the fleet summary (control/fleet.py), which some operations read.
    facts = dict(facts or {})
    fleet.RUN.record(HOST, **facts.pop("fleet.recorded", {}))
    return FakeHost(state, HOST, facts=facts, data={})


harness.create_host = _named_host


def _as_json(value):
    # A plan (dataclass) a FunctionCommand carries is compared as its fields, as its case writes it.
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    raise TypeError(f"{value!r} is not JSON")


_parse_commands = harness.parse_commands
harness.parse_commands = lambda commands: json.loads(json.dumps(_parse_commands(commands), default=_as_json))
# Stage names carry the run's id (control/run.py): one fixed id for the cases.
run.RUN_ID = "0123456789abcdef"
# An empty fact (no dpkg work, no keys) must read as empty, as the real value does.
FakeFact.__bool__ = lambda self: bool(self.data)

@pytest.fixture(autouse=True)
def _a_fresh_fleet_record(monkeypatch):
    """Operations record for the fleet summary (control/fleet.py): each case starts with none."""
    monkeypatch.setattr(fleet, "RUN", fleet.Run())


for _operation in sorted(path.name for path in CASES.iterdir() if path.is_dir()):
    globals()[f"Test_{_operation.replace('.', '_')}"] = harness.make_operation_tests(
        "tasks.operations", _operation, CASES / _operation)


def _operations():
    """Every ``@operation`` defined in tasks/operations/, as ``<module>.<operation>``."""
    import importlib
    import pkgutil

    import tasks.operations as package

    found = []
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"tasks.operations.{module_info.name}")
        found += [f"{module_info.name}.{name}" for name, value in vars(module).items()
                  if hasattr(value, "_inner") and value.__module__ == module.__name__]
    return sorted(found)


def test_every_operation_has_its_cases():
    """The project's rule: every custom operation has pyinfra-testing cases here (a
    directory named after it with at least one JSON case), and every case directory
    names an operation that exists."""
    operations = _operations()
    assert len(operations) > 30, operations  # the walk finds them at all
    cases = {path.name for path in CASES.iterdir() if path.is_dir() and any(path.glob("*.json"))}
    assert [name for name in operations if name not in cases] == [], "operations without JSON cases"
    assert sorted(cases - set(operations)) == [], "case directories of no operation"


def test_every_case_can_fail():
    """A case asserts the commands its operation yields, and a case expecting none
    asserts the noop's words too (else a no-op for the wrong reason would pass)."""
    cases = sorted(CASES.glob("*/*.json"))
    loose = [str(path.relative_to(CASES)) for path in cases
             if not (data := json.loads(path.read_text())).get("commands") and "noop_description" not in data
             and "exception" not in data]
    assert cases and loose == []
