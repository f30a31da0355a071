"""The fleet summary of a validate.py or deploy.py run: what the run saw of each host,
gathered while it runs, summarised (bringup/summary.py) when the process ends.

How a pyinfra 3.10 run reaches us:

- The deploy file runs once per *connected* host to collect operations
  (pyinfra_cli/util.py ``_parallel_load_hosts``); ``planned_host`` records each host's
  settings problem, facts and plan here (``record``), in this process's ``RUN``.
- A host pyinfra cannot reach never runs the deploy file: ``connect_all``
  (pyinfra/api/connect.py) fails it before any deploy file is loaded, and the only
  trace is ``host_connect_error(state, host, error)`` on the state's callback
  handlers (pyinfra/api/host.py ``Host.connect``). ``State.init`` creates that
  handler list after the inventory file ran and before ``connect_all``, and nothing
  of ours runs in between; so the inventory file calls ``watch_connections``, which
  adds the handler as soon as this state's ``init`` has made the list.
- The operations' outcomes are read from pyinfra's state (``state.ops``: each host's
  ``OperationMeta``) when the process ends (``atexit``): after pyinfra's own results
  and disconnect, whichever way the run ended (done, ``--dry``, stopped by
  ``--fail-percent``, no host left).

The summary goes to stderr (stdout stays pure JSON under ``pyinfra --json``) and to
``reports/summary.json`` (control/reports.py; written whole, 0600); both are redacted
(bringup/redact.py, through ``summary.summary_document``).
"""

import atexit
import json
import logging
import sys

import gevent
from pyinfra.api.exceptions import ConnectError, PyinfraError
from pyinfra.api.operations import _run_host_ops
from pyinfra.api.state import BaseStateCallback, StateStage
from pyinfra.connectors.ssh import SSHConnector
from pyinfra.context import ctx_state

from bringup import summary
from control import hostkeys
from control.metrics import textfile_dir, write_run_metrics
from control.reports import drop_host_reports, reports_dir, save

STAGE_WORDS = {StateStage.Setup: "while loading the inventory", StateStage.Connect: "while connecting",
               StateStage.Prepare: "while preparing operations", StateStage.Execute: "while executing operations"}


class Run:
    """What this process saw of the run: one record per host the deploy file ran for,
    and the connection error of each host that could not be reached."""

    def __init__(self):
        self.records = {}
        self.connect_errors = {}
        self.lost_connections = {}
        self.purpose = None
        self.exit_hook = False
        self.json_printed = False

    def record(self, host, **fields):
        self.records.setdefault(host, {"host": host}).update(fields)


RUN = Run()


def connection_alive(host):
    """Whether the host's SSH connection still stands (True for connectors without one)."""
    client = getattr(host.connector, "client", None)
    transport = client.get_transport() if client is not None and hasattr(client, "get_transport") else None
    return transport is None or transport.is_active()


def refuse_unchecked_host_keys(host):
    """Before ``host`` connects: when the data its SSH connector will use (inventory,
    group data and ``--data`` merged, pyinfra's defaults filled in) would leave its host
    key unchecked (control/hostkeys.py), make this connection fail with one line
    instead. pyinfra then fails that host alone, as for any connection error, and the
    summary gives the line as its reason; nothing is sent to the host."""
    connector = getattr(host, "connector", None)
    if not isinstance(connector, SSHConnector):
        return ""
    line = hostkeys.refusal(host.name, connector.data)
    if line:
        def refused():
            raise ConnectError(line)
        connector.connect = refused
    return line


class RunWatcher(BaseStateCallback):
    """Refuses a host whose host key would go unchecked, before it connects; keeps
    pyinfra's reason for each host it could not connect to, and the operation during
    which a host's SSH connection died (pyinfra itself only says the operation
    "executed 0 commands")."""

    @staticmethod
    def host_before_connect(state, host):
        refuse_unchecked_host_keys(host)

    @staticmethod
    def host_connect_error(state, host, error):
        reason = error.args[0] if getattr(error, "args", None) else error
        RUN.connect_errors[host.name] = summary.ANSI.sub("", str(reason))

    @staticmethod
    def operation_host_error(state, host, op_hash, retry_count=0, max_retries=0):
        if not connection_alive(host):
            RUN.lost_connections.setdefault(host.name, op_hash)


