"""The service's model fetched into its hub cache before the unit starts
(``service_model_fetch``)."""

import shlex

from pyinfra import host
from pyinfra.api import operation

from bringup.layout import NodeLayout, ProbeInputs
from bringup.plan import SYSTEM_PYTHON
from bringup.plan.model import ModelFetchPlan
from bringup.plan.model_source import COMPLETE_RECORD, FETCHING_MARK, entry_partial
from facts.node import ModelSource
from tasks.operations.progress import StreamedCommand
from tasks.operations.sglang import as_plan


def cached(state):
    """Whether the ModelSource fact finds the model in the hub cache, whole
    (``entry_partial``: an interrupted fetch is fetched again) and readable by the
    service user (``unknown`` only before the account exists: the fetch then fails
    naming it).

    >>> snapshot = {"fetching": False, "record": "none", "incomplete": 0, "shards_missing": 0, "weights": 1}
    >>> whole = {"model": "Qwen/Qwen3-0.6B", "revision": "ab12", "snapshot": snapshot, "config": {"user": "sglang"},
    ...          "readable": "yes"}
    >>> cached(whole), cached({**whole, "config": None}), cached({**whole, "snapshot": {**snapshot, "incomplete": 1}})
    (True, False, False)
    """
    return bool(state and state.get("config") and state.get("readable") == "yes" and not entry_partial(state))


# Run as the service user once ``hf download`` exited 0: the record the probe holds the
# snapshot to (files/probe.d/model.sh SNAPSHOT_STATE), written whole (a temporary file renamed):
# the model, the snapshot refs/main names, every file of the snapshot whose blob is there.
# shellcheck disable=SC2016
RECORD_SCRIPT = r"""set -u
entry=$1 model=$2 revision=
read -r revision < "$entry/refs/main" || :
case $revision in "" | *[!0-9a-f]*) echo "$entry/refs/main names no snapshot" >&2; exit 1 ;; esac
snap=$entry/snapshots/$revision
{ [ -d "$snap" ] && [ ! -L "$snap" ]; } || { echo "$snap is not a directory" >&2; exit 1; }
umask 022
tmp=$entry/.gpu-bringup-complete.$$
{ printf 'repo=%s\nrevision=%s\n' "$model" "$revision" &&
  (cd "$snap" && find -L . -mindepth 1 -type f -print) | sed 's|^\./|file=|' | LC_ALL=C sort; } > "$tmp" &&
mv -f "$tmp" "$entry/""" + COMPLETE_RECORD + '" &&\nrm -f "$entry/' + FETCHING_MARK + '"\n'

# Run as the service user before ``hf download``: the mark of a fetch under way, taken
# away with the record; a fetch killed before it ends leaves it (entry_partial).
START_SCRIPT = 'umask 022 && mkdir -p -- "$1" && : > "$1/' + FETCHING_MARK + '"\n'


# The bound of each script run as the service user (the fetch's mark and its record), in
# seconds: the service user's cache may stall (a mount) or hold a tree of its making.
SCRIPT_TIMEOUT = 300


