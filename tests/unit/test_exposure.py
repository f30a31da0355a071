"""Where the server listens and its API key: the bind address is
``service_host`` (127.0.0.1 by default, SGLang's own); the key comes from a YAML file on
the node SGLang reads itself (``--config``, ``service_api_key_file``), so the unit's
ExecStart, the process's argv and every report name the file, never the key; a server
beyond loopback with no key is a warning (SERVICE_OPEN). Through the planner and its
CLI (``python -m bringup.plan``)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.config import Config, ConfigError
from bringup.plan import plan
from bringup.api_key import node_file_problem
from tests.unit.scenarios import converged

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "tests" / "fixtures" / "facts" / "incident.json"
KEY_FILE = "/etc/sglang/api-key.yaml"

# settings -> (findings of the exposure, the words ExecStart has from --host on)
EXPOSURE = [
    ({}, [], ["--host", "127.0.0.1", "--port", "30000"]),
    ({"service_host": "0.0.0.0"}, ["SERVICE_OPEN:warning"], ["--host", "0.0.0.0", "--port", "30000"]),
    ({"service_host": "::"}, ["SERVICE_OPEN:warning"], ["--host", "::", "--port", "30000"]),
    ({"service_host": "10.0.0.5", "service_port": "31000"}, ["SERVICE_OPEN:warning"],
     ["--host", "10.0.0.5", "--port", "31000"]),
    ({"service_host": "::1"}, [], ["--host", "::1", "--port", "30000"]),
    ({"service_host": "0.0.0.0", "service_api_key_file": KEY_FILE}, [],
     ["--host", "0.0.0.0", "--port", "30000", "--config", KEY_FILE]),
    # service_args may name a --host after the plan's: argparse keeps the last.
    ({"service_args": "--host 0.0.0.0 --tp 8"}, ["SERVICE_OPEN:warning"],
     ["--host", "127.0.0.1", "--port", "30000", "--host", "0.0.0.0", "--tp", "8"]),
    # An operator's own --config may hold the key: not warned about...
    ({"service_host": "0.0.0.0", "service_args": "--config /etc/sglang/mine.yaml"}, [],
     ["--host", "0.0.0.0", "--port", "30000", "--config", "/etc/sglang/mine.yaml"]),
    # ...but SGLang takes one --config file only.
    ({"service_host": "0.0.0.0", "service_api_key_file": KEY_FILE, "service_args": "--config=/etc/sglang/mine.yaml"},
     ["SERVICE_ARGS_CONFLICT:blocker"],
     ["--host", "0.0.0.0", "--port", "30000", "--config", KEY_FILE, "--config=/etc/sglang/mine.yaml"]),
]


@pytest.mark.parametrize("settings,findings,words", EXPOSURE, ids=[json.dumps(s) for s, _, _ in EXPOSURE])
def test_exposure_of_the_service(settings, findings, words):
    node = plan(converged(), Config.from_data({"service_model": "m", **settings}))
    exposure = [f"{f.code}:{f.severity}" for f in node.findings if f.code.startswith("SERVICE_")]
    assert exposure == findings, node.findings
    argv = list(node.service.exec_start)
    assert argv[argv.index("--host"):] == words
    assert not {"--api-key", "--admin-api-key"} & set(argv)


@pytest.mark.parametrize("settings,fix", [
    ({"service_host": "gpu-7.example.com"}, "use an IP address to listen on"),
    ({"service_host": "0.0.0.0:30000"}, "use an IP address to listen on"),
    ({"service_api_key_file": "/etc/sglang/api-key.txt"}, "ending in .yaml or .yml"),
    ({"service_api_key_file": "/tmp/api-key.yaml"}, "outside directories every user can write"),
    ({"service_api_key_file": "etc/api-key.yaml"}, "absolute, normalised path"),
    ({"service_args": "--tp 8 --api-key s3cr3t"}, "remove --api-key/--admin-api-key"),
    ({"service_args": "--admin-api-key=s3cr3t"}, "remove --api-key/--admin-api-key"),
])
def test_settings_refused(settings, fix):
    with pytest.raises(ConfigError) as error:
        Config.from_data(settings, host="gpu-7")
    assert str(error.value).startswith(f"gpu-7: setting {next(iter(settings))}=") and fix in str(error.value)


def test_plan_cli_warns_about_an_open_server_and_names_only_the_key_file(tmp_path):
    secret = "sk-never-printed-0123456789"
    open_config, keyed_config = tmp_path / "open.yaml", tmp_path / "keyed.yaml"
    open_config.write_text('service_host: "0.0.0.0"\nservice_model: m\n')
    keyed_config.write_text(f'service_host: "0.0.0.0"\nservice_model: m\nservice_api_key_file: {KEY_FILE}\n'
                            f'# the key itself ({secret}) lives on the node only\n')
    runs = {}
    for name, config in (("open", open_config), ("keyed", keyed_config)):
        result = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(INCIDENT), "--config", str(config),
                                 "--host", "gpu-7"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert result.returncode == (0 if json.loads(result.stdout)["ok"] else 1), result.stderr  # 1: blockers
        runs[name] = json.loads(result.stdout)
    open_codes = [f["code"] for f in runs["open"]["findings"]]
    assert "SERVICE_OPEN" in open_codes
    warning = next(f for f in runs["open"]["findings"] if f["code"] == "SERVICE_OPEN")
    assert warning["severity"] == "warning" and "0.0.0.0:30000" in warning["message"]
    assert "service_api_key_file" in warning["fix"]
    keyed = runs["keyed"]
    assert "SERVICE_OPEN" not in [f["code"] for f in keyed["findings"]]
    assert keyed["service"]["exec_line"].endswith(f"--host 0.0.0.0 --port 30000 --config {KEY_FILE}")
    assert keyed["service"]["api_key_file"] == KEY_FILE and keyed["service"]["host"] == "0.0.0.0"
    assert secret not in json.dumps(keyed)


KEY_FILES = [
    ({"kind": "file", "user": "root", "group": "sglang", "mode": "640"}, ""),
    ({"kind": "file", "user": "root", "group": "sglang", "mode": "440"}, ""),
    ({"kind": "file", "user": "root", "group": "sglang", "mode": "644"}, "other users can read the key"),
    ({"kind": "file", "user": "root", "group": "sglang", "mode": "660"}, "only root write it"),
    ({"kind": "file", "user": "root", "group": "sglang", "mode": "600"}, "the service's group must read it"),
    ({"kind": "file", "user": "sglang", "group": "sglang", "mode": "640"}, "not root:sglang"),
    ({"kind": "file", "user": "root", "group": "root", "mode": "640"}, "not root:sglang"),
    ({"kind": "link"}, "is a link"),
    ({"kind": "directory"}, "not a regular file"),
    ({"kind": None}, "does not exist"),
]


@pytest.mark.parametrize("fact,problem", KEY_FILES, ids=[json.dumps(f) for f, _ in KEY_FILES])
def test_key_file_is_root_s_and_read_by_the_service_only(fact, problem):
    found = node_file_problem(fact, "sglang", uploaded=False)
    assert (problem in found and found) if problem else found == ""
