"""Settings validation: bad input names host, setting, value and fix."""

import re

import pytest

from bringup import config, setting_checks
from bringup.config import Config, ConfigError
from inventory.sources import operator_hosts


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
    ("gpu_standin", "maybe", "true or false"),
    ("gpu_stand_in", True, "unknown setting"),  # the gpu_ prefix: a typo is named, not ignored
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
    # Where huggingface_hub would look is not where the probe and the fetch look.
    ({"HF_HOME": ""}, "give HF_HOME an absolute path"),
    ("HF_HUB_CACHE=models/hub", "give HF_HUB_CACHE an absolute path"),
    ({"XDG_CACHE_HOME": "~other/cache"}, "give XDG_CACHE_HOME an absolute path"),
    ({"HUGGINGFACE_HUB_CACHE": "/srv/$USER/hub"}, "without $"),
])
def test_service_env_refuses(value, fix):
    with pytest.raises(ConfigError) as raised:
        Config.from_data({"service_env": value}, host="n1")
    assert fix in str(raised.value) and str(raised.value).startswith("n1: setting service_env=")


@pytest.mark.parametrize("key,value,fix", [
    ("stack_sglang", " 0.5.23", "write it as 0.5.23"),
    ("stack_torch", "v2.14.1", "write it as 2.14.1"),
    ("stack_flashinfer", "0.7.02", "write it as 0.7.2"),
    ("stack_torch", "2.14.1-rc1", "write it as 2.14.1rc1"),
    ("cuda_repo_url", "http://[::1/x", "Invalid IPv6 URL"),
    ("cuda_repo_url", "http://[fe80::zz]/x", "does not appear to be an IPv4 or IPv6 address"),
    ("cuda_repo_url", "http://h:0x50/", "Port could not be cast"),
    ("cuda_repo_url", 'http://a"b/', "RFC 3986"),
    ("cuda_repo_url", "http://mirror/cuda repos", "RFC 3986"),
    ("cuda_repo_url", "http://mirrör/", "RFC 3986"),
    ("cuda_repo_url", "http://m/%zz", "RFC 3986"),
    ("cuda_repo_url", "http://a'b/", "DNS name or an IP address"),
    ("cuda_repo_url", "https://user@mirror/", "/etc/apt/auth.conf.d/"),
    ("venv_find_links", ["/srv/wheels", "https://u:p@m/"], "remove the user and password"),
    ("service_model", "a\u0085b", "line separators"),
    ("service_args", "a\u2028b", "line separators"),
    ("service_env", {"K": "a\u2029b"}, "line separators"),
    ("service_env", "K=a\x1db", "line separators"),
    ("service_model", "a\x0cb", "line separators"),
    ("service_env_file", "/etc/sudoers.d/x", "directory of its own"),
    ("service_env_file", "/etc/profile.d/sglang.sh", "directory of its own"),
    ("service_env_file", "/etc/apt/apt.conf.d/sglang", "directory of its own"),
    ("service_env_file", "/etc/security/sglang.env", "directory of its own"),
    ("service_env_file", "/etc/sglang.d/sglang.env", "directory of its own"),
    ("service_cache_dir", "/etc/sudoers.d", "/etc is where root reads"),
    ("service_cache_dir", "/usr/local/cache", "/usr is where root reads"),
    ("service_cache_dir", "/var/lib/dpkg/x", "/var/lib/dpkg is where root reads"),
    ("deploy_steps", [], "name at least one step"),
])
def test_values_accepted_before_and_wrong_are_refused(key, value, fix):
    with pytest.raises(ConfigError) as raised:
        Config.from_data({key: value}, host="n1")
    message = str(raised.value)
    assert message.startswith(f"n1: setting {key}=") and fix in message and "\n" not in message, message


@pytest.mark.parametrize("value", ["0.5.23", "0.5.23.post1", "1.0rc1"])
def test_canonical_releases_pass(value):
    assert Config.from_data({"stack_sglang": value}).stack_sglang == value


@pytest.mark.parametrize("url", ["https://developer.download.nvidia.com/compute/cuda/repos", "http://10.0.0.5:8080/r/",
                                 "http://[::1]:8765/compute/cuda/repos/", "file:/srv/mirror", "https://m/a%20b/",
                                 "https://m/~user/+x"])
def test_urls_of_rfc_3986_pass(url):
    assert Config.from_data({"cuda_repo_url": url}).cuda_repo_url == url


@pytest.mark.parametrize("path", ["/etc/sglang/sglang.env", "/etc/sglang/prod/sglang.env", "/srv/sglang-prod/env",
                                  "/opt/sglang/etc/sglang.env"])
def test_env_files_in_a_directory_of_their_own_pass(path):
    assert Config.from_data({"service_env_file": path}).service_env_file == path