def as_service_user(fetch, script):
    """``script`` run by root as the service user (the distribution's runuser and sh, a
    clean environment), the model's cache entry and the model as its arguments, never read
    by root's shell; killed after ``SCRIPT_TIMEOUT`` seconds.

    >>> as_service_user(ModelFetchPlan("Qwen/Qwen3-0.6B", "/h", "/v/bin/hf", "sglang", "/home", "/e"), "true").split()
    ['timeout', '-k', '10', '300', 'env', '-i', 'PATH=/usr/sbin:/usr/bin:/sbin:/bin', 'runuser', '-u', 'sglang', '--', \
'/bin/sh', '-c', 'true', 'sh', '/h/models--Qwen--Qwen3-0.6B', 'Qwen/Qwen3-0.6B']
    """
    entry = f"{fetch.cache}/models--{fetch.model.replace('/', '--')}"
    return shlex.join(["timeout", "-k", "10", str(SCRIPT_TIMEOUT), "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                       "runuser", "-u", fetch.user, "--", "/bin/sh", "-c", script, "sh", entry, fetch.model])


def record_command(fetch):
    """The command root runs after the fetch: ``RECORD_SCRIPT`` as the service user."""
    return as_service_user(fetch, RECORD_SCRIPT)


def fetch_command(fetch, host_name):
    """The fetch as one shell command run by root: the venv's ``hf download`` (huggingface_hub
    1.33.0's CLI: ``hf download --cache-dir DIR -- REPO_ID``, cli/download.py; typer's parser,
    click's, ends the options at ``--``, so no model id reads as one) as the service
    user with the service's environment (files/with-service-env: the env file's HF_ENDPOINT
    and HF_TOKEN reach ``hf`` as its environment, never its arguments), bound to the SSH
    session and to the timeout; a failure is one line naming the host, the model and the
    fix, and fails the host before the unit is written or started.

    >>> command = fetch_command(ModelFetchPlan("Qwen/Qwen3-0.6B", "/h/.cache/huggingface/hub", "/v/bin/hf", "sglang",
    ...     "/h", "/e", 60, "/usr/bin:/bin", "/l/with-service-env", "/l/session-bound"), "n1")
    >>> command[command.index("{ timeout -k 30"):][:50]
    '{ timeout -k 30 60 /usr/bin/python3 -I /l/session-'
    """
    run = ["timeout", "-k", "30", str(fetch.timeout), SYSTEM_PYTHON, "-I", fetch.session_bound, fetch.runner,
           "--as", fetch.user, fetch.home, fetch.base_path, fetch.env_file, "env", "HF_HUB_DISABLE_TELEMETRY=1",
           "HF_HUB_DISABLE_UPDATE_CHECK=1",
           fetch.hf, "download", "--cache-dir", fetch.cache, "--", fetch.model]
    said = f"model: fetching {fetch.model} into {fetch.cache} as {fetch.user} (service_model_fetch)"
    # The exit status goes between two quoted halves: no value of the plan is ever read by the shell.
    failed = (shlex.quote(f"{host_name}: service_model_fetch: hf download {fetch.model} failed (exit ") + '"$status"'
              + shlex.quote(f"; 124: not done within service_model_fetch_timeout, {fetch.timeout} s); the unit was not "
                            "(re)started. Make the hub reachable from the node (HF_ENDPOINT in service_env for a "
                            "mirror, HF_TOKEN for a gated model), raise the timeout, or put the model into "
                            f"{fetch.cache} yourself; then deploy again"))
    missing = (f"{host_name}: service_model_fetch: {fetch.hf} is not there (huggingface_hub >= 1.0's CLI); the unit "
               f"was not (re)started. Use a venv whose huggingface_hub has it, or put {fetch.model} into "
               f"{fetch.cache} yourself")
    unstarted = shlex.quote(f"{host_name}: service_model_fetch: {fetch.user} cannot create the cache entry of "
                            f"{fetch.model} in {fetch.cache}; the unit was not (re)started. Let {fetch.user} write "
                            "there (or put the model there yourself), then deploy again")
    unrecorded = shlex.quote(f"{host_name}: service_model_fetch: hf download {fetch.model} exited 0 but its "
                             f"completion record could not be written into {fetch.cache}; the unit was not "
                             "(re)started. Check the cache entry (refs/main, snapshots/), then deploy again")
    return (f"echo {shlex.quote(said)} && {{ [ -x {shlex.quote(fetch.hf)} ] || {{ echo {shlex.quote(missing)} >&2; "
            f"exit 1; }}; }} && {{ {as_service_user(fetch, START_SCRIPT)} || {{ echo {unstarted} >&2; exit 1; }}; }} "
            f"&& {{ {shlex.join(run)} || {{ status=$?; echo {failed} >&2; exit 1; }}; }} && "
            f"{{ {record_command(fetch)} || {{ echo {unrecorded} >&2; exit 1; }}; }}")


@operation()
def model_fetched(fetch: ModelFetchPlan, layout: NodeLayout):
    """
    Fetch the hub model into the service's hub cache, as the service user, unless the
    cache holds it (checked when this runs: the probe's model section, without asking
    the hub).

    + fetch: the plan's ``ModelFetchPlan``
    + layout: the plan's ``NodeLayout`` (what the probe looks at)

    **Example**:

    .. code:: python

        model_fetched(fetch=node.model_fetch, layout=node.layout)
    """
    fetch, layout = as_plan(ModelFetchPlan, fetch), as_plan(NodeLayout, layout)
    # HF_HUB_OFFLINE for the check only: the cache is what it looks at; the hub is hf's to ask.
    inputs = ProbeInputs(layout, model=fetch.model, model_env=(("HF_HUB_CACHE", fetch.cache), ("HF_HUB_OFFLINE", "1")))
    state = host.get_fact(ModelSource, inputs=inputs)
    if cached(state):
        host.noop(f"{fetch.cache} holds {fetch.model} (snapshot {(state.get('revision') or '')[:12]})")
        return
    yield StreamedCommand(fetch_command(fetch, host.name))
