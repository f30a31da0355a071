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


class SlowHost:
    """A host that never comes back, each connect taking ``connect_s`` of the fake clock:
    what a 10 s SSH connect timeout does to a wait counted in retries."""

    name = "n1"
    def __init__(self, clock, connect_s=10):
        self.connector_data = {}  # pyinfra's askpass clean-up reads it
        self.clock, self.connect_s, self.connected, self.connects = clock, connect_s, False, 0

    def connect(self, **kwargs):
        self.connects += 1
        self.clock.now += self.connect_s

    def disconnect(self):
        self.connected = False

    def get_fact(self, fact, *args, **kwargs):
        return 100_000  # the uptime before the reboot

    def run_shell_command(self, command, **kwargs):
        return True, SimpleNamespace(stdout_lines=[str(self.get_fact(None))])

    def log_styled(self, text, **kwargs):
        pass


class FakeClock:
    def __init__(self):
        self.now = 1_000.0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run_wait(monkeypatch, node, clock, timeout):
    """Run the reboot's function commands (its uptime read, its wait) against ``node``
    with the fake clock standing in for time.monotonic and every sleep."""
    import time

    from pyinfra.operations import server

    monkeypatch.setattr(time, "monotonic", clock.monotonic)
    monkeypatch.setattr(time, "sleep", clock.sleep)
    monkeypatch.setattr(server, "sleep", clock.sleep)
    monkeypatch.setattr(fleet, "RUN", fleet.Run())
    results = []
    for command in driver.rebooted(timeout):
        if isinstance(command, FunctionCommand):
            results.append(command.function(None, node, *command.args, **command.kwargs))
    return results


def test_the_wait_is_bounded_by_the_clock_not_by_counted_retries(monkeypatch):
    """pyinfra counts reboot_timeout / interval retries, each also spending the connect
    time: with a 10 s connect a 900 s setting waited 5432 s. Now the deadline is
    driver_reboot_timeout seconds of a monotonic clock; the last try may take one connect more."""
    clock = FakeClock()
    node = SlowHost(clock)
    started = clock.now
    results = run_wait(monkeypatch, node, clock, 900)
    assert False in results, results  # the wait said the host did not come back
    waited = clock.now - started
    assert 900 <= waited <= 900 + node.connect_s, (waited, node.connects)
    found = fleet.RUN.records["n1"]["driver_reboot"]
    assert found["state"] == "unreachable" and 900 <= found["waited"] <= 910, found


def test_a_host_back_after_a_while_goes_on(monkeypatch):
    clock = FakeClock()
    node = SlowHost(clock)

    def connect(**kwargs):
        node.connects += 1
        clock.now += 10
        node.connected = node.connects >= 5

    node.connect = connect
    node.get_fact = lambda fact, *args, **kwargs: 100_000 if node.connects == 0 else 60
    results = run_wait(monkeypatch, node, clock, 900)
    assert False not in results and node.connects == 5, (results, node.connects)
    assert "n1" not in fleet.RUN.records


class SessionHost:
    """A host whose connections are sessions, as pyinfra's are: ``connect`` does nothing
    while ``connected`` is True, and a dropped connection stays dropped. The first session
    after the reboot reaches the system still going down (its old uptime once, then a dead
    transport); a new connection reaches the rebooted one."""

    name = "n1"

    def __init__(self, clock):
        self.connector_data = {}
        self.clock, self.connected, self.sessions, self.reads = clock, True, 0, 0

    def connect(self, **kwargs):
        self.clock.now += 1
        if not self.connected:
            self.sessions, self.reads, self.connected = self.sessions + 1, 0, True

    def disconnect(self):
        self.connected = False

    def _uptime(self):
        self.reads += 1
        if self.sessions == 0:
            return 100_000  # before the reboot
        if self.sessions == 1:
            if self.reads > 1:
                raise OSError("Socket is closed")  # the old system went down under this connection
            return 100_015  # still the old system
        return 40

    def get_fact(self, fact, *args, **kwargs):
        try:
            return self._uptime()
        except OSError:
            return None  # pyinfra logs the error, fails the host and returns the default

    def run_shell_command(self, command, **kwargs):
        return True, SimpleNamespace(stdout_lines=[str(self._uptime())])

    def log_styled(self, text, **kwargs):
        pass


def test_a_connection_to_the_system_going_down_is_not_reused(monkeypatch):
    """The first connect after the delay reached the system still shutting down: its uptime
    said no boot yet, then the connection died; pyinfra's connect does nothing while the host
    is connected, so every later read went to the dead connection and a host that came back
    was reported unreachable after driver_reboot_timeout. Each try after one that did not
    confirm the boot connects afresh."""
    clock = FakeClock()
    node = SessionHost(clock)
    results = run_wait(monkeypatch, node, clock, 900)
    assert False not in results and node.sessions == 2, (results, node.sessions)
    assert "n1" not in fleet.RUN.records


def test_a_failed_uptime_read_does_not_fail_the_host(monkeypatch):
    """pyinfra's Uptime fact (and the Kernel fact it reads) fails the host for the rest of
    the run when its command fails (state.fail_hosts), so a read that failed once on a
    connection that dropped left the host out of every later step though the next read
    confirmed the boot. Through real pyinfra on @local: two reads fail, the third confirms."""
    from paramiko import SSHException
    from pyinfra.api import Config, Inventory, State
    from pyinfra.api.connect import connect_all
    from pyinfra.context import ctx_host, ctx_state

    inventory = Inventory((["@local", "@chroot//"], {}))
    state = State(inventory, Config())
    connect_all(state)
    local = inventory.get_host("@local")
    real, failures = local.connector.run_shell_command, [1, 1]

    def dropping(*args, **kwargs):
        if failures:
            failures.pop()
            raise SSHException("SSH session not active")
        return real(*args, **kwargs)

    monkeypatch.setattr(local.connector, "run_shell_command", dropping)
    monkeypatch.setattr(fleet, "RUN", fleet.Run())
    with ctx_state.use(state), ctx_host.use(local):
        driver.wait_for_reboot(local, 10**9, 30, delay=0, interval=0)
    assert not failures
    assert local not in state.failed_hosts and local in state.active_hosts
