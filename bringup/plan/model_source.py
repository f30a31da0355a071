"""Where ``service_model`` comes from, and whether the service user can have it: a local
directory, a hub id already in the service's hub cache, or the hub itself answering from
the node (the probe's ``model`` fact, files/probe.d/model.sh probe_model); and what deploy adds:
``HF_HUB_OFFLINE=1`` for an offline node whose cache holds the model, the fetch
(``service_model_fetch``) of a hub model into that cache before the unit starts.

A model that cannot be had is a service that never serves (SGLang retries the hub, its
unit ``active (running)``), said before deploy changes anything: a blocker where this
deploy starts the service, a warning where it does not (``deploy_steps`` without
``service``, ``service_enable: false``): the other steps are still worth doing.

    >>> unreachable = {"model": "Qwen/Qwen3-0.6B", "kind": "hub", "hub": {"status": None, "error": "timed out"}}
    >>> decide(unreachable, "sglang", serving=True).code
    'MODEL_UNAVAILABLE'
    >>> whole = {"fetching": False, "record": "none", "incomplete": 0, "shards_missing": 0, "weights": 1}
    >>> cached = {**unreachable, "revision": "ab12", "snapshot": whole, "config": {"user": "root"}, "readable": "yes"}
    >>> decide(cached, "sglang", serving=True).offline
    True
"""

from dataclasses import dataclass, replace

from bringup import redact
from bringup.findings import BLOCKER, FIX, INFO, WARNING, Finding
from bringup.layout import SERVICE_BASE_PATH
from bringup.plan.model import ModelFetchPlan
from bringup.planned_env import OFFLINE_KEY

# The record deploy's fetch writes into the cache entry once ``hf download`` exited 0
# (tasks/operations/model.py; read by files/probe.d/model.sh SNAPSHOT_STATE).
COMPLETE_RECORD = ".gpu-bringup-complete"
# ...and the mark it leaves there while it runs (taken away with the record).
FETCHING_MARK = ".gpu-bringup-fetching"
# huggingface_hub's true values for HF_HUB_OFFLINE (1.33.0 constants.py ENV_VARS_TRUE_VALUES).
TRUE_VALUES = ("1", "ON", "YES", "TRUE")


@dataclass(frozen=True)
class ModelDecision:
    """Where the model comes from (``source``: path, cache, hub, none) and the finding
    that says so; ``offline``: deploy writes HF_HUB_OFFLINE=1; ``fetch``: deploy fetches
    it into the cache before the unit starts."""

    source: str
    code: str
    severity: str
    message: str
    fix: str
    offline: bool = False
    fetch: bool = False


def entry_partial(fact):
    """Why the hub cache entry's snapshot is not whole ("" when it is; the probe's
    ``snapshot``, files/probe.d/model.sh SNAPSHOT_STATE). huggingface_hub writes ``refs/main``
    and the small files (config.json) before the weights, and each blob as
    ``blobs/<etag>.incomplete`` until it is whole (1.33.0 file_download.py: ``blob_path +
    ".incomplete"``, and ``<etag>.<8 hex>.incomplete`` in ``_download_to_tmp_and_move``,
    which a killed process leaves behind; the cache's layout:
    https://huggingface.co/docs/hub/local-cache): a killed fetch leaves an entry that looks
    cached (seen with the real ``hf download`` against tests/hub_double.py serving_hub). Whole is the fetch's record (``COMPLETE_RECORD``, written after ``hf
    download`` exited 0) naming this model and snapshot, every file it lists there, and
    no fetch under way (``FETCHING_MARK``, left by one killed before its end); or, for an
    entry without a mark or a record of this snapshot (the operator's, or one SGLang's own
    download moved on), weights in the snapshot and no ``.incomplete``
    blob.

    >>> whole = {"fetching": False, "record": "none", "incomplete": 0, "shards_missing": 0, "weights": 1}
    >>> entry_partial({"model": "Qwen/Qwen3-0.6B", "revision": "ab12", "snapshot": whole})
    ''
    >>> entry_partial({"model": "Qwen/Qwen3-0.6B", "revision": "ab12", "snapshot": {**whole, "weights": 0}})
    'its snapshot ab12 holds no weights (*.safetensors, *.bin...)'
    >>> entry_partial({"model": "Qwen/Qwen3-0.6B", "revision": "ab12", "snapshot": {**whole, "fetching": True}})
    "deploy's fetch of it did not finish (its .gpu-bringup-fetching is there)"
    """
    snapshot, revision = fact.get("snapshot"), fact.get("revision") or ""
    if not revision:
        return "refs/main names no snapshot"
    if not snapshot:
        return "the probe did not judge its snapshot"
    if snapshot["fetching"]:
        return f"deploy's fetch of it did not finish (its {FETCHING_MARK} is there)"
    if snapshot["record"] == "refused":
        return f"its {COMPLETE_RECORD} is not a regular file the cache's reader reads"
    # A record of another snapshot, no mark: not deploy's fetch (its mark goes only with a new
    # record) but SGLang's own download at a start (or the operator's) moved refs/main: that
    # snapshot is judged as an operator's entry is.
    if snapshot["record"] == "present" and (snapshot["record_repo"], snapshot["record_revision"]) == (
            fact["model"], revision):
        if not snapshot["record_files"]:
            return f"its {COMPLETE_RECORD} lists no file"
        if snapshot["record_missing"]:
            return f"{snapshot['record_missing']} of the {snapshot['record_files']} files its fetch recorded are missing"
        return ""
    if snapshot["incomplete"]:
        return f"{snapshot['incomplete']} blob(s) still .incomplete: a download was interrupted"
    if snapshot["shards_missing"]:
        return (f"{snapshot['shards_missing']} shard(s) its weights index names are not in snapshot {revision[:12]}: "
                "a download was interrupted")
    if not snapshot["weights"]:
        return f"its snapshot {revision[:12]} holds no weights (*.safetensors, *.bin...)"
    return ""