def _current_state():
    return ctx_state.get() if ctx_state.isset() else None


def _add_handler(state):
    if not any(isinstance(handler, RunWatcher) for handler in state.callback_handlers):
        state.add_callback_handler(RunWatcher())


def fail_percent_of(argv):
    """The ``--fail-percent`` of a pyinfra command line, else None (pyinfra's default).

    >>> fail_percent_of(["pyinfra", "--fail-percent", "20", "i.py", "validate.py"]), fail_percent_of(["pyinfra"])
    (20, None)
    >>> fail_percent_of(["pyinfra", "--fail-percent=0", "validate.py"])
    0
    """
    for index, argument in enumerate(argv):
        value = argument.partition("=")[2] if argument.startswith("--fail-percent=") else \
            (argv[index + 1] if argument == "--fail-percent" and index + 1 < len(argv) else None)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _confirmed(msg):
    """validate.py's answer to pyinfra's "Press enter to execute": yes, unasked."""
    return True


def executes_nothing(argv):
    """Whether this pyinfra command line runs no operation: ``--dry``, or ``--json`` without
    ``-y`` (pyinfra prints what would change and stops).

    >>> executes_nothing(["pyinfra", "inv.py", "deploy.py", "--dry"]), executes_nothing(["pyinfra", "--json", "-y"])
    (True, False)
    >>> executes_nothing(["pyinfra", "--json", "inv.py", "deploy.py"])
    True
    """
    return "--dry" in argv or ("--json" in argv and not {"-y", "--yes"} & set(argv))


def validate_never_asks(state, argv=None):
    """validate.py changes nothing (it only refuses hosts), so it never asks: without
    ``-y`` pyinfra 3.10 asks "Press enter to execute" before every deploy file's run and
    "continue?" when a host fails (and, without a terminal, ends in ``EOFError``); its
    ``--fail-percent`` is then replaced by 0. For a validate.py run this takes both
    questions away and gives ``--fail-percent`` back its meaning. A no-op otherwise."""
    argv = sys.argv if argv is None else argv
    if summary.purpose_from_argv(argv) != "validate":
        return
    try:
        from pyinfra_cli import cli
    except ImportError:  # pyinfra's API without its CLI: nothing asks
        return
    cli._do_confirm = _confirmed


def json_stdout_always(argv=None):
    """Under ``pyinfra --json``, stdout is one JSON document whatever happens: pyinfra
    prints its run's JSON only when the run gets to its end, and nothing when no host is
    left (every host refused or unreachable). Its printer is wrapped to note that it ran;
    ``write_summary`` prints the document itself when it did not."""
    argv = sys.argv if argv is None else argv
    if "--json" not in argv or summary.purpose_from_argv(argv) is None:
        return
    try:
        from pyinfra_cli import cli
    except ImportError:
        return
    if getattr(cli.print_run_json, "noted", False):
        return
    original = cli.print_run_json

    def print_run_json(state, dry):
        RUN.json_printed = True
        return original(state, dry)

    print_run_json.noted = True
    cli.print_run_json = print_run_json


def _print_json_if_missing(state, dry, argv):
    """The run's JSON document on stdout when pyinfra did not print one (json_stdout_always)."""
    if "--json" not in argv or RUN.json_printed:
        return
    RUN.json_printed = True
    try:
        from pyinfra_cli.prints import print_run_json
        print_run_json(state, dry=dry or getattr(state, "current_stage", None) != StateStage.Disconnect)
    except Exception:  # noqa: BLE001 - pyinfra's printer on a run it abandoned: the plain document
        print(json.dumps({"plan": {}, "results": None}), flush=True)
    if getattr(state, "should_raise_failed_hosts", None) is not None:
        state.should_raise_failed_hosts = None
        if getattr(state, "config", None) is not None:
            state.config.FAIL_PERCENT = fail_percent_of(argv)


