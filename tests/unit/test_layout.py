"""bringup/layout.py: the paths the tasks derive (venv root, env directory, unit name,
stage directories) follow the settings that place them, and the probe's one ready set
of inputs (``ProbeInputs``) is what control/host_plan.py builds from a host's settings,
sent to the node as the probe's environment."""

import re
import shlex
from pathlib import Path

import pytest

from bringup.config import Config
from bringup.layout import DEFAULT_LAYOUT, NodeLayout, ProbeInputs
from control.host_plan import probe_inputs
from facts.node import NodeFacts, ServiceAccount, VenvStack, probe_command
from facts.probe_script import PINNED
from tasks.service_account import HELPER_SOURCES

ROOT = Path(__file__).resolve().parents[2]
CUSTOM = NodeLayout.for_settings("/srv/ai/venv", "/srv/sglang-conf/svc.env", "/data/cache", "inference")
EXTERNAL = NodeLayout.for_settings("/home/alice/venv", "/etc/sglang/sglang.env", "/var/cache/sglang", "sglang",
                                   managed=False)


@pytest.mark.parametrize(("layout", "expected"), [
    (DEFAULT_LAYOUT, {"venv_root": "/opt/sglang", "env_dir": "/etc/sglang", "unit_name": "sglang.service",
                      "service_home": "/var/lib/sglang", "torch_record": "/opt/sglang/venv/.torch-arch.json"}),
    (CUSTOM, {"venv_root": "/srv/ai", "env_dir": "/srv/sglang-conf", "unit_name": "sglang.service",
              "service_home": "/var/lib/inference", "torch_record": "/srv/ai/venv/.torch-arch.json"}),
    (EXTERNAL, {"venv_root": "/home/alice", "env_dir": "/etc/sglang", "unit_name": "sglang.service",
                "service_home": "/var/lib/sglang", "torch_record": ""}),
], ids=["defaults", "moved", "external venv"])
def test_derived_paths_follow_the_settings(layout, expected):
    assert {name: getattr(layout, name) for name in expected} == expected


@pytest.mark.parametrize(("layout", "expected"), [
    (DEFAULT_LAYOUT, ("/etc", "/etc/apt", "/etc/apt/keyrings", "/etc/apt/preferences.d", "/etc/apt/sources.list.d",
                      "/etc/profile.d", "/etc/sglang", "/etc/systemd/system", "/opt/sglang/locks",
                      "/usr/local/libexec/gpu-bringup")),
    # A moved env file and venv move their directories; the fixed files' stay.
    (CUSTOM, ("/etc", "/etc/apt", "/etc/apt/keyrings", "/etc/apt/preferences.d", "/etc/apt/sources.list.d",
              "/etc/profile.d", "/etc/systemd/system", "/srv/ai/locks", "/srv/sglang-conf",
              "/usr/local/libexec/gpu-bringup")),
], ids=["defaults", "moved"])
def test_stage_dirs_are_the_directories_of_every_file_written_whole(layout, expected):
    assert layout.stage_dirs == expected


def test_managed_paths_name_the_env_directory_property():
    assert CUSTOM.managed_paths()["env file's directory"] == (CUSTOM.env_dir, "service_env_file")
    assert CUSTOM.managed_paths()["venv root"] == (CUSTOM.venv_root, "venv_path")


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, {"PROBE_VENV": "/opt/sglang/venv", "PROBE_ENV_FILE": "/etc/sglang/sglang.env",
          "PROBE_CACHE_DIR": "/var/cache/sglang", "PROBE_SERVICE_USER": "sglang",
          "PROBE_SERVICE_HOME": "/var/lib/sglang", "PROBE_TORCH_RECORD": "/opt/sglang/venv/.torch-arch.json",
          "PROBE_UNIT": "sglang.service"}),
    ({"venv_path": "/srv/ai/venv", "service_env_file": "/srv/sglang-conf/svc.env", "service_cache_dir": "/data/cache",
      "service_user": "inference"},
     {"PROBE_VENV": "/srv/ai/venv", "PROBE_ENV_FILE": "/srv/sglang-conf/svc.env", "PROBE_CACHE_DIR": "/data/cache",
      "PROBE_MANIFEST": "/data/cache/prewarm/manifest.json", "PROBE_JIT_ROOT": "/data/cache/.cache/flashinfer",
      "PROBE_SERVICE_USER": "inference", "PROBE_SERVICE_HOME": "/var/lib/inference"}),
    # An external venv: its torch is imported, no record is read.
    ({"venv_path": "/home/alice/venv", "venv_managed": False},
     {"PROBE_VENV": "/home/alice/venv", "PROBE_TORCH_RECORD": ""}),
], ids=["defaults", "moved", "external venv"])
def test_host_plan_gives_the_probe_the_settings_layout(settings, expected):
    config = Config.from_data(settings)
    inputs = probe_inputs(config)
    assert inputs.layout == config.layout
    environment = inputs.environment()
    assert {key: environment[key] for key in expected} == expected


