"""The ``model`` section: where ``service_model`` would come from, as SGLang looks for it -> ``model``.

Its shell fragment is files/probe.d/model.sh (``probe_model``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import BOOL, FILE_STATE, INT, OPT_STR, STR, Items, Optional
from facts.probe_framing import Key, ProbeSection, _file_state, _quoted, parse_assignments


def _chain_line(line):
    """``owner group mode kind|path`` (files/probe.d/model.sh probe_model: stat -c '%U %G %a %F|%n') ->
    {"path", "user", "group", "mode", "kind"}.

    >>> _chain_line("root root 755 directory|/srv/models")
    {'path': '/srv/models', 'user': 'root', 'group': 'root', 'mode': '755', 'kind': 'directory'}
    """
    attributes, _, path = line.partition("|")
    fields = attributes.split(" ", 3)
    if len(fields) != 4 or not fields[2].isdigit():
        raise ValueError(f"unexpected model path line: {_quoted(line)}")
    return {"path": path, **dict(zip(("user", "group", "mode", "kind"), fields))}


SNAPSHOT_COUNTS = ("files", "weights", "incomplete", "shards_missing")


RECORD_COUNTS = ("files", "missing")


def _count(values, key):
    value = values.get(key) or ""
    if not value.strip().isdigit():
        raise ValueError(f"unexpected model snapshot count {key}: {_quoted(value)}")
    return int(value.strip())


def model_snapshot(values):
    """The snapshot lines of the ``model`` section (files/probe.d/model.sh SNAPSHOT_STATE, read as the
    cache's reader) -> {"files", "weights", "incomplete", "shards_missing", "fetching", "record"
    (none, present, refused), and the record's "record_repo", "record_revision", "record_files",
    "record_missing" (None and 0 without one)}; None without them (no snapshot named, a
    local model, an older probe).

    >>> model_snapshot({"snapshot_files": "3", "snapshot_weights": "1", "snapshot_incomplete": "0",
    ...                 "snapshot_shards_missing": "0", "snapshot_fetching": "no", "record": "none"})
    {'files': 3, 'weights': 1, 'incomplete': 0, 'shards_missing': 0, 'fetching': False, 'record': 'none', \
'record_repo': None, 'record_revision': None, 'record_files': 0, 'record_missing': 0}
    >>> model_snapshot({"revision": "ab"}) is None
    True
    """
    if "snapshot_files" not in values:
        return None
    found = {key: _count(values, f"snapshot_{key}") for key in SNAPSHOT_COUNTS}
    if values.get("snapshot_fetching") not in ("yes", "no"):
        raise ValueError(f"unexpected model snapshot_fetching: {_quoted(values.get('snapshot_fetching') or '')}")
    found["fetching"] = values["snapshot_fetching"] == "yes"
    record = values.get("record") or "refused"
    if record not in ("none", "present", "refused"):
        raise ValueError(f"unexpected model snapshot record: {_quoted(record)}")
    found["record"] = record
    present = record == "present"
    found.update({"record_repo": values.get("record_repo") if present else None,
                  "record_revision": values.get("record_revision") if present else None,
                  **{f"record_{key}": _count(values, f"record_{key}") if present else 0 for key in RECORD_COUNTS}})
    return found


def model_source(section):
    """The ``model`` section -> where ``service_model`` would come from (files/probe.d/model.sh
    probe_model): a local directory or a hub id, its config.json's state and whether
    the service user reads it, the hub cache and snapshot, and what the hub answered;
    None without a model (or from an older probe).

    >>> from facts.probe_framing import Section
    >>> found = model_source(Section("model", 0, ("model", "Qwen/Qwen3-0.6B"), ["kind=hub", "offline=", "token=unset",
    ...     "endpoint=https://huggingface.co", "cache=/var/lib/sglang/.cache/huggingface/hub", "via=default",
    ...     "entry=/var/lib/sglang/.cache/huggingface/hub/models--Qwen--Qwen3-0.6B", "revision=", "config=",
    ...     "hub_error=[Errno -2] Name or service not known"]))
    >>> found["kind"], found["config"], found["hub"]
    ('hub', None, {'status': None, 'error': '[Errno -2] Name or service not known'})
    """
    if section is None or section.rc != 0:
        return None
    values = parse_assignments("\n".join(line for line in section.lines if not line.startswith("chain=")))
    if values.get("kind") not in ("path", "hub"):
        raise ValueError(f"unexpected model kind: {_quoted(values.get('kind') or '')}")
    status = values.get("hub_status")
    if status is not None and not status.isdigit():
        raise ValueError(f"unexpected hub status: {_quoted(status)}")
    asked = "hub_status" in values or "hub_error" in values
    return {
        "model": section.attribute("model"),
        "kind": values["kind"],
        "path": values.get("path"),
        "dir": _file_state(values.get("dir"), "model directory"),
        "cache": values.get("cache"),
        "cache_via": values.get("via"),
        "entry": values.get("entry"),
        "revision": values.get("revision"),
        "refs_main": values.get("refs_main"),
        "snapshot": model_snapshot(values),
        "config": _file_state(values.get("config"), "model config.json"),
        "readable": values.get("readable"),
        "chain": [_chain_line(line[len("chain="):]) for line in section.lines if line.startswith("chain=")],
        "endpoint": values.get("endpoint"),
        "offline": values.get("offline"),
        "offline_by": values.get("offline_by"),
        "token": values.get("token") == "set",
        "hub": {"status": int(status) if status else None,
                "error": values.get("hub_error") or (None if status else "no answer")} if asked else None,
    }


SECTION = ProbeSection(
    name="model",
    group=5,
    raw=("model",),
    keys={
        # Absent from an older report, null without a model.
        "model": Key(
            parse=lambda by_name: model_source(by_name.get("model")),
            schema=Optional({
                "model": STR,
                "kind": STR,
                "path": OPT_STR,
                "dir": Optional(FILE_STATE),
                "cache": OPT_STR,
                "cache_via": OPT_STR,
                "entry": OPT_STR,
                "revision": OPT_STR,
                "refs_main": OPT_STR,
                # Whether that snapshot is whole (null: no snapshot named).
                "snapshot": Optional({
                    "files": INT,
                    "weights": INT,
                    "incomplete": INT,
                    "shards_missing": INT,
                    "fetching": BOOL,
                    "record": STR,
                    "record_repo": OPT_STR,
                    "record_revision": OPT_STR,
                    "record_files": INT,
                    "record_missing": INT,
                }),
                "config": Optional(FILE_STATE),
                "readable": OPT_STR,
                "chain": Items({"path": STR, "user": STR, "group": STR, "mode": STR, "kind": STR}),
                "endpoint": OPT_STR,
                "offline": OPT_STR,
                "offline_by": OPT_STR,
                "token": BOOL,
                "hub": Optional({"status": Optional(INT), "error": OPT_STR}),
            }),
            meaning=(
                "where `service_model` would come from, as SGLang looks for it: a local directory, or a hub id in "
                "the service's hub cache, and whether the hub answers from the node; null without a `service_model` "
                "(or from an older probe)"
            ),
        ),
    },
)