def _bits(entry, user):
    """The permission bits ``user`` gets on a chain entry: the owner's, the group's where
    the group is the user's own (the account deploy creates has a group of its name),
    else the others'.

    >>> _bits({"user": "root", "group": "sglang", "mode": "750"}, "sglang")
    5
    """
    mode = int(entry["mode"], 8)
    if entry["user"] == user:
        return mode >> 6 & 7
    if entry["group"] == user:
        return mode >> 3 & 7
    return mode & 7


def blocking_entry(chain, user):
    """The first entry of the probe's chain (config.json, then each directory up to /)
    that keeps ``user`` from reading config.json (None: nothing does): the file needs
    read, the directory holding it read and search, every one above search.

    >>> blocking_entry([{"path": "/m/config.json", "user": "root", "group": "root", "mode": "644", "kind": "regular file"},
    ...                 {"path": "/m", "user": "root", "group": "root", "mode": "700", "kind": "directory"}], "sglang")
    '/m'
    """
    if user == "root":
        return None
    for at, entry in enumerate(chain):
        needed = 4 if at == 0 else 5 if at == 1 else 1
        if _bits(entry, user) & needed != needed:
            return entry["path"]
    return None


def _readable(fact, user):
    """(readable, what stops it): the probe's own check as the service user where the
    account exists, else the owners and modes on the way (an account deploy creates)."""
    blocking = blocking_entry(fact.get("chain") or [], user)
    if fact.get("readable") in ("yes", "no"):
        return fact["readable"] == "yes", blocking
    return blocking is None, blocking


def _failure(serving, code, message, fix):
    """A model that cannot be had: a blocker where this deploy starts the service, else a
    warning (the unit will not serve until it can)."""
    if serving:
        return ModelDecision("none", code, BLOCKER, f"{message}: the service would never serve", fix)
    return ModelDecision("none", code, WARNING, f"{message}: the service will not serve until it can (this deploy "
                         "does not start it)", fix)


def _unreadable(fact, user, serving, what, blocking):
    where = f" ({blocking} is in the way)" if blocking else ""
    return _failure(serving, "MODEL_UNREADABLE", f"service_model={fact['model']}: the service user {user} cannot "
                    f"read {what}{where}", f"let {user} read it: the files need r for it, their directory r and x, "
                    "every directory above x (e.g. `chmod -R o+rX` the model's directory and `chmod o+x` each one "
                    f"above it, or a group {user} is in)")


def decide_path(fact, user, serving):
    """A local directory: there, holding config.json, readable by the service user."""
    path, model = fact.get("path") or fact["model"], fact["model"]
    place = f"service_model={model}" + (f" (under the service's home: {path})" if path != model else "")
    if not fact.get("dir") or fact["dir"]["kind"] != "directory":
        what = "is not a directory" if fact.get("dir") else "does not exist on the node"
        return _failure(serving, "MODEL_MISSING", f"{place} {what}", f"put the model's files (config.json, the "
                        f"weights, the tokenizer) in {path} on the node, or set service_model to a hub id")
    if not fact.get("config"):
        return _failure(serving, "MODEL_MISSING", f"{place} has no config.json (SGLang reads the model's "
                        "configuration from it)", f"put the model's files (config.json, the weights, the tokenizer) "
                        f"in {path}, or set service_model to the directory that holds them")
    readable, blocking = _readable(fact, user)
    if not readable:
        return _unreadable(fact, user, serving, f"{path}/config.json", blocking)
    return ModelDecision("path", "MODEL_SOURCE", INFO, f"service_model={model}: the local directory {path}, "
                         f"its config.json readable by {user}", "")


