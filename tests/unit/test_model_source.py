"""Where service_model comes from (bringup/plan/model_source.py): the decision on a table
of ``model`` facts; the plan's severities, HF_HUB_OFFLINE and fetch; the real
the probe (files/probe.d/) on scratch directories (a local model readable or not by a real user, a
hub cache hit and miss, a hub that answers, one that refuses the connection); and
``python -m bringup.plan`` on a recorded node's facts. huggingface.co is never asked:
the hub is tests/hub_double.py's, on loopback."""

import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.findings import BLOCKER, FIX, INFO, WARNING
from bringup.layout import NodeLayout, ProbeInputs
from bringup.plan import plan
from bringup.plan.model_source import blocking_entry, decide, entry_partial
from tests.model_facts import ROOT_FILE, WHOLE, hub_fact
from facts.node import probe_command
from facts.probe_output import build_document
from tests.hub_double import REVISION, answering_hub, closed_endpoint, plant_cache_entry
from tests.unit.scenarios import FIXTURES, converged, varied

CACHE = "/var/cache/sglang/xdg/huggingface/hub"
ENTRY = f"{CACHE}/models--Qwen--Qwen3-0.6B"
REFUSED = {"status": None, "error": "[Errno 111] Connection refused"}
CACHED = {"revision": REVISION, "snapshot": WHOLE, "config": ROOT_FILE, "readable": "yes"}
# An interrupted fetch: refs/main and config.json there, the weights not (yet).
INTERRUPTED = {**CACHED, "snapshot": {**WHOLE, "files": 1, "weights": 0, "incomplete": 1}}
RECORDED = {**WHOLE, "record": "present", "record_repo": "Qwen/Qwen3-0.6B", "record_revision": REVISION,
            "record_files": 3, "record_missing": 0}


def chain(*entries):
    return [{"path": path, "user": user, "group": group, "mode": mode, "kind": kind}
            for path, user, group, mode, kind in entries]


def local(**changes):
    return {**hub_fact(kind="path", path="/srv/models/qwen3", cache=None, cache_via=None, entry=None,
                       dir={"user": "root", "mode": "755", "kind": "directory"}, config=ROOT_FILE, readable="yes",
                       model="/srv/models/qwen3", hub=None), **changes}


CLOSED_DIR = chain(("/srv/models/qwen3/config.json", "root", "root", "644", "regular file"),
                   ("/srv/models/qwen3", "root", "root", "700", "directory"), ("/srv/models", "root", "root", "755",
                                                                                 "directory"))
# name, the fact, this deploy starts the service, service_model_fetch,
# (code, severity, source, offline, fetch), words the message must hold
CASES = [
    ("a local directory", local(), True, False, ("MODEL_SOURCE", INFO, "path", False, False),
     ("the local directory /srv/models/qwen3", "readable by sglang")),
    ("a local path that is not there", local(dir=None, config=None, readable=None), True, False,
     ("MODEL_MISSING", BLOCKER, "none", False, False), ("does not exist on the node", "would never serve")),
    ("a local path that is a file", local(dir=ROOT_FILE, config=None, readable=None), True, False,
     ("MODEL_MISSING", BLOCKER, "none", False, False), ("is not a directory",)),
    ("a directory without config.json", local(config=None, readable=None), True, False,
     ("MODEL_MISSING", BLOCKER, "none", False, False), ("has no config.json",)),
    ("a directory the service user cannot read (checked as it)", local(readable="no", chain=CLOSED_DIR), True, False,
     ("MODEL_UNREADABLE", BLOCKER, "none", False, False), ("sglang cannot read", "/srv/models/qwen3 is in the way")),
    ("no account yet: judged from the modes", local(readable="unknown", chain=CLOSED_DIR), True, False,
     ("MODEL_UNREADABLE", BLOCKER, "none", False, False), ("/srv/models/qwen3 is in the way",)),
    ("no account yet: the group is the service's", local(readable="unknown", chain=chain(
        ("/srv/models/qwen3/config.json", "root", "sglang", "640", "regular file"),
        ("/srv/models/qwen3", "root", "sglang", "750", "directory"))), True, False,
     ("MODEL_SOURCE", INFO, "path", False, False), ("readable by sglang",)),
    ("a missing directory where this deploy does not start the service", local(dir=None, config=None), False, False,
     ("MODEL_MISSING", WARNING, "none", False, False), ("this deploy does not start it",)),
    ("a hub id, not cached, the hub unreachable", hub_fact(), True, False,
     ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False),
     ("not in the service's hub cache", CACHE, "https://huggingface.co", "Name or service not known",
      "would never serve")),
    ("the same, the service not started here", hub_fact(), False, False,
     ("MODEL_UNAVAILABLE", WARNING, "none", False, False), ("does not answer from the node",)),
    ("the same with service_model_fetch: the fetch could not run", hub_fact(), True, True,
     ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("does not answer",)),
    ("cached, the hub unreachable: offline", hub_fact(**CACHED), True, False,
     ("MODEL_OFFLINE", FIX, "cache", True, False), ("from the cache", ENTRY, "snapshot c1899de289a0")),
    ("cached, the hub unreachable, deploy_steps without env", hub_fact(**CACHED), True, False,
     ("MODEL_SOURCE", INFO, "cache", False, False), ("from the cache", "HF_HUB_OFFLINE=1 is not written")),
    ("cached, the operator set HF_HUB_OFFLINE", hub_fact(**CACHED, offline="1", hub=None), True, False,
     ("MODEL_SOURCE", INFO, "cache", False, False), ("from the cache", "HF_HUB_OFFLINE is set")),
    ("cached, the operator set HF_HUB_OFFLINE=0 and the hub is down", hub_fact(**CACHED, offline="0"), True, False,
     ("MODEL_SOURCE", INFO, "cache", False, False), ("from the cache",)),
    ("cached, the hub answers", hub_fact(**CACHED, hub={"status": 200, "error": None}), True, False,
     ("MODEL_SOURCE", INFO, "cache", False, False), ("from the cache",)),
    ("cached, fetch asked: deploy checks again and finds it", hub_fact(**CACHED, hub={"status": 200, "error": None}),
     True, True, ("MODEL_SOURCE", INFO, "cache", False, True), ("from the cache",)),
    ("cached but unreadable", hub_fact(**CACHED | {"readable": "no"}), True, False,
     ("MODEL_UNREADABLE", BLOCKER, "none", False, False), ("its hub cache entry", ENTRY)),
    ("not cached, offline set", hub_fact(offline="1", hub=None), True, False,
     ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("HF_HUB_OFFLINE is set",)),
    ("not cached, the hub answers: SGLang downloads it", hub_fact(hub={"status": 302, "error": None}), True, False,
     ("MODEL_SOURCE", INFO, "hub", False, False), ("answers 302", "downloads it at its first start")),
    ("not cached, the hub answers, fetch", hub_fact(hub={"status": 200, "error": None}), True, True,
     ("MODEL_SOURCE", INFO, "hub", False, True), ("deploy fetches it",)),
    ("gated, no token", hub_fact(hub={"status": 401, "error": None}), True, False,
     ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("answers 401", "gated or private")),
    ("gated, a token in the env file", hub_fact(hub={"status": 401, "error": None}, token=True), True, True,
     ("MODEL_SOURCE", INFO, "hub", False, True), ("HF_TOKEN is set",)),
    ("no such model", hub_fact(hub={"status": 404, "error": None}), True, False,
     ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("answers 404",)),
    ("an interrupted fetch, the hub unreachable: not offline, a blocker naming the entry", hub_fact(**INTERRUPTED),
     True, False, ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False),
     (f"entry {ENTRY}", "is partial (1 blob(s) still .incomplete", "never served offline", "does not answer")),
    ("an interrupted fetch, the operator's HF_HUB_OFFLINE", hub_fact(**INTERRUPTED, offline="1", hub=None), True,
     False, ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("is partial", "HF_HUB_OFFLINE is set")),
    ("an interrupted fetch, the hub answers: the fetch runs again", hub_fact(**INTERRUPTED, hub={"status": 200,
     "error": None}), True, True, ("MODEL_SOURCE", INFO, "hub", False, True), ("is partial", "deploy fetches it")),
    ("refs/main and config.json only, no blob left behind", hub_fact(**CACHED | {"snapshot": {**WHOLE, "weights": 0}}),
     True, False, ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("holds no weights",)),
    ("the fetch's record matches the snapshot", hub_fact(**CACHED | {"snapshot": RECORDED}), True, False,
     ("MODEL_OFFLINE", FIX, "cache", True, False), ("from the cache",)),
    ("the record names another snapshot, no mark: SGLang's download at a start moved refs/main; judged by weights",
     hub_fact(**CACHED | {"snapshot": {**RECORDED, "record_revision": "ab" * 20}}), True, False,
     ("MODEL_OFFLINE", FIX, "cache", True, False), ("from the cache",)),
    ("the record names another snapshot, whose weights are not there", hub_fact(**CACHED | {"snapshot": {
     **RECORDED, "record_revision": "ab" * 20, "weights": 0}}), True, False,
     ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("holds no weights",)),
    ("a file the record lists is gone", hub_fact(**CACHED | {"snapshot": {**RECORDED, "record_missing": 1}}), True,
     False, ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("1 of the 3 files its fetch recorded",)),
    ("a record that is a link or unreadable", hub_fact(**CACHED | {"snapshot": {**RECORDED, "record": "refused"}}),
     True, False, ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("is not a regular file",)),
    ("deploy's fetch began and did not end (its mark is left)", hub_fact(**CACHED | {"snapshot": {
     **RECORDED, "fetching": True}}), True, False, ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False),
     ("deploy's fetch of it did not finish",)),
    ("a snapshot the probe did not judge", hub_fact(**CACHED | {"snapshot": None}), True, False,
     ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("did not judge",)),
    ("a password in HF_ENDPOINT is not shown", hub_fact(endpoint="https://u:pw@mirror.example"), True, False,
     ("MODEL_UNAVAILABLE", BLOCKER, "none", False, False), ("https://<redacted>@mirror.example",)),
]


