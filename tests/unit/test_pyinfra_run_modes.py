"""What docs/deploy.md ("Rolling restarts") says of pyinfra 3.10's run modes, held to
pyinfra's own State and Inventory: a pyinfra that changes them fails here, and the page
changes with it. The run itself, through the CLI on two nodes, is
tests/sandbox/test_serving_gate.py's ``--serial`` test."""

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.exceptions import PyinfraError

NAMES = [f"gpu-{index:02d}" for index in range(1, 4)]


def activated_state(fail_percent):
    """A State whose three hosts are all active, as after connecting (no connection made)."""
    inventory = Inventory((NAMES, {}))
    state = State(inventory, Config(FAIL_PERCENT=fail_percent))
    for host in inventory:
        state.activate_host(host)
    return inventory, state


def test_fail_percent_0_raises_at_the_first_failed_host():
    """``_run_serial_ops`` hands each failed host to ``State.fail_hosts``: with 0 it raises,
    and the hosts after it are never run."""
    inventory, state = activated_state(0)
    with pytest.raises(PyinfraError, match=r"^Over 0% of hosts failed \(33%\)$"):
        state.fail_hosts({inventory.get_host("gpu-01")})


def test_without_fail_percent_the_run_goes_on_to_the_others():
    inventory, state = activated_state(None)
    state.fail_hosts({inventory.get_host("gpu-01")})
    assert sorted(host.name for host in inventory.get_active_hosts()) == ["gpu-02", "gpu-03"]


def test_the_serial_order_is_a_sets_not_the_inventorys():
    """``_run_serial_ops`` walks ``Inventory.get_active_hosts()``, a list made from
    ``State.active_hosts``: a set, whose order is not the inventory's (nor the same from
    one run to the next), so a run that must take hosts in an order uses ``--limit``."""
    inventory, state = activated_state(None)
    assert type(state.active_hosts) is set
    assert set(inventory.get_active_hosts()) == state.active_hosts
