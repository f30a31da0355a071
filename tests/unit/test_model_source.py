"""Where service_model comes from (bringup/plan/model_source.py): the decision on a table
of ``model`` facts; the plan's severities, HF_HUB_OFFLINE and fetch; the real
files/probe.sh on scratch directories (a local model readable or not by a real user, a
hub cache hit and miss, a hub that answers, one that refuses the connection); and
``python -m bringup.plan`` on a recorded node's facts. huggingface.co is never asked:
the hub is tests/hub_double.py's, on loopback."""

import http.server
import json
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
from bringup.plan.model_source import ROOT_FILE, blocking_entry, decide, hub_fact
from facts.node import probe_command
from facts.probe_output import build_document
from tests.hub_double import REVISION, answering_hub, closed_endpoint, plant_cache_entry
from tests.unit.scenarios import FIXTURES, converged, varied

CACHE = "/var/cache/sglang/xdg/huggingface/hub"
ENTRY = f"{CACHE}/models--Qwen--Qwen3-0.6B"
REFUSED = {"status": None, "error": "[Errno 111] Connection refused"}
CACHED = {"revision": REVISION, "config": ROOT_FILE, "readable": "yes"}


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
        result = subprocess.run([sys.executable, "-m", "bringup.plan", str(facts), "--config", str(config)],
                                capture_output=True, text=True, cwd=FIXTURES.parents[1])
        assert result.returncode == 0, result.stderr
        found, = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "MODEL_UNAVAILABLE"]
        assert found["severity"] == severity
        assert found["message"].startswith(f"service_model=Qwen/Qwen3-0.6B is not in the service's hub cache ({CACHE}, "
                                           "from XDG_CACHE_HOME) and the hub (https://huggingface.co) does not answer "
                                           "from the node ([Errno -2] Name or service not known)"), found["message"]


def test_the_probe_reads_the_keys_the_plan_passes():
    """files/probe.sh's model section reads the env keys bringup/layout.py passes it."""
    import re
    from pathlib import Path

    from bringup.layout import MODEL_ENV_KEYS

    script = (Path(__file__).resolve().parents[2] / "files" / "probe.sh").read_text()
    assert tuple(re.search(r'model_keys="([^"]*)"', script).group(1).split()) == MODEL_ENV_KEYS


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
            seen["argv"] += [argv for argv in _argv_of_every_process() if "Pw9" in argv]
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