@pytest.mark.parametrize("name,fact,serving,fetch,expected,words", CASES, ids=[case[0] for case in CASES])
def test_model_source_decision(name, fact, serving, fetch, expected, words):
    decision = decide(fact, "sglang", serving=serving, fetch=fetch, writes_env="without env" not in name)
    assert (decision.code, decision.severity, decision.source, decision.offline, decision.fetch) == expected, decision
    assert all(word in decision.message for word in words), decision.message
    assert "pw@" not in decision.message
    if decision.severity in (BLOCKER, WARNING):
        assert decision.fix, decision


def test_blocking_entry_reads_owner_group_and_others():
    opened = chain(("/m/config.json", "sglang", "root", "600", "regular file"), ("/m", "root", "root", "711", "directory"))
    assert blocking_entry(opened, "sglang") == "/m"  # the model's own directory must be listed too
    assert blocking_entry(opened[:1], "sglang") is None and blocking_entry(opened, "root") is None


def model_facts(fact):
    return varied(converged(), model=fact)


@pytest.mark.parametrize("settings,code", [
    ({}, "MODEL_UNAVAILABLE:blocker"),
    ({"deploy_steps": ["repo", "toolkit", "env"]}, "MODEL_UNAVAILABLE:warning"),
    ({"service_enable": False}, "MODEL_UNAVAILABLE:warning"),
], ids=["the service step starts it", "deploy_steps without service", "service_enable false"])
def test_a_model_that_cannot_be_had_blocks_only_a_deploy_that_starts_the_service(settings, code):
    node = plan(model_facts(hub_fact()), Config.from_data({"service_model": "Qwen/Qwen3-0.6B", **settings}))
    assert [f"{f.code}:{f.severity}" for f in node.findings if f.code.startswith("MODEL_")] == [code]
    assert node.ok is code.endswith("warning")
    assert "HF_HUB_OFFLINE" not in node.env and node.model_fetch is None


def test_no_model_fact_or_another_model_says_nothing():
    """An older report has no ``model``; a report probed for another model is not this one's."""
    for facts in (converged(), model_facts(hub_fact(model="other/model"))):
        node = plan(facts, Config(service_model="Qwen/Qwen3-0.6B"))
        assert not [f for f in node.findings if f.code.startswith("MODEL_")]
    node = plan(model_facts(hub_fact()), Config())
    assert "SERVICE_NOT_SERVING_READY" in node.codes() and not [c for c in node.codes() if c.startswith("MODEL_")]


def test_offline_with_the_model_cached_writes_hf_hub_offline_unless_the_operator_set_it():
    node = plan(model_facts(hub_fact(**CACHED)), Config(service_model="Qwen/Qwen3-0.6B"))
    assert node.env["HF_HUB_OFFLINE"] == "1" and node.service.env["HF_HUB_OFFLINE"] == "1"
    assert node.as_dict()["env"]["HF_HUB_OFFLINE"] == "1"  # no secret: shown
    mine = plan(model_facts(hub_fact(**CACHED, offline="0")),
                Config.from_data({"service_model": "Qwen/Qwen3-0.6B", "service_env": {"HF_HUB_OFFLINE": "0"}}))
    assert mine.env["HF_HUB_OFFLINE"] == "0" and "MODEL_OFFLINE" not in mine.codes()


