"""pyinfra's own operations as the tasks call them, in the same JSON-case style
(tests/unit/pyinfra_operations/<module>.<operation>/): what pyinfra 3.10 yields for the
facts given. apt.packages with ``name=version`` pins and ``allow_downgrades``: the
toolkit lock's versions, moved up or down to the lock."""

from pathlib import Path

import pyinfra_testing.operations as harness

import tests.unit.test_operations  # noqa: F401  (the named host and empty-fact fixes)

CASES = Path(__file__).resolve().parent / "pyinfra_operations"

for _operation in sorted(path.name for path in CASES.iterdir() if path.is_dir()):
    globals()[f"Test_{_operation.replace('.', '_')}"] = harness.make_operation_tests(
        "pyinfra.operations", _operation, CASES / _operation)
