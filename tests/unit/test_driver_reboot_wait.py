"""The driver step's wait for a rebooted host (tasks/operations/driver.py): pyinfra's own
``server.reboot`` commands, its reconnect wrapped so that a host that does not come back
is recorded ``unreachable`` with the time waited, in one line, and fails the operation."""

from types import SimpleNamespace

from pyinfra.api import FunctionCommand, StringCommand

from control import fleet
from tasks.operations import driver


def test_the_reboot_is_pyinfras_with_its_reconnect_wrapped():
    commands = list(driver.rebooted(900))
    assert any(isinstance(c, StringCommand) and "reboot" in str(c) for c in commands)
    waits = [c for c in commands if isinstance(c, FunctionCommand) and c.function.__name__ == "reconnect"]
    assert len(waits) == 1
    assert not any(isinstance(c, FunctionCommand) and c.function.__name__ == "wait_and_reconnect" for c in commands)


def test_a_host_that_does_not_come_back_is_unreachable_with_the_time_waited(monkeypatch):
    monkeypatch.setattr(fleet, "RUN", fleet.Run())
    logged = []
    node = SimpleNamespace(name="n1", log_styled=lambda text, **kwargs: logged.append(text))

    def never_back(state, host):
        raise Exception("Server did not reboot in time (reboot_timeout=900s)")  # noqa: TRY002 - as server.reboot does

    assert driver._timed_reconnect(never_back, 900)(None, node) is False
    found = fleet.RUN.records["n1"]["driver_reboot"]
    assert found["state"] == "unreachable" and found["waited"] == 0
    assert "did not come back within 0 s of its reboot (driver_reboot_timeout 900 s" in found["reason"]
    assert logged == [f"n1: {found['reason']}"]


def test_a_host_that_comes_back_goes_on(monkeypatch):
    monkeypatch.setattr(fleet, "RUN", fleet.Run())
    node = SimpleNamespace(name="n1", log_styled=lambda text, **kwargs: None)
    assert driver._timed_reconnect(lambda state, host: None, 900)(None, node) is None
    assert "n1" not in fleet.RUN.records
