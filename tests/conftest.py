import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.sandbox_fixtures import (  # noqa: E402,F401
    deployed_node,
    pytest_collection_modifyitems,
    pytest_configure,
    sandbox_host,
    sandbox_node,
    sandbox_ssh,
)

# Deploy files the CLI tests hand to pyinfra (tests/cli/test_driver_step_local.py): they
# run a deploy when imported, so --doctest-modules must not import them.
collect_ignore_glob = ["fixtures/deploy/*.py"]