def test_the_env_keys_reported_are_the_plans_never_the_operators():
    config = Config.from_data({"service_env": {"HF_TOKEN": "hf_secret", "SGLANG_X": "1"}})
    keys = probe_inputs(config).environment()["PROBE_ENV_KEYS"].split()
    assert {"CUDA_HOME", "PATH"} <= set(keys)
    assert "HF_TOKEN" not in keys and "SGLANG_X" not in keys


@pytest.mark.parametrize(("sections", "env_keys", "first", "last"), [
    ((), (), "PROBE_VENV", "PROBE_SERVICE_HOME"),
    (("gpus",), (), "PROBE_SECTIONS", "PROBE_SERVICE_HOME"),
    (("venv", "prewarm"), ("CUDA_HOME",), "PROBE_SECTIONS", "PROBE_ENV_KEYS"),
], ids=["all sections", "one section", "sections and keys"])
def test_environment_has_sections_then_layout_then_keys(sections, env_keys, first, last):
    environment = ProbeInputs(DEFAULT_LAYOUT, env_keys).environment(sections)
    assert (list(environment)[0], list(environment)[-1]) == (first, last)
    assert environment.get("PROBE_SECTIONS", "") == " ".join(sections)
    assert environment.get("PROBE_ENV_KEYS", "") == " ".join(env_keys)


def assignments(command):
    """The PROBE_* assignments of a probe command, as the node's sh receives them."""
    words = shlex.split(command.split(" | ")[3])
    assert words[:5] == ["env", "-u", "SHELLOPTS", "-u", "BASHOPTS"], words[:5]
    return dict(word.split("=", 1) for word in words[5:-1])


@pytest.mark.parametrize(("fact", "sections"), [
    (NodeFacts, None),
    (VenvStack, "venv"),
    (ServiceAccount, "account"),
], ids=["whole document", "venv stack", "service account"])
def test_every_fact_sends_the_inputs_it_is_given(fact, sections):
    # No narrow fact falls back to a default of its own (the service user included).
    inputs = ProbeInputs(CUSTOM, ("CUDA_HOME", "PATH"))
    sent = assignments(fact().command(inputs=inputs))
    assert sent.pop("PROBE_SECTIONS") == (sections or "")  # pinned empty: every section
    pinned = {key: value for key, value in PINNED.items() if key != "PROBE_SECTIONS"}
    assert sent == {**pinned, **inputs.environment()}  # the rest pinned: the node's own files (facts/probe_script.py)
    assert fact().command(inputs=inputs) == probe_command(inputs, () if sections is None else (sections,))


def test_a_fact_from_the_cli_probes_the_default_layout():
    # pyinfra's CLI passes a fact no arguments: the settings' defaults, said in one place.
    assert ProbeInputs.defaults() == ProbeInputs(DEFAULT_LAYOUT)
    assert assignments(NodeFacts().command()) == {**PINNED, **ProbeInputs.defaults().environment()}


@pytest.mark.parametrize(("inputs", "expected"), [
    (ProbeInputs.defaults(),
     "venv=/opt/sglang/venv (managed), env_file=/etc/sglang/sglang.env, cache_dir=/var/cache/sglang, "
     "service_user=sglang"),
    (ProbeInputs(EXTERNAL, ("CUDA_HOME", "PATH")),
     "venv=/home/alice/venv (external), env_file=/etc/sglang/sglang.env, cache_dir=/var/cache/sglang, "
     "service_user=sglang, env_keys=CUDA_HOME PATH"),
], ids=["defaults", "external with keys"])
def test_inputs_are_named_by_their_settings(inputs, expected):
    # pyinfra logs a fact's arguments with str(), and the operation cases key their facts by it.
    assert str(inputs) == expected


def test_every_helper_the_plans_run_is_a_file_the_account_step_uploads():
    # The account step installs files/<name> as libexec/<name> (tasks/service_account.py);
    # a helper renamed on one side only would be a path the venv build or pre-warm cannot run.
    assert [name for name in DEFAULT_LAYOUT.helpers if not (ROOT / HELPER_SOURCES / name).is_file()] == []
    named = {name for path in (ROOT / "bringup").rglob("*.py")
             for name in re.findall(r'\.helper\("([^"]+)"\)', path.read_text())}
    assert "session-bound" in named and named - set(DEFAULT_LAYOUT.helpers) == set()