def test_the_fetch_is_planned_as_the_service_user_with_the_venvs_hf():
    node = plan(model_facts(hub_fact(hub={"status": 200, "error": None})),
                Config.from_data({"service_model": "Qwen/Qwen3-0.6B", "service_model_fetch": True,
                                  "service_model_fetch_timeout": 900}))
    fetch = node.model_fetch
    assert (fetch.model, fetch.cache, fetch.hf, fetch.user, fetch.timeout) == (
        "Qwen/Qwen3-0.6B", CACHE, "/opt/sglang/venv/bin/hf", "sglang", 900)
    assert node.as_dict()["model_fetch"]["hf"] == "/opt/sglang/venv/bin/hf"
    local_model = plan(model_facts(local()), Config.from_data({"service_model": "/srv/models/qwen3",
                                                                "service_model_fetch": True}))
    assert local_model.model_fetch is None


# --- The real probe ------------------------------------------------------------------


@pytest.fixture
def open_dir():
    """A scratch directory every user may search (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="model-source-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def probe(model, user="nobody", env_file="/nonexistent", **env):
    layout = NodeLayout.for_settings("/nonexistent", env_file, "/nonexistent-cache", user)
    inputs = ProbeInputs(layout, model=model, model_env=tuple(env.items()))
    result = subprocess.run(["sh", "-c", probe_command(inputs, ("model",))], env={"PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=60, check=True)
    return build_document(result.stdout.splitlines(), ["model"])["model"]


def local_model(root, mode=0o644):
    model = root / "models" / "qwen3"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}\n")
    (model / "config.json").chmod(mode)
    return model


def test_probe_a_local_directory_readable_by_the_user_or_not(open_dir):
    """``nobody`` (a real account: the probe checks as it) reads the model; then the
    directory is closed to it, then the account does not exist (the modes decide)."""
    model = local_model(open_dir)
    fact = probe(str(model), HF_ENDPOINT=closed_endpoint())
    assert (fact["kind"], fact["path"], fact["readable"], fact["dir"]["kind"]) == ("path", str(model), "yes",
                                                                                   "directory"), fact
    assert decide(fact, "nobody", serving=True).source == "path"
    model.chmod(0o700)
    fact = probe(str(model))
    assert fact["readable"] == "no"
    unreadable = decide(fact, "nobody", serving=True)
    assert (unreadable.code, unreadable.severity) == ("MODEL_UNREADABLE", BLOCKER)
    assert f"{model} is in the way" in unreadable.message, unreadable.message
    fact = probe(str(model), user="md-no-such-user")
    assert fact["readable"] == "unknown" and decide(fact, "md-no-such-user", serving=True).code == "MODEL_UNREADABLE"
    shutil.rmtree(model)
    assert decide(probe(str(model)), "nobody", serving=True).code == "MODEL_MISSING"


def test_probe_a_hub_cache_miss_with_the_hub_refusing_the_connection(open_dir):
    endpoint = closed_endpoint()
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(open_dir / "hub"), HF_ENDPOINT=endpoint)
    assert (fact["cache"], fact["cache_via"], fact["config"]) == (str(open_dir / "hub"), "HF_HUB_CACHE", None), fact
    assert fact["entry"] == str(open_dir / "hub" / "models--Qwen--Qwen3-0.6B")
    assert fact["hub"]["status"] is None and "Connection refused" in fact["hub"]["error"], fact
    decision = decide(fact, "nobody", serving=True)
    assert (decision.code, decision.severity) == ("MODEL_UNAVAILABLE", BLOCKER)
    assert f"the hub ({endpoint}) does not answer from the node" in decision.message, decision.message


def test_probe_a_hub_cache_hit_offline_and_the_hub_answering(open_dir):
    """The entry as huggingface_hub writes it (config.json a link into blobs/), found in
    $HF_HOME/hub: from the cache, and offline (HF_HUB_OFFLINE=1) where the hub refuses."""
    plant_cache_entry(open_dir / "home" / "hub", "Qwen/Qwen3-0.6B")
    fact = probe("Qwen/Qwen3-0.6B", HF_HOME=str(open_dir / "home"), HF_ENDPOINT=closed_endpoint())
    assert (fact["cache_via"], fact["revision"], fact["readable"]) == ("HF_HOME", REVISION, "yes"), fact
    assert fact["chain"][0]["path"].endswith(f"snapshots/{REVISION}/config.json")
    offline = decide(fact, "nobody", serving=True)
    assert (offline.code, offline.offline) == ("MODEL_OFFLINE", True) and "from the cache" in offline.message
    with answering_hub(401) as (endpoint, asked):
        fact = probe("Qwen/Qwen3-0.6B", HF_ENDPOINT=endpoint, HF_HUB_CACHE=str(open_dir / "none"))
    # One HEAD of the config, as SGLang's first request, no token sent.
    assert asked == ["/Qwen/Qwen3-0.6B/resolve/main/config.json"] and fact["hub"] == {"status": 401, "error": None}
    assert decide(fact, "nobody", serving=True).code == "MODEL_UNAVAILABLE"


def test_probe_reads_the_env_file_and_never_reports_the_token(open_dir):
    """The service's env file places the cache (XDG_CACHE_HOME) and the hub; service_env's
    value wins over it; HF_TOKEN is said to be set, never shown, and HF_HUB_OFFLINE stops
    the hub from being asked."""
    env_file = open_dir / "sglang.env"
    env_file.write_text(f"XDG_CACHE_HOME={open_dir}/xdg\nHF_TOKEN=hf_secret_md\nHF_HUB_OFFLINE=1\n")
    env_file.chmod(0o600)
    layout = NodeLayout.for_settings("/nonexistent", str(env_file), "/nonexistent-cache", "nobody")
    command = probe_command(ProbeInputs(layout, model="Qwen/Qwen3-0.6B"), ("model",))
    out = subprocess.run(["sh", "-c", command], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "hf_secret_md" not in out
    fact = build_document(out.splitlines(), ["model"])["model"]
    assert (fact["cache"], fact["cache_via"], fact["token"], fact["offline"], fact["hub"]) == (
        f"{open_dir}/xdg/huggingface/hub", "XDG_CACHE_HOME", True, "1", None), fact
    assert probe("Qwen/Qwen3-0.6B", env_file=str(env_file), HF_HUB_CACHE="/srv/hub")["cache_via"] == "HF_HUB_CACHE"
    # HF_HUB_OFFLINE=0 is not offline (huggingface_hub's true values only): the hub is asked.
    endpoint = closed_endpoint()
    fact = probe("Qwen/Qwen3-0.6B", env_file=str(env_file), HF_HUB_OFFLINE="0", HF_ENDPOINT=endpoint)
    assert fact["offline"] == "0" and "Connection refused" in fact["hub"]["error"], fact


def test_probe_takes_a_relative_directory_under_the_service_home_as_sglang_does():
    """SGLang runs in the service's home (the unit's WorkingDirectory) and takes an
    existing directory as a local model (os.path.isdir); anything else is a hub id."""
    user = f"md-rel-{Path(tempfile.mkdtemp()).name[-6:].lower()}"
    home = Path(NodeLayout.for_settings("/nonexistent", "/nonexistent", "/nonexistent-cache", user).service_home)
    try:
        local_model(home)
        fact = probe("models/qwen3", user=user, HF_HUB_OFFLINE="1")
        assert (fact["kind"], fact["path"], fact["readable"]) == ("path", f"{home}/models/qwen3", "unknown"), fact
        decision = decide(fact, user, serving=True)
        assert decision.source == "path" and f"the local directory {home}/models/qwen3" in decision.message
        fact = probe("models/other", user=user, HF_HUB_OFFLINE="1")
        assert fact["kind"] == "hub" and fact["entry"].endswith("models--models--other"), fact
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_plan_cli_names_the_unreachable_hub_and_the_cache(tmp_path):
    """python -m bringup.plan on a recorded node's facts with a ``model`` fact: the hub
    that does not answer is a blocker; a deploy_steps without the service a warning."""
    recorded = json.loads((FIXTURES / "facts" / "incident.json").read_text())
    recorded["model"] = hub_fact()
    facts, config = tmp_path / "facts.json", tmp_path / "settings.yaml"
    facts.write_text(json.dumps(recorded))
    for steps, severity in (("", "blocker"), ("deploy_steps: [repo, toolkit, env, account, venv]\n", "warning")):
        config.write_text(f"service_model: Qwen/Qwen3-0.6B\n{steps}")
        result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(facts), "--config", str(config)],
                                capture_output=True, text=True, cwd=FIXTURES.parents[1])
        assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
        found, = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "MODEL_UNAVAILABLE"]
        assert found["severity"] == severity
        assert found["message"].startswith(f"service_model=Qwen/Qwen3-0.6B is not in the service's hub cache ({CACHE}, "
                                           "from XDG_CACHE_HOME) and the hub (https://huggingface.co) does not answer "
                                           "from the node ([Errno -2] Name or service not known)"), found["message"]


# The service's settings -> the hub cache the probe looks in and the setting it names, as
# huggingface_hub 1.33.0 places it (bringup/layout.py HUB_CACHE_ORDER; constants.py: each
# setting beats every one after it, and one set empty is set: os.getenv's default is for an
# unset key; os.path.join joins the suffix; _snapshot_download.py resolves a relative cache
# under the working directory, the service's home, and expands ~); none: under that home.
HUB_CACHES = [
    ({"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "XDG_CACHE_HOME": "/d"}, "/a", "HF_HUB_CACHE"),
    ({"HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "XDG_CACHE_HOME": "/d"}, "/b", "HUGGINGFACE_HUB_CACHE"),
    ({"HF_HOME": "/c", "XDG_CACHE_HOME": "/d"}, "/c/hub", "HF_HOME"),
    ({"XDG_CACHE_HOME": "/d/"}, "/d/huggingface/hub", "XDG_CACHE_HOME"),
    ({"HF_HUB_CACHE": "", "XDG_CACHE_HOME": "/d"}, "{home}", "HF_HUB_CACHE"),
    ({"HF_HOME": "", "XDG_CACHE_HOME": "/d"}, "{home}/hub", "HF_HOME"),
    ({"HF_HUB_CACHE": "models/hub/"}, "{home}/models/hub", "HF_HUB_CACHE"),
    ({"HF_HOME": "~/hf"}, "{home}/hf/hub", "HF_HOME"),
    ({}, "{home}/.cache/huggingface/hub", "default"),
]


@pytest.mark.parametrize(("settings", "cache", "via"), HUB_CACHES, ids=lambda value: str(value))
def test_the_probe_finds_the_hub_cache_where_huggingface_hub_puts_it(settings, cache, via):
    fact = probe("Qwen/Qwen3-0.6B", HF_ENDPOINT=closed_endpoint(), **settings)
    cache = cache.format(home=NodeLayout.for_settings("/nonexistent", "/nonexistent", "/c", "nobody").service_home)
    assert (fact["cache"], fact["cache_via"], fact["entry"]) == (cache, via, f"{cache}/models--Qwen--Qwen3-0.6B"), fact


# --- An interrupted fetch (finding 8 of issue 33) ----------------------------------------


def interrupted_entry(cache, model="Qwen/Qwen3-0.6B"):
    """What a fetch killed midway leaves, as huggingface_hub 1.33.0's file_download.py writes
    it (seen with the real ``hf download`` against tests/hub_double.py serving_hub): refs/main
    and the snapshot's config.json (small files first), the weights' blob still
    ``<etag>.<random>.incomplete`` and no link to it yet."""
    entry = plant_cache_entry(cache, model, weights=False)
    (entry / "blobs" / "9a1c.02909c4f.incomplete").write_bytes(b"\0" * 16)
    return entry


def chown_tree(path, user):
    subprocess.run(["chown", "-R", f"{user}:", str(path)], check=True)


def shards(snapshot, there):
    """A weights index naming two shards, the first ``there`` of them in ``snapshot``."""
    names = [f"model-{n:05d}-of-00002.safetensors" for n in (1, 2)]
    (snapshot / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a.weight": names[0], "lm_head.weight": names[1]}}))
    for name in names[:there]:
        (snapshot / name).write_bytes(b"\0" * 64)


@pytest.mark.parametrize("state,partial", [
    ("whole", ""),
    ("whole, the .incomplete a killed fetch left beside the finished blob", ""),
    ("refs and config only", "holds no weights"),
    ("an .incomplete blob", "1 blob(s) still .incomplete"),
    ("whole, sharded: every shard its index names there", ""),
    ("whole, sharded, beside a .bin index whose shards were not fetched (hf download --include *.safetensors)", ""),
    ("stopped between two shards", "1 shard(s) its weights index names are not in snapshot"),
])
def test_probe_judges_an_operators_entry_by_its_weights_and_incomplete_blobs(open_dir, state, partial):
    """The real probe on scratch caches, read as the cache's reader (``nobody``): an
    operator's entry (no record of deploy's fetch) is whole with weights and no blob still
    downloading; refs/main plus config.json alone is not; and the planner does not take a
    partial entry offline."""
    if state.startswith("whole"):
        entry = plant_cache_entry(open_dir / "hub", "Qwen/Qwen3-0.6B")
        if "killed" in state:
            (entry / "blobs" / "9a1c.02909c4f.incomplete").write_bytes(b"\0" * 16)
        if "sharded" in state:
            shards(entry / "snapshots" / REVISION, 2)
        if ".bin index" in state:
            (entry / "snapshots" / REVISION / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {
                "a.weight": "pytorch_model-00001-of-00002.bin", "lm_head.weight": "pytorch_model-00002-of-00002.bin"}}))
    elif state == "refs and config only":
        plant_cache_entry(open_dir / "hub", "Qwen/Qwen3-0.6B", weights=False)
    elif state == "stopped between two shards":
        # Shard 1 whole, shard 2 never begun: no .incomplete blob, no record (SGLang's own download).
        shards(plant_cache_entry(open_dir / "hub", "Qwen/Qwen3-0.6B", weights=False) / "snapshots" / REVISION, 1)
    else:
        interrupted_entry(open_dir / "hub")
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(open_dir / "hub"), HF_ENDPOINT=closed_endpoint())
    assert fact["revision"] == REVISION and fact["config"] and fact["snapshot"]["record"] == "none", fact
    assert partial in entry_partial(fact) and bool(entry_partial(fact)) is bool(partial), fact["snapshot"]
    decision = decide(fact, "nobody", serving=True)
    if partial:
        assert (decision.code, decision.severity, decision.offline) == ("MODEL_UNAVAILABLE", BLOCKER, False)
        assert f"{open_dir}/hub/models--Qwen--Qwen3-0.6B" in decision.message and "partial" in decision.message
    else:
        assert (decision.code, decision.offline) == ("MODEL_OFFLINE", True)


def test_the_fetchs_record_is_written_as_the_service_user_and_held_to_the_snapshot(open_dir):
    """The record command deploy runs after ``hf download`` exited 0 (tasks/operations/model.py),
    run for real as a throwaway user (``nobody``, owning the cache as the service user
    does): the probe then finds the entry whole; a later fetch of a new snapshot killed
    midway (refs/main moved, its weights not there) is partial again; a file the record
    lists going missing is partial; a record that is a link is refused, not followed."""
    from bringup.plan.model import ModelFetchPlan
    from tasks.operations.model import START_SCRIPT, as_service_user, record_command

    cache = open_dir / "hub"
    entry = plant_cache_entry(cache, "Qwen/Qwen3-0.6B")
    chown_tree(cache, "nobody")
    fetch = ModelFetchPlan("Qwen/Qwen3-0.6B", str(cache), "/v/bin/hf", "nobody", "/nonexistent", "/e")
    # A fetch's start (its mark), then hf's work (the planted entry), then its end.
    subprocess.run(["sh", "-c", as_service_user(fetch, START_SCRIPT)], check=True, env={"PATH": "/usr/bin:/bin"},
                   timeout=30)
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert fact["snapshot"]["fetching"] and "did not finish" in entry_partial(fact), fact["snapshot"]
    subprocess.run(["sh", "-c", record_command(fetch)], check=True, env={"PATH": "/usr/bin:/bin"}, timeout=30)
    record = entry / ".gpu-bringup-complete"
    assert record.stat().st_uid != 0 and oct(record.stat().st_mode)[-3:] == "644"
    assert record.read_text().splitlines() == ["repo=Qwen/Qwen3-0.6B", f"revision={REVISION}", "file=config.json",
                                               "file=model.safetensors"]
    assert not (entry / ".gpu-bringup-fetching").exists()  # the start's mark, taken away with the record
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert fact["snapshot"]["record"] == "present" and entry_partial(fact) == "", fact["snapshot"]
    # SGLang's own download at a start moved refs/main to a new snapshot and stopped after
    # config.json (no mark: not deploy's fetch): judged by its weights.
    newer = "ab" * 20
    (entry / "snapshots" / newer).mkdir()
    os.symlink("../../blobs/0f3a", entry / "snapshots" / newer / "config.json")
    (entry / "refs" / "main").write_text(newer)
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert "holds no weights" in entry_partial(fact), fact["snapshot"]
    (entry / "refs" / "main").write_text(REVISION)
    (entry / "blobs" / "9a1c").unlink()
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert "1 of the 2 files its fetch recorded are missing" in entry_partial(fact), fact["snapshot"]
    # A link at the record is never followed.
    record.unlink()
    secret = open_dir / "root-only"
    secret.write_text(f"repo=Qwen/Qwen3-0.6B\nrevision={REVISION}\nfile=config.json\n")
    os.symlink(secret, record)
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert fact["snapshot"]["record"] == "refused" and "not a regular file" in entry_partial(fact)


def test_the_fetch_runs_again_on_an_interrupted_entry():
    """model_fetched's own check (``cached``) is the planner's: an entry with a blob still
    downloading is fetched again, a whole one is not."""
    from tasks.operations.model import cached

    assert cached(hub_fact(**CACHED)) and not cached(hub_fact(**INTERRUPTED))


# --- Deploy's own HF_HUB_OFFLINE (finding 9 of issue 33) ---------------------------------

ANSWERS = {"status": 200, "error": None}
MINE = {"offline": "1", "offline_by": "deploy"}


# name, the model fact, service_env, (code, HF_HUB_OFFLINE in the env file, env_owned, env_drop)
OWNED_CASES = [
    ("deploy's, the hub still down, the cache whole: kept, still deploy's", hub_fact(**CACHED, **MINE),
     {}, ("MODEL_OFFLINE", "1", {"HF_HUB_OFFLINE": "1"}, {})),
    ("deploy's, the hub answers again: taken back", hub_fact(**CACHED, **MINE, hub=ANSWERS), {},
     ("MODEL_SOURCE", None, {}, {"HF_HUB_OFFLINE": "1"})),
    ("deploy's, the model changed and the hub answers: taken back, SGLang downloads it",
     hub_fact(**MINE, hub=ANSWERS), {}, ("MODEL_SOURCE", None, {}, {"HF_HUB_OFFLINE": "1"})),
    ("deploy's, the model changed, the hub down: the blocker names the hub, not HF_HUB_OFFLINE",
     hub_fact(**MINE), {}, ("MODEL_UNAVAILABLE", None, {}, {"HF_HUB_OFFLINE": "1"})),
    ("deploy's, the cache partial now, the hub answers: taken back, fetched", hub_fact(**INTERRUPTED, **MINE,
     hub=ANSWERS), {}, ("MODEL_SOURCE", None, {}, {"HF_HUB_OFFLINE": "1"})),
    ("the operator's own in the env file: kept", hub_fact(**CACHED, offline="1", hub=None), {},
     ("MODEL_SOURCE", None, {}, {})),
    ("service_env sets it now: the operator's", hub_fact(**CACHED, offline="0", hub=ANSWERS),
     {"HF_HUB_OFFLINE": "0"}, ("MODEL_SOURCE", "0", {}, {})),
]


@pytest.mark.parametrize("name,fact,service_env,expected", OWNED_CASES, ids=[case[0] for case in OWNED_CASES])
def test_deploys_own_hf_hub_offline_is_decided_again_and_taken_back(name, fact, service_env, expected):
    node = plan(model_facts(fact), Config.from_data({"service_model": "Qwen/Qwen3-0.6B", "service_env": service_env}))
    code, = [f.code for f in node.findings if f.code.startswith("MODEL_")]
    assert (code, node.service.env.get("HF_HUB_OFFLINE"), node.env_owned, node.env_drop) == expected, node.findings
    assert "HF_HUB_OFFLINE is set" not in " ".join(f.message for f in node.findings if fact.get("offline_by"))
    assert node.as_dict()["env_drop"] == expected[3]
    assert node.env_settled  # the model judged: deploy's record says what it owns now
    said = " ".join(f.message for f in node.findings if f.code.startswith("MODEL_"))
    assert ("deploy takes back the HF_HUB_OFFLINE=1 it wrote" in said) is bool(expected[3]), said


def probe_env_file(open_dir, text, record=None, record_mode=0o600):
    env_file = open_dir / "sglang.env"
    env_file.write_text(text)
    env_file.chmod(0o640)
    if record is not None:
        owned = open_dir / "sglang.env.deploy-owned"
        owned.write_text(record)
        owned.chmod(record_mode)
    return env_file


def probe_with(env_file, **env):
    layout = NodeLayout.for_settings("/nonexistent", str(env_file), "/nonexistent-cache", "nobody")
    inputs = ProbeInputs(layout, model="Qwen/Qwen3-0.6B", model_env=tuple(env.items()))
    out = subprocess.run(["sh", "-c", probe_command(inputs, ("model",))], env={"PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return build_document(out.splitlines(), ["model"])["model"]


def test_probe_tells_deploys_hf_hub_offline_from_the_operators(open_dir):
    """The real probe: the env file's HF_HUB_OFFLINE=1 with deploy's record (root's, 0600)
    is deploy's, and the hub is asked all the same; without the record, with a record
    others may write, one that is a link, one naming another value, or with service_env
    setting it, it is the operator's and the hub is not asked."""
    from bringup.planned_env import owned_record

    hub = f"HF_HUB_CACHE={open_dir}/hub\n"
    with answering_hub(200) as (endpoint, asked):
        env_file = probe_env_file(open_dir, f"{hub}HF_ENDPOINT={endpoint}\nHF_HUB_OFFLINE=1\n",
                                  owned_record({"HF_HUB_OFFLINE": "1"}))
        fact = probe_with(env_file)
        assert (fact["offline"], fact["offline_by"], fact["hub"]) == ("1", "deploy", ANSWERS), fact
        assert asked == ["/Qwen/Qwen3-0.6B/resolve/main/config.json"]
        assert probe_with(env_file, HF_HUB_OFFLINE="1")["offline_by"] is None
        (open_dir / "sglang.env.deploy-owned").chmod(0o602)
        assert probe_with(env_file)["offline_by"] is None
        (open_dir / "sglang.env.deploy-owned").unlink()
        os.symlink(open_dir / "elsewhere", open_dir / "sglang.env.deploy-owned")
        (open_dir / "elsewhere").write_text(owned_record({"HF_HUB_OFFLINE": "1"}))
        fact = probe_with(env_file)
        assert (fact["offline_by"], fact["hub"]) == (None, None), fact
        (open_dir / "sglang.env.deploy-owned").unlink()
        env_file = probe_env_file(open_dir, f"{hub}HF_HUB_OFFLINE=1\n", owned_record({"HF_HUB_OFFLINE": "yes"}))
        assert probe_with(env_file)["offline_by"] is None
        (open_dir / "sglang.env.deploy-owned").unlink()
        assert probe_with(env_file)["offline_by"] is None
    assert len(asked) == 1


def test_the_env_file_loses_only_the_key_deploy_takes_back():
    from bringup import envfile

    text = "HF_TOKEN=x\nCUDA_HOME=/c\n# managed\nHF_HUB_OFFLINE=1\nHF_HUB_OFFLINE=1\n"
    assert envfile.merge(text, {"CUDA_HOME": "/c"}, "# managed", drop=("HF_HUB_OFFLINE",)) == \
        "HF_TOKEN=x\nCUDA_HOME=/c\n# managed\n"
    # A key the plan sets again is not dropped.
    assert "HF_HUB_OFFLINE=1" in envfile.merge(text, {"HF_HUB_OFFLINE": "1"}, "# managed", drop=("HF_HUB_OFFLINE",))


def test_a_record_cannot_pass_lines_of_its_own_for_the_probes(open_dir):
    """The record is the service user's file: a line separator of the parser's (\\r, \\x1c)
    in its repo or revision would pass for a key of the section (revision=, hub_status=);
    only a hub id's and a commit's characters go out."""
    entry = plant_cache_entry(open_dir / "hub", "Qwen/Qwen3-0.6B")
    (entry / ".gpu-bringup-complete").write_text(f"repo=Qwen/Qwen3-0.6B\x1chub_status=200\rrevision={'ab' * 20}\n"
                                                 f"revision={REVISION}\x1cconfig=\nfile=config.json\n")
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(open_dir / "hub"), HF_HUB_OFFLINE="1")
    assert (fact["revision"], fact["hub"], fact["config"]["kind"]) == (REVISION, None, "regular file"), fact
    assert (fact["snapshot"]["record_repo"], fact["snapshot"]["record_revision"]) == (None, None), fact["snapshot"]
    # A record that names nothing is none of this snapshot: judged as an operator's entry (its own cache).
    assert fact["snapshot"]["record"] == "present" and entry_partial(fact) == ""