# Every path the deploy manages as root, and the cache placed at, in and around it.
@pytest.mark.parametrize("settings,where", [
    ({"service_cache_dir": "/opt/sglang"}, "holds the venv /opt/sglang/venv"),
    ({"service_cache_dir": "/opt/sglang/venv"}, "is the venv /opt/sglang/venv"),
    ({"service_cache_dir": "/opt/sglang/venv/cache"}, "is inside the venv /opt/sglang/venv"),
    ({"service_cache_dir": "/opt/sglang/venvs"}, "is inside the venv root /opt/sglang"),
    ({"service_cache_dir": "/opt/sglang/locks"}, "inside the venv root /opt/sglang"),
    ({"service_cache_dir": "/opt/sglang/tools/x"}, "inside the venv root /opt/sglang"),
    ({"service_cache_dir": "/opt/sglang/cache"}, "inside the venv root /opt/sglang"),
    ({"service_cache_dir": "/srv/c", "service_env_file": "/srv/c/sglang/sglang.env"}, "holds the env file"),
    ({"service_cache_dir": "/srv/sglang", "service_env_file": "/srv/sglang/sglang.env"}, "holds the env file"),
    ({"service_cache_dir": "/var/lib/sglang"}, "is the service home /var/lib/sglang"),
    ({"service_cache_dir": "/var/lib/sglang/cache"}, "inside the service home"),
    ({"service_cache_dir": "/var/lib", "service_user": "cacheuser"}, "system directory"),
    ({"service_cache_dir": "/srv/v", "venv_managed": False, "venv_path": "/srv/v/venv"}, "holds the venv /srv/v/venv"),
])
def test_the_cache_shares_no_path_with_what_root_manages(settings, where):
    with pytest.raises(ConfigError) as raised:
        Config.from_data(settings, host="n1")
    assert where in str(raised.value), str(raised.value)


def test_a_managed_path_moved_into_the_default_cache_names_its_own_setting():
    with pytest.raises(ConfigError) as raised:
        Config.from_data({"venv_path": "/var/cache/sglang/venv"}, host="n1")
    assert str(raised.value).startswith("n1: setting venv_path='/var/cache/sglang/venv' is invalid: the venv")


def test_every_managed_path_of_the_layout_is_checked():
    """The cache at each path NodeLayout.managed_paths lists, or just below it, is refused."""
    from bringup.config import _cache_overlaps
    from bringup.layout import DEFAULT_LAYOUT

    for role, (path, _) in DEFAULT_LAYOUT.managed_paths().items():
        for cache in (path, f"{path}/below"):
            problems = _cache_overlaps(Config(service_cache_dir=cache), {"service_cache_dir": cache})
            assert problems and problems[0][0] == "service_cache_dir", (role, cache)


def test_shown_values_are_bounded_and_hide_passwords():
    value = {"a_url": "https://bob:pw@m/", "stack_torch": ["x" * 10_000] * 10_000}
    with pytest.raises(ConfigError) as raised:
        Config.from_data({"stack_torch": value}, host="n1")
    assert len(str(raised.value)) < 1000 and "more characters" in str(raised.value)
    assert "pw@" not in str(raised.value) and "https://***@m/" in str(raised.value)


def test_a_yaml_alias_bomb_is_refused_while_loading(tmp_path):
    from inventory.sources import InventoryError, read_yaml

    hosts = tmp_path / "hosts.yml"
    levels = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
    hosts.write_text("all:\n" + "".join(f"  {line}\n" for line in levels) + "hosts: {n1: {}}\n")
    with pytest.raises(InventoryError) as raised:
        read_yaml(hosts)
    assert str(raised.value).startswith(f"{hosts}: refused while loading: its aliases expand it")
    # A few aliases of small mappings (what operators use them for) load as before.
    hosts.write_text("all: &common {venv_path: /srv/sglang/venv}\nhosts: {n1: *common, n2: *common}\n")
    assert read_yaml(hosts)["hosts"]["n2"] == {"venv_path": "/srv/sglang/venv"}


# service_model: huggingface_hub 1.33.0's validate_repo_id (checked against it on this
# table), or an absolute normalised path; nothing that reads as an option.
MODEL_IDS = [
    ("Qwen/Qwen3-0.6B", True), ("gpt2", True), ("_a/b", True), ("A1/B.2-c_d", True), ("1/2", True),
    ("x" * 96, True), ("/models/llama-3", True), ("/srv/models/qwen3", True),
    ("--help", False), ("-rf", False), ("-a/b", False), ("a-/b", False), (".a", False), ("a.", False),
    ("a--b", False), ("a..b", False), ("org/..", False), ("a/b/c", False), ("a/b.git", False), ("x" * 97, False),
    ("a b", False), ("a/", False), ("a//b", False), ("model@main", False), ("/models/../etc", False),
    ("/models/", False), ("/models/a b", False),
]


@pytest.mark.parametrize("value,accepted", MODEL_IDS, ids=[value[:20] for value, _ in MODEL_IDS])
def test_service_model_is_a_hub_id_or_an_absolute_path(value, accepted):
    check = config.SCHEMA["service_model"]
    if accepted:
        assert check(value) == value
    else:
        with pytest.raises(setting_checks.Invalid, match="use a hub id"):
            check(value)


def test_the_hub_cache_table_is_safe_to_hand_to_the_probes_shell():
    """facts/probe_script.py writes HUB_CACHE_ORDER as words of KEY:SUFFIX into the probe,
    which splits them on blanks, evaluates service_env_KEY and appends SUFFIX: a key must
    be a variable name the probe reads (MODEL_ENV_KEYS: read_env_file forgets them first,
    the command pins them) and a suffix plain path components."""
    from bringup.layout import HUB_CACHE_DEFAULT, HUB_CACHE_ORDER, MODEL_ENV_KEYS

    component = r"(/[A-Za-z0-9._-]+)*"
    for key, suffix in HUB_CACHE_ORDER:
        assert re.fullmatch(r"[A-Z_][A-Z0-9_]*", key) and key in MODEL_ENV_KEYS, key
        assert re.fullmatch(component, suffix), suffix
    assert re.fullmatch(component, "/" + HUB_CACHE_DEFAULT), HUB_CACHE_DEFAULT