def quiet_ssh_tracebacks(state):
    """At default verbosity a host that cannot be reached is pyinfra's one line: paramiko
    also logs the failure of its transport thread with a traceback ("Exception (client):
    Error reading SSH protocol banner" and two tracebacks, through logging's last-resort
    handler). That log is kept for ``-v``."""
    if verbose(state):
        return
    log = logging.getLogger("paramiko")
    if not any(isinstance(handler, logging.NullHandler) for handler in log.handlers):
        log.addHandler(logging.NullHandler())
    log.propagate = False


def no_wait_hosts_fail(state):
    """Under ``--no-wait`` pyinfra runs each host's operations in a greenlet of its own
    (pyinfra/api/operations.py ``_run_no_wait_ops``): an operation that fails, or raises, ends
    the greenlet with an exception, the host's remaining operations never run, yet pyinfra
    never fails the host (the run exited 0) and gevent's hub prints the greenlet's traceback.
    The hub's error handler is wrapped: such a host is failed (exit status 1, the summary's
    verdict), and pyinfra's own "Error in operation" is not printed again as a traceback
    (its one line and its results' table said it; ``-v`` keeps the traceback). Anything else
    is printed as gevent prints it."""
    hub = gevent.get_hub()
    if getattr(hub, "gpu_bringup_no_wait", False):
        return
    hub.gpu_bringup_no_wait = True
    printed = hub.handle_error

    def handle_error(context, kind, value, trace):
        if getattr(context, "_run", None) is _run_host_ops and len(getattr(context, "args", ())) == 2:
            context.args[0].failed_hosts.add(context.args[1])
            if kind is PyinfraError and str(value).startswith("Error in operation ") and not verbose(state):
                return None
        return printed(context, kind, value, trace)

    hub.handle_error = handle_error


def watch_connections():
    """From the inventory file: have this run's connection errors recorded and the
    summary printed at the end, and a validate.py run never ask for confirmation
    (``validate_never_asks``). Does nothing outside a pyinfra CLI run."""
    state = _current_state()
    if state is None:
        return
    _register_exit_hook()
    quiet_ssh_tracebacks(state)
    no_wait_hosts_fail(state)
    if getattr(state, "initialised", False):
        _add_handler(state)
        validate_never_asks(state)
        json_stdout_always()
        return
    original = state.init

    def init(*args, **kwargs):
        result = original(*args, **kwargs)
        _add_handler(state)
        validate_never_asks(state)
        json_stdout_always()
        return result

    state.init = init


def record(host, purpose, **fields):
    """Record what ``purpose`` ("validate", "deploy") saw of ``host``: settings_error,
    plan_error (any other failure while planning it, one line), probe_failed, facts, plan
    (NodePlan.as_dict())."""
    RUN.purpose = purpose
    _register_exit_hook()
    state = _current_state()
    if state is not None:
        no_wait_hosts_fail(state)
    if state is not None and getattr(state, "initialised", False):
        _add_handler(state)
    RUN.record(host, purpose=purpose, **fields)


def recorded(host, field):
    """What this run recorded as ``field`` of ``host`` ({} when nothing).

    >>> recorded("no-such-host", "service_serving")
    {}
    """
    return (RUN.records.get(host) or {}).get(field) or {}


def _register_exit_hook():
    if not RUN.exit_hook:
        RUN.exit_hook = True
        atexit.register(write_summary)


def _output_lines(meta):
    output = getattr(meta, "_combined_output", None)
    if output is None:
        return []
    return list(output.stderr_lines) or list(output.stdout_lines)


LOST = "the SSH connection was lost while it ran (the remote command stops with its session); run deploy again"


def operations_of(state, host, lost_at=None):
    """Each operation pyinfra collected for ``host``: name, status and error line
    (``lost_at``: the operation during which its SSH connection died)."""
    operations = []
    for op_hash in host.op_hash_order:
        data = state.ops.get(host, {}).get(op_hash)
        if data is None:
            continue
        meta = data.operation_meta
        names = sorted(state.op_meta[op_hash].names) if op_hash in state.op_meta else [op_hash]
        entry = {"name": names[0] if names else op_hash, "status": summary.NOT_RUN, "error": ""}
        if meta.is_complete():
            if meta.did_succeed(_raise_if_not_complete=False):
                entry["status"] = summary.CHANGED if meta.did_change() else summary.UNCHANGED
            else:
                entry["status"] = summary.ERROR
                entry["error"] = LOST if op_hash == lost_at else summary.error_line(_output_lines(meta))
        operations.append(entry)
    return operations


