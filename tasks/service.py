"""The SGLang systemd unit: written everywhere; enabled, started and restarted on change
where systemd runs and a model is set."""

from pyinfra import host, state
from pyinfra.api import deploy
from pyinfra.facts.files import Directory
from pyinfra.facts.systemd import SystemdStatus
from pyinfra.operations import systemd
from pyinfra.operations.util import any_changed

from bringup.release import pending
from control import group_gate
from facts.release import ReleaseLook, release_paths
from tasks.operations.files import api_key_file_checked, api_key_put, directory_if_missing, whole_template
from tasks.operations.model import model_fetched
from tasks.operations.release import release_promoted, release_recorded, rolled_back_outcome
from tasks.operations.group import HELD, NOT_SERVING, group_stopped
from tasks.operations.serving import gate_serving, host_serving, service_serving
from tasks.rollback import rolled_back, sglang_rollback


@deploy("SGLang service")
def sglang_service(node, changes=()):
    """
    Render the unit; on a systemd host with a model, enable and start it, and restart a
    running service when its unit, its environment or its venv changed in this run
    (a run with no change restarts nothing); then wait until it serves (the readiness
    gate, tasks/operations/serving.py: ``service_ready_timeout``). Before a restart, the
    release it ran is kept as the rollback (files/release.sh); with ``service_rollback:
    on-failure`` a host whose gate fails is put back on it (tasks/rollback.py) and fails,
    ``rolled back``. Drop-ins (sglang.service.d/) are the operator's and stay as they are.
    A serving group's members do all of it as one (control/group_gate.py): every member
    restarts when any changed, none while one failed earlier in the run, the group serves
    when every member's gate passed, and it goes back whole or not at all.

    + node: the NodePlan (``service``, ``layout``)
    + changes: operations of this run whose change the running service must pick up
    """
    service = node.service
    key = None
    if service.api_key_source:
        # After the account step: the file's group is the service user's.
        directory_if_missing(name="Directory of the API key file", path=service.api_key_dir)
        key = api_key_put(name="Upload the API key file", src=service.api_key_source, dest=service.api_key_file,
                          group=service.user)
    elif service.api_key_file:
        api_key_file_checked(name="Check the API key file", path=service.api_key_file, user=service.user)
    if node.model_fetch:
        # Before the unit is written or started: a fetch that fails leaves the service as it was.
        model_fetched(name=f"Fetch {node.model_fetch.model} into the service's hub cache", fetch=node.model_fetch,
                      layout=node.layout)
    unit = whole_template(name="SGLang systemd unit", src="files/templates/sglang.service.j2", dest=service.unit,
                          service=service)
    if not (host.get_fact(Directory, path="/run/systemd/system") and service.enable):
        return
    systemd.daemon_reload(name="Reload systemd (the unit changed)", _if=unit.did_change)
    unit_name = node.layout.unit_name
    # Releases (files/release.sh) are recorded for a managed venv: a change live on the
    # node that the service was not restarted for (an interrupted deploy) restarts it too.
    releases = node.venv.managed
    asks_restart = (unit, *changes, *([key] if key else []))
    changed_here = any_changed(*asks_restart)
    live_not_started = releases and pending(host.get_fact(ReleaseLook, **release_paths(node.layout)))
    changed = (lambda: True) if live_not_started else changed_here
    group = node.group
    if group is not None:
        # A serving group restarts as one, whichever member changed or was not running (started
        # alone, a member cannot join the others' running group), or not at all while a member
        # failed earlier in this run or does not reach this step (control/group_gate.py).
        stopped = not host.get_fact(SystemdStatus, services=[unit_name]).get(unit_name, False)
        group_gate.join(group, host.name, asks_restart, pending=bool(live_not_started) or stopped)
        changed = lambda: group_gate.changed(group.name)  # noqa: E731 - the _if of several operations
        group_stopped(name="Hold the serving group (a member cannot restart with it)", group=group.name, stage=HELD,
                      _if=lambda: changed() and bool(group_gate.held(state, group.name)))
    if releases:
        release_promoted(name="Keep the release sglang ran as the rollback", layout=node.layout, _if=changed)
    started = systemd.service(name="Enable and start sglang", service=unit_name, enabled=True, running=True)
    systemd.service(name="Restart sglang (its unit, environment or venv changed)", service=unit_name,
                    restarted=True, _if=lambda: changed() and not started.did_change())
    if releases:
        release_recorded(name="Record the release sglang runs", layout=node.layout,
                         _if=lambda: changed() or started.did_change())
    on_failure = releases and service.rollback == "on-failure"
    service_serving(name="Wait for sglang to serve", service=service, unit_name=unit_name, fail_host=not on_failure)
    if group is not None and not on_failure:
        group_stopped(name="The serving group serves as one", group=group.name, stage=NOT_SERVING,
                      _if=lambda: gate_serving(host.name)[0] and not host_serving(host.name)[0])
    if on_failure:
        sglang_rollback(node, purpose="deploy", when=lambda: not host_serving(host.name)[0])
        rolled_back_outcome(name="Rolled back: the change did not serve", unit_name=unit_name,
                            _if=lambda: rolled_back() and host_serving(host.name)[0])