def test_refs_main_is_read_as_the_caches_reader_never_through_a_link(open_dir):
    """refs/main is the service user's file: a link from it to a file only root reads (holding
    a commit-like line) names no snapshot; a plain one does."""
    entry = plant_cache_entry(open_dir / "hub", "Qwen/Qwen3-0.6B")
    assert probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(open_dir / "hub"), HF_HUB_OFFLINE="1")["revision"] == REVISION
    secret = open_dir / "root-only-commit"
    secret.write_text(REVISION)
    secret.chmod(0o600)
    (entry / "refs" / "main").unlink()
    os.symlink(secret, entry / "refs" / "main")
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(open_dir / "hub"), HF_HUB_OFFLINE="1")
    assert (fact["revision"], fact["config"], fact["refs_main"]) == (None, None, "unread"), fact
    decision = decide(fact, "nobody", serving=True)
    assert decision.code == "MODEL_UNREADABLE" and "refs/main that nobody cannot read" in decision.message


# A directory holding huggingface_hub 1.33.0 and its dependencies (``pip install --target
# DIR huggingface_hub==1.33.0``, world-readable): the real ``hf download`` killed midway.
HF_SITE = os.environ.get("GPU_BRINGUP_HF_SITE", "")


@pytest.mark.skipif(not HF_SITE, reason="GPU_BRINGUP_HF_SITE names no huggingface_hub install")
def test_the_real_hf_download_killed_midway_then_run_again(open_dir):
    """As deploy's fetch runs it, as a throwaway user (``nobody``): its start mark, the real
    ``hf download`` killed by its timeout against a slow hub double (tests/hub_double.py
    serving_hub), the probe finds a partial entry; run again, then its record: whole."""
    from bringup.plan.model import ModelFetchPlan
    from tasks.operations.model import START_SCRIPT, as_service_user, record_command
    from tests.hub_double import serving_hub

    cache = open_dir / "hub"
    cache.mkdir()
    chown_tree(cache, "nobody")
    fetch = ModelFetchPlan("Qwen/Qwen3-0.6B", str(cache), "/v/bin/hf", "nobody", "/nonexistent", "/e")
    clean = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}

    def hf_download(endpoint, limit):
        return subprocess.run(["timeout", "-k", "5", str(limit), "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                               "runuser", "-u", "nobody", "--", "env", f"PYTHONPATH={HF_SITE}", f"HOME={open_dir}",
                               f"HF_ENDPOINT={endpoint}", "HF_HUB_DISABLE_TELEMETRY=1", "/usr/bin/python3", "-c",
                               "import sys; from huggingface_hub.cli.hf import main; sys.exit(main())", "download",
                               "Qwen/Qwen3-0.6B", "--cache-dir", str(cache)], capture_output=True, text=True,
                              env=clean, timeout=limit + 30, check=False).returncode

    subprocess.run(["sh", "-c", as_service_user(fetch, START_SCRIPT)], check=True, env=clean, timeout=30)
    with serving_hub("Qwen/Qwen3-0.6B", chunk=1024, pause=0.5) as endpoint:
        assert hf_download(endpoint, 6) == 124
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert fact["revision"] == REVISION and fact["config"], fact  # refs/main and config.json: it looks cached
    assert fact["snapshot"]["weights"] == 0 and fact["snapshot"]["incomplete"] == 1, fact["snapshot"]
    assert "did not finish" in entry_partial(fact) and decide(fact, "nobody", serving=True).code == "MODEL_UNAVAILABLE"
    with serving_hub("Qwen/Qwen3-0.6B") as endpoint:
        assert hf_download(endpoint, 60) == 0
    subprocess.run(["sh", "-c", record_command(fetch)], check=True, env=clean, timeout=30)
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert entry_partial(fact) == "" and fact["snapshot"]["record"] == "present", fact["snapshot"]
    assert decide(fact, "nobody", serving=True).source == "cache"