def outcomes(state, run=RUN):
    """Every host this run targeted, as summary outcomes (plain data)."""
    found = []
    for host in state.inventory:
        reached = host in state.activated_hosts
        if not (reached or host.name in run.connect_errors or state.is_host_in_limit(host)):
            continue
        outcome = dict(run.records.get(host.name, {"host": host.name}))
        outcome["reached"] = reached
        outcome["connect_error"] = run.connect_errors.get(host.name, "")
        outcome["failed"] = host in state.failed_hosts
        outcome["metrics_dir"] = textfile_dir(host.data.dict() if hasattr(host.data, "dict") else {})
        if reached and not (outcome.get("plan") or outcome.get("settings_error") or outcome.get("plan_error")) \
                and outcome["failed"]:
            outcome.setdefault("probe_failed", True)
        operations = operations_of(state, host, run.lost_connections.get(host.name))
        outcome["operations"] = [op for op in operations if not op["name"].startswith("Refuse ")]
        found.append(outcome)
    return found


def stopped_reason(state, dry):
    """Why the run ended before its last stage, or "" when it did not."""
    stage = getattr(state, "current_stage", StateStage.Disconnect)
    if stage == StateStage.Disconnect or (dry and stage == StateStage.Prepare):
        return ""
    if not state.active_hosts:
        return ""  # every host failed: nothing was left to stop, each row says why
    return (f"pyinfra stopped the run {STAGE_WORDS.get(stage, '')}: its error is above (more hosts failed than "
            "--fail-percent allows, or no host was left)")


def verbose(state):
    """pyinfra's -v: the per-host reports are printed as hosts are planned."""
    return bool(getattr(state, "print_noop_info", False))


def write_summary(argv=None):
    """At process end: print the summary (stderr) and write reports/summary.json."""
    argv = sys.argv if argv is None else argv
    purpose = RUN.purpose or summary.purpose_from_argv(argv)
    state = _current_state()
    if purpose is None or state is None or not getattr(state, "initialised", False):
        return
    dry = executes_nothing(argv)
    _print_json_if_missing(state, dry, argv)
    found = outcomes(state)
    try:
        # A host planned no report this run keeps none of an earlier run's (the hint below).
        drop_host_reports([outcome["host"] for outcome in found if not outcome.get("plan")])
    except OSError as error:
        print(f"-- an earlier run's host report could not be removed: {error.strerror}: {error.filename}",
              file=sys.stderr, flush=True)
    document = summary.summary_document(purpose, found, executed=not dry, stopped=stopped_reason(state, dry))
    reports = reports_dir()
    summary_file = reports / "summary.json"
    try:
        save(summary_file, document)
        where = f"written to {summary_file}"
    except OSError as error:
        where = f"could not be written to {summary_file}: {error.strerror}"
    text = summary.render(document)
    hint = ("" if verbose(state) else
            f"-- each host's report: pyinfra -v ..., or python -m bringup.report {reports}/<host>.json\n")
    print(f"\n{text}\n{hint}-- summary {where}", file=sys.stderr, flush=True)
    # After the summary: the textfiles (metrics_textfile_dir) never cost the run its table;
    # none for --dry (it would replace a host's last real verdict with "dry run"). validate
    # changes nothing: with --json and without -y its verdicts are real, and CI runs it so.
    try:
        problems = [] if "--dry" in argv or (dry and purpose != "validate") else \
            write_run_metrics(purpose, found, document["hosts"])
    except Exception as error:  # noqa: BLE001 - at process end: one line, never a traceback
        problems = [f"metrics_textfile_dir: the textfiles could not be made: {type(error).__name__}: {error}"]
    for line in problems:
        print(line, file=sys.stderr, flush=True)