def _hub_answer(hub):
    """The hub's answer in words, and whether it gives the model without a token.

    >>> _hub_answer({"status": 302, "error": None})
    ('answers 302', True)
    """
    if hub.get("status") is None:
        return f"does not answer from the node ({redact.urls(hub.get('error') or 'no answer')})", False
    return f"answers {hub['status']}", hub["status"] < 400


def decide_hub(fact, user, serving, fetch=False, writes_env=True):
    """A hub id: from the service's cache (offline, the node gets HF_HUB_OFFLINE=1), or
    from the hub where it answers (SGLang downloads it at start, or deploy fetches it)."""
    model, cache, entry = fact["model"], fact.get("cache"), fact.get("entry")
    endpoint = redact.urls(fact.get("endpoint") or "https://huggingface.co")
    # Deploy's own HF_HUB_OFFLINE (its record says it wrote it) is no operator's choice:
    # decided again from the hub and the cache, and taken back when not needed (taken_back).
    offline_set = bool(fact.get("offline")) and fact.get("offline_by") != "deploy"
    offline = offline_set and fact["offline"].upper() in TRUE_VALUES
    hub = fact.get("hub")
    partial = entry_partial(fact) if fact.get("revision") else ""
    if fact.get("config") and not partial:
        readable, blocking = _readable(fact, user)
        if not readable:
            return _unreadable(fact, user, serving, f"its hub cache entry {entry}", blocking)
        snapshot = (fact.get("revision") or "")[:12]
        said = f"service_model={model} from the cache {entry} (snapshot {snapshot}), readable by {user}"
        if hub is not None and hub.get("status") is None and not offline_set:
            said = f"{said}; the hub ({endpoint}) {_hub_answer(hub)[0]}"
            if not writes_env:
                return ModelDecision("cache", "MODEL_SOURCE", INFO, f"{said}: SGLang asks it at start (deploy_steps "
                                     "without env: HF_HUB_OFFLINE=1 is not written)", "")
            return ModelDecision("cache", "MODEL_OFFLINE", FIX, said,
                                 "deploy writes HF_HUB_OFFLINE=1 into the service env file (its env step), so SGLang "
                                 "reads the cache without asking the hub; set HF_HUB_OFFLINE in service_env to "
                                 "decide it yourself", offline=True)
        return ModelDecision("cache", "MODEL_SOURCE", INFO, said + ("; HF_HUB_OFFLINE is set" if offline else ""), "",
                             fetch=fetch)
    if fact.get("refs_main") == "unread":
        reader = user if fact.get("readable") != "unknown" else "nobody"
        return _failure(serving, "MODEL_UNREADABLE", f"service_model={model}: its hub cache entry {entry} has a "
                        f"refs/main that {reader} cannot read as a plain file (read as the service's reader, never "
                        "through a link)", f"let {user} read the entry (`chmod -R o+rX {entry}` or a group {user} is "
                        "in), with refs/main a plain file as huggingface_hub writes it")
    missing = f"service_model={model} is not in the service's hub cache ({cache}, from {fact.get('cache_via')})"
    copy = (f"copy its cache entry there (`hf download {model} --cache-dir DIR` where the hub answers, then "
            f"DIR/{(entry or '').rsplit('/', 1)[-1]} to {cache}, readable by {user})")
    if partial:
        # An interrupted fetch is not a cached model: never served offline, fetched again.
        missing = (f"service_model={model}'s entry {entry} in the service's hub cache is partial ({partial}), "
                   "never served offline")
        copy = (f"let the fetch finish it where the hub answers (deploy again with service_model_fetch: true), or "
                f"replace {entry} with a whole copy (`hf download {model} --cache-dir DIR` where the hub answers, "
                f"then DIR/{(entry or '').rsplit('/', 1)[-1]} to {cache}, readable by {user})")
    if offline or hub is None:
        return _failure(serving, "MODEL_UNAVAILABLE", f"{missing} and HF_HUB_OFFLINE is set, so SGLang does not "
                        "ask the hub", f"{copy}, or set service_model to a local directory holding it")
    answer, gives = _hub_answer(hub)
    if gives or (hub["status"] in (401, 403) and fact.get("token")):
        token = "; HF_TOKEN is set in the service's environment (validate sends none)" if not gives else ""
        if fetch:
            return ModelDecision("hub", "MODEL_SOURCE", INFO, f"{missing}; the hub ({endpoint}) {answer}{token}: "
                                 "deploy fetches it into the cache before the unit starts (service_model_fetch)", "",
                                 fetch=True)
        return ModelDecision("hub", "MODEL_SOURCE", INFO, f"{missing}; the hub ({endpoint}) {answer}{token}: SGLang "
                             "downloads it at its first start, within service_ready_timeout",
                             "service_model_fetch: true fetches it before the unit starts, with its progress")
    if hub["status"] is None:
        return _failure(serving, "MODEL_UNAVAILABLE", f"{missing} and the hub ({endpoint}) {answer}",
                        f"{copy}, or set service_model to a local directory holding it, or HF_ENDPOINT (service_env) "
                        "to a mirror the node reaches; deploy then writes HF_HUB_OFFLINE=1 for a cached model")
    if hub["status"] in (401, 403):
        return _failure(serving, "MODEL_UNAVAILABLE", f"{missing} and the hub ({endpoint}) {answer} for it without a "
                        "token: a gated or private model (or a misspelt id)", "check the id; for a gated or private "
                        "model accept its terms on the hub and add HF_TOKEN=<token> to service_env (written to the "
                        "env file, never printed)")
    return _failure(serving, "MODEL_UNAVAILABLE", f"{missing} and the hub ({endpoint}) {answer} for it",
                    "check service_model's spelling (org/name, as the hub shows it)")