def _argv_of_every_process():
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("password", ["Pw9secret", "Pw9/sec?r#et", "Pw9@sec@ret", "Pw9 se'c r#et"])
def test_probe_never_shows_or_passes_an_endpoint_password(open_dir, password):
    """HF_ENDPOINT with a user and password in the service's env file (root's, 0600: where
    such a value may live): the hub is asked without them (urllib takes none from a URL:
    "nonnumeric port: 'PASSWORD@host'" was its answer, into the facts, the report and the
    finding), the endpoint reaches the probe's python on its stdin (no process's argv holds
    it while the hub is asked: ps shows argv to every user), and neither the facts nor the
    decision carry the password, whatever "/", "?", "#" or "@" it holds."""
    seen = {"argv": [], "auth": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            # The case's own password (another test's process may hold a "Pw9" of its own).
            seen["argv"] += [argv for argv in _argv_of_every_process() if password in argv]
            seen["auth"].append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env_file = open_dir / "sglang.env"
    layout = NodeLayout.for_settings("/nonexistent", str(env_file), "/nonexistent-cache", "nobody")
    command = probe_command(ProbeInputs(layout, model="Qwen/Qwen3-0.6B"), ("model",))
    try:
        for host in (f"127.0.0.1:{server.server_address[1]}", closed_endpoint().split("//")[1]):
            env_file.write_text(f"HF_ENDPOINT=http://svc:{password}@{host}\nHF_HUB_CACHE={open_dir}/none\n")
            env_file.chmod(0o600)
            out = subprocess.run(["sh", "-c", command], env={"PATH": "/usr/bin:/bin"}, capture_output=True,
                                 text=True, timeout=60, check=True).stdout
            assert "Pw9" not in out and "sec" not in out, out
            fact = build_document(out.splitlines(), ["model"])["model"]
            assert fact["endpoint"] == f"http://<redacted>@{host}", fact
            decision = decide(fact, "nobody", serving=True)
            assert "Pw9" not in decision.message and "sec" not in decision.message, decision.message
    finally:
        server.shutdown()
        server.server_close()
    assert seen["auth"] == [None], seen
    assert seen["argv"] == [], seen["argv"]


def test_a_port_error_naming_an_endpoint_password_is_redacted_in_the_finding():
    """What an earlier probe reported (urllib's "nonnumeric port: 'PASSWORD@host'", no
    scheme left for the URL pattern) never reaches the finding."""
    fact = hub_fact(endpoint="https://svc:Pw9secret@mirror", hub={"status": None,
                                                                  "error": "nonnumeric port: 'Pw9secret@mirror'"})
    decision = decide(fact, "nobody", serving=True)
    assert decision.code == "MODEL_UNAVAILABLE" and "Pw9" not in decision.message, decision.message


@pytest.mark.parametrize("settled,record,owned,rewritten", [
    ("judged", "file", {}, True),  # a record an interrupted take-back left: said again, emptied
    ("judged", None, {}, False),  # no record: none written
    ("judged", "file", {"HF_HUB_OFFLINE": "1"}, False),  # written first already, whole
    ("no model judged", "file", {}, False),  # nothing to decide it from: left as it is
])
def test_deploys_record_converges_after_an_interrupted_take_back(settled, record, owned, rewritten):
    """The env step records what deploy owns before the env file holds it and takes its record
    back after: a run killed between the env file (its key taken out) and the record leaves a
    record naming HF_HUB_OFFLINE=1 for a file without it; no later plan owns or drops the key,
    so an HF_HUB_OFFLINE=1 the operator writes later would pass for deploy's and be taken back.
    With the model judged, the next deploy says the record again (what it owns now)."""
    from types import SimpleNamespace
    from unittest import mock

    import tasks.cuda_env as cuda_env
    from bringup.layout import DEFAULT_LAYOUT
    from bringup.planned_env import owned_record

    node = SimpleNamespace(toolkit=SimpleNamespace(home="/usr/local/cuda-12.8", version="12.8"),
                           layout=SimpleNamespace(profile_script="/p", pam_environment="/e", env_dir="/etc/sglang",
                                                  directory=DEFAULT_LAYOUT.directory),
                           session_path="/s", manage_alternative=False, env_owned=owned, env_drop={},
                           env_settled=settled == "judged", service=SimpleNamespace(
                               user="sglang", env_file="/etc/sglang/sglang.env", env={}))
    calls = mock.MagicMock()
    with mock.patch.multiple(cuda_env, whole_template=calls.template, shared_env_file=calls.env_file,
                             directory_if_missing=calls.directory, server=calls.server, whole_file=calls.record,
                             cuda_alternative=calls.alternative), \
            mock.patch.object(cuda_env, "host", create=True) as host:
        host.get_fact.return_value = {"kind": record}
        cuda_env.cuda_environment.__wrapped__(node)
    names = [name for name, _, _ in calls.mock_calls if name in ("env_file", "record")]
    written = [call.kwargs["src"].getvalue() for call in calls.record.call_args_list]
    assert (names[-1] == "record" and written[-1] == owned_record({})) is rewritten, (names, written)
    assert all(call.kwargs["dest"] == "/etc/sglang/sglang.env.deploy-owned" for call in calls.record.call_args_list)


def test_what_the_readers_process_prints_is_held_to_the_snapshot_lines(open_dir, monkeypatch):
    """SNAPSHOT_STATE runs as the cache's reader, the service user: a process of that user
    may trace it (ptrace where Yama allows it, as Debian's default does) and make it print
    what it likes. Only the snapshot's own lines, each of its shape, reach the section: not
    a key of the section's own (offline_by=, hub_status=: deploy would take back the
    operator's HF_HUB_OFFLINE)."""
    import facts.probe_script as probe_script

    plant_cache_entry(open_dir / "hub", "Qwen/Qwen3-0.6B")
    traced = open_dir / "probe.d"
    shutil.copytree(probe_script.PROBE_D, traced)
    script = (traced / "model.sh").read_text()
    assert script.count("SNAPSHOT_STATE='entry=$1 ") == 1
    (traced / "model.sh").write_text(script.replace("SNAPSHOT_STATE='entry=$1 ", "SNAPSHOT_STATE='printf \"offline_by=deploy\\n"
                                                    "hub_status=200\\nsnapshot_weights=1 \\n\"\n"
                                                    "entry=$1 "))
    monkeypatch.setattr(probe_script, "PROBE_D", traced)
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(open_dir / "hub"), HF_HUB_OFFLINE="1")
    assert (fact["offline"], fact["offline_by"], fact["hub"]) == ("1", None, None), fact
    assert fact["snapshot"]["weights"] == 1 and entry_partial(fact) == "", fact["snapshot"]


