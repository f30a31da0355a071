"""Settings validation: bad input names host, setting, value and fix."""

import pytest

from bringup.config import Config, ConfigError
from inventory.sources import operator_hosts, sandbox_hosts


@pytest.mark.parametrize("key,value,fix", [
    ("stack_torch_cuda", "cu130", "X.Y"),
    ("stack_torch_cuda", "11.8", "X.Y"),
    ("stack_flashinfer", "latest", "release number"),
    ("venv_path", "opt/venv", "absolute, normalised path"),
    ("service_env_file", "/etc/x'; rm -rf /", "absolute, normalised path"),
    ("cuda_repo_fingerprint", "3BF863CC", "40-hex-digit"),
    ("cuda_repo_url", "ftp://mirror", "http"),
    ("target_sms", ["12.0", "4.2"], "compute capabilities"),
    ("venv_managed", "maybe", "true or false"),
    ("stack_torch_cudaa", "13.0", "unknown setting"),
    ("service_user", "root; id", "login name"),
])
def test_invalid_settings_are_named(key, value, fix):
    with pytest.raises(ConfigError) as raised:
        Config.from_data({key: value}, host="gpu-node-07")
    message = str(raised.value)
    assert message.startswith("gpu-node-07: setting ") and key in message and fix in message


def test_command_line_strings_are_coerced():
    config = Config.from_data({"venv_managed": "false", "target_sms": "12.0,10.0", "stack_torch_cuda": 13.0})
    assert config.venv_managed is False and config.target_sms == ("12.0", "10.0")
    assert config.stack_torch_cuda == "13.0"


def test_foreign_host_data_is_ignored():
    assert Config.from_data({"ssh_user": "ubuntu", "_sudo": True}) == Config()


def test_operator_hosts_merge_all_under_host():
    hosts = operator_hosts({"all": {"stack_torch_cuda": "12.8", "venv_path": "/a"},
                            "hosts": {"n1": {"venv_path": "/b", "ssh_hostname": "10.0.0.1"}, "n2": None}})
    assert hosts[0] == ("n1", {"ssh_strict_host_key_checking": "yes", "stack_torch_cuda": "12.8",
                               "venv_path": "/b", "ssh_hostname": "10.0.0.1"})
    assert hosts[1][1]["venv_path"] == "/a"


def test_sandbox_hosts_use_the_local_repo_as_a_mirror():
    nodes = {"nodes": {"gpu1": {"ssh_hostname": "127.0.0.11", "ssh_port": 22, "gpu_profile": "b200-x8"}}}
    repo = {"url": "http://127.0.0.1:8765/compute/cuda/repos/", "fingerprint": "A" * 40,
            "key_url": "http://127.0.0.1:8765/compute/cuda/repos/debian12/x86_64/aaaaaaaa.pub"}
    (name, data), = sandbox_hosts(nodes, repo)
    assert name == "gpu1" and data["cuda_repo_url"] == repo["url"] and "gpu_profile" not in data
    assert data["ssh_strict_host_key_checking"] == "yes"


def test_the_plans_env_keys_are_the_reserved_ones():
    from bringup.config import PLANNED_ENV_KEYS
    from bringup.plan import managed_env_keys

    assert managed_env_keys(Config()) == PLANNED_ENV_KEYS


@pytest.mark.parametrize("value,expected", [
    ("HF_TOKEN=abc NCCL_DEBUG=INFO", (("HF_TOKEN", "abc"), ("NCCL_DEBUG", "INFO"))),
    ({"HF_HOME": "/data/hf"}, (("HF_HOME", "/data/hf"),)),
    ("", ()),
])
def test_service_env_takes_words_or_a_mapping(value, expected):
    assert Config.from_data({"service_env": value}).service_env == expected


@pytest.mark.parametrize("value,fix", [
    ("CUDA_HOME=/usr/local/cuda-12.8", "CUDA_HOME is decided by the plan"),
    ("1BAD=x", "KEY=value with KEY a variable name"),
    ("NOVALUE", "KEY=value"),
    ({"A": "line\nbreak"}, "control characters"),
])
def test_service_env_refuses(value, fix):
    with pytest.raises(ConfigError) as raised:
        Config.from_data({"service_env": value}, host="n1")
    assert fix in str(raised.value) and str(raised.value).startswith("n1: setting service_env=")