def decide(fact, user, serving, fetch=False, writes_env=True):
    """The decision for a ``model`` fact (files/probe.d/model.sh probe_model): ``user`` the service
    user, ``serving`` whether this deploy starts the service, ``fetch`` service_model_fetch,
    ``writes_env`` whether it writes the env file (its env step)."""
    if fact["kind"] == "path":
        return decide_path(fact, user, serving)
    return decide_hub(fact, user, serving, fetch, writes_env)


def check_model_source(context):
    """Say where service_model comes from (a finding) and return the decision, or None
    without a model or a ``model`` fact (an older report, a probe that did not look)."""
    config, fact = context.config, context.facts.get("model")
    if not config.service_model or not fact or fact.get("model") != config.service_model:
        return None
    serving = config.service_enable and "service" in config.deploy_steps
    # A fetch runs in the service step.
    fetch = config.service_model_fetch and "service" in config.deploy_steps
    decision = decide(fact, config.service_user, serving, fetch, "env" in config.deploy_steps)
    if fact.get("offline_by") == "deploy" and not decision.offline and "env" in config.deploy_steps \
            and OFFLINE_KEY not in dict(config.service_env):
        decision = replace(decision, message=f"{decision.message}; deploy takes back the {OFFLINE_KEY}="
                           f"{fact.get('offline')} it wrote into the env file (its env step)")
    context.add(Finding(decision.code, decision.severity, decision.message, decision.fix))
    return decision


def taken_back(context, env):
    """The env file keys deploy wrote for a reason that is gone (key -> the value it wrote):
    its HF_HUB_OFFLINE (the probe's ``offline_by``), once the service's env (``env``, the
    plan's) no longer sets it: the hub answers again, the model changed, the cache no
    longer holds it whole. The operator's own (service_env, or a value deploy did not
    write) stays.

    >>> from types import SimpleNamespace
    >>> from bringup.config import Config
    >>> written = {"model": "Qwen/Qwen3-0.6B", "offline": "1", "offline_by": "deploy", "hub": {"status": 200}}
    >>> context = SimpleNamespace(config=Config(service_model="Qwen/Qwen3-0.6B"), facts={"model": written})
    >>> taken_back(context, {}), taken_back(context, {"HF_HUB_OFFLINE": "1"})
    ({'HF_HUB_OFFLINE': '1'}, {})
    """
    fact = context.facts.get("model") or {}
    if fact.get("offline_by") != "deploy" or fact.get("model") != context.config.service_model:
        return {}
    if OFFLINE_KEY in env or OFFLINE_KEY in dict(context.config.service_env):
        return {}
    return {OFFLINE_KEY: fact.get("offline") or ""}


def fetch_plan(context, decision):
    """What deploy's fetch runs (service_model_fetch, a hub id), or None."""
    if decision is None or not decision.fetch:
        return None
    config, layout = context.config, context.layout
    return ModelFetchPlan(model=config.service_model, cache=context.facts["model"]["cache"],
                          hf=f"{layout.venv}/bin/hf", user=config.service_user, home=layout.service_home,
                          env_file=layout.env_file, timeout=config.service_model_fetch_timeout,
                          base_path=SERVICE_BASE_PATH, runner=layout.helper("with-service-env"),
                          session_bound=layout.helper("session-bound"))