def test_a_record_longer_than_the_probe_reads_is_held_to_its_whole_lines(open_dir):
    """The probe reads at most 256 KiB of the record (a repository of many files writes more):
    the line the cut falls in is no missing file, else a whole entry would be partial for
    ever (fetched again on every deploy, MODEL_UNAVAILABLE with the hub down)."""
    entry = plant_cache_entry(open_dir / "hub", "Qwen/Qwen3-0.6B")
    lines = [f"file={name}" for name in ["config.json", "model.safetensors"] * 16000]
    (entry / ".gpu-bringup-complete").write_text("\n".join(
        ["repo=Qwen/Qwen3-0.6B", f"revision={REVISION}", *lines]) + "\n")
    assert (entry / ".gpu-bringup-complete").stat().st_size > 262144
    fact = probe("Qwen/Qwen3-0.6B", HF_HUB_CACHE=str(open_dir / "hub"), HF_HUB_OFFLINE="1")
    assert fact["snapshot"]["record_missing"] == 0 and entry_partial(fact) == "", fact["snapshot"]
    assert 0 < fact["snapshot"]["record_files"] < len(lines)


def test_the_fetchs_own_steps_as_the_service_user_are_bounded_by_the_clock(monkeypatch):
    """The mark before ``hf download`` and the record after it run as the service user over
    the service user's cache (a stalled mount, a tree of its making): each ends within its
    bound, a failure of the host, never a deploy that waits for ever."""
    import time

    import tasks.operations.model as model_ops
    from bringup.plan.model import ModelFetchPlan

    monkeypatch.setattr(model_ops, "SCRIPT_TIMEOUT", 2, raising=False)
    fetch = ModelFetchPlan("Qwen/Qwen3-0.6B", "/nonexistent", "/v/bin/hf", "nobody", "/nonexistent", "/e")
    began = time.monotonic()
    done = subprocess.run(["sh", "-c", model_ops.as_service_user(fetch, "sleep 300")], env={"PATH": "/usr/bin:/bin"},
                          timeout=60, check=False)
    assert done.returncode != 0 and time.monotonic() - began < 30
