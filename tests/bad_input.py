"""The bad-input table: every bad setting, settings file, facts document and host list the
project refuses, with the fragment of the one line that names it. Test data, read by
tests/unit/test_bad_input.py (every row, through the function each CLI calls at its
boundary) and tests/cli/test_bad_input.py (a few rows through the real CLIs: the exit
status, the one line on the terminal, nothing written)."""

import json
from pathlib import Path
from unittest import mock

from gevent import monkey

# pyinfra's own parsing of a --data value. Importing pyinfra_cli patches the standard
# library with gevent, which strands make test's pytest-xdist workers (as
# tests/unit/test_operations.py says): parse_cli_arg needs no patch.
with mock.patch.object(monkey, "patch_all"):
    from pyinfra_cli.util import parse_cli_arg

ROOT = Path(__file__).resolve().parents[1]
INCIDENT = ROOT / "tests" / "fixtures" / "facts" / "incident.json"
# Every refusal is one bounded line: the unknown-setting line, which lists every setting, is
# the longest.
LONGEST_LINE = 2500


def alias_bomb(levels, key="stack_torch"):
    """A "billion laughs" YAML document: ``levels`` lists of nine aliases of the one below."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]" for level in range(1, levels)]
    return "\n".join(lines) + f"\n{key}: *l{levels - 1}\n"


ALIAS_BOMB = alias_bomb(9)  # 9**9 scalars: MemoryError before
SMALL_BOMB = alias_bomb(4)  # 9**4 scalars, within the budget: a bounded line

# setting, value (as --data gives it), fragment of the fix
PYINFRA_DATA = [
    ("stack_torch", "2.14.1+cu130", "public release 2.14.1"),
    ("stack_torch_cuda", "cu130", "X.Y"),
    ("stack_flashinfer", "latest", "release number"),
    ("venv_path", "/tmp/x;touch${IFS}/tmp/PWNED;true", "absolute, normalised path"),
    ("venv_path", "/tmp/venv", "outside directories every user can write"),
    ("venv_path", "/home/ubuntu venv", "absolute, normalised path"),
    ("venv_path", "/opt/venv", "a managed venv needs a directory of its own"),
    ("service_env_file", "/etc/passwd", "system directory"),
    ("service_cache_dir", "/var/cache", "system directory"),
    ("service_user", "root", "unprivileged account"),
    ("metrics_textfile_dir", "/srv/textfile\u2028x", "control characters"),
    ("service_api_key_source", "keys/api-key.yaml\nx", "control characters"),
    ("service_user", "-o", "login name"),
    ("service_user", "1000", "login name"),
    ("service_port", "70000", "TCP port"),
    ("prewarm_head_dims", "²", "head dimensions"),
    ("cuda_repo_distro", "debian12\nTrusted: yes", "control characters"),
    ("deploy_steps", "repo,everything", "use one of"),
    ("deploy_apt_lock_timeout", "5m", "whole seconds"),
    ("service_ready_timeout", "5", "use whole seconds from 10 to 86400"),
    ("service_ready_timeout", "20m", "whole seconds"),
    ("report_detail", "maybe", "true or false"),
    ("gpu_diag", "3", "use off (the default: no diagnostic), 1"),
    # Line separators str.splitlines() splits on: the env file and the unit are line-based.
    ("service_model", "org/m\u2028CUDA_HOME=/opt/evil", "line separators"),
    ("service_args", "--tp 8\x85--x", "line separators"),
    ("service_env", "NOTE=a\u2029b", "line separators"),
    ("service_model", "m\x1cx", "line separators"),
    ("service_args", "--a\x0b--b", "line separators"),
    # urlsplit's ValueError used to end the whole run with a traceback.
    ("cuda_repo_url", "http://[::1/x", "Invalid IPv6 URL"),
    ("cuda_repo_url", "http://mirror:99999/cuda", "Port out of range"),
    ("cuda_repo_url", 'http://a"b/', "RFC 3986"),
    ("cuda_repo_url", "http://a$b/", "DNS name or an IP address"),
    ("venv_index_url", "https://mirror/simple\\x", "RFC 3986"),
    ("stack_torch", "v2.14.1", "write it as 2.14.1"),
    ("stack_sglang", " 0.5.23", "write it as 0.5.23"),
    ("service_env_file", "/etc/sudoers.d/sglang", "directory of its own"),
    ("service_env_file", "/etc/cron.d/sglang.env", "directory of its own"),
    ("service_env_file", "/etc/systemd/system/sglang.service.d/env", "directory of its own"),
    ("service_cache_dir", "/opt/sglang", "holds the venv /opt/sglang/venv"),
    ("service_cache_dir", "/opt/sglang/locks", "inside the venv root /opt/sglang"),
    ("service_cache_dir", "/var/lib/sglang", "the service home /var/lib/sglang"),
    ("service_cache_dir", "/etc/sglang", "/etc is where root reads configuration"),
    ("deploy_steps", "", "name at least one step"),
    # A model id that looks like an option reached `hf download --help ...` (issue 33, 15).
    ("service_model", "--help", "a hub id"),
    ("service_model", "-rf", "a hub id"),
    ("service_model", "org/../../etc", "a hub id"),
    ("service_model", "org--x/m", "a hub id"),
    ("service_model", "a/b/c", "a hub id"),
    ("service_model", "/models/../etc/m", "a hub id"),
]

# A URL's user and password: refused, and never shown (--data value, fragment of the fix).
USERINFO = [
    ("cuda_repo_url", "https://bob:Hunter2pw@mirror/cuda"),
    ("cuda_repo_key_url", "https://bob:Hunter2pw@mirror/key.pub"),
    ("venv_index_url", "https://bob:Hunter2pw@pypi.mirror/simple"),
    ("venv_extra_index_urls", "https://bob:Hunter2pw@pypi.mirror/simple"),
    ("venv_find_links", "https://bob:Hunter2pw@wheels.mirror/"),
    # A password holding "/", "?" or "#": urlsplit ends the authority there, and its port
    # error ("Port could not be cast to integer value as 'bob:Hunter2'") showed the password.
    ("cuda_repo_url", "https://bob:Hunter2pw/x@mirror/cuda"),
    ("venv_index_url", "https://bob:Hunter2pw?x@pypi.mirror/simple"),
    ("venv_extra_index_urls", "https://bob:Hunter2pw#x@pypi.mirror/simple"),
    # Review: a password holding a space (the userinfo pattern stopped at the word's end,
    # so the error line showed the value whole).
    ("venv_index_url", "https://bob:Hunter2pw x@pypi.mirror/simple"),
]

# A URL's user and password in a service_env value (HF_ENDPOINT and any other): refused
# at validate, never shown; the env file (root's, 0600) is where such a value may live.
ENV_USERINFO = [
    "HF_ENDPOINT=https://bob:Hunter2pw@hub.mirror",
    "HF_ENDPOINT=https://bob:Hunter2pw/x@hub.mirror",
    "MIRROR=http://bob:Hunter2pw?x@hub.mirror/path",
    "DATABASE_URL=postgres://bob:Hunter2pw@db:5432/x",
    # Review: a password holding a space was accepted (then on the probe's command line).
    "HF_ENDPOINT='https://bob:Hunter2pw x@hub.mirror'",
]

# settings file content (YAML), fragment of the message
PLAN_CONFIG = [
    ('service_args: "--tp 8\\nUser=root\\nExecStartPre=+/bin/sh -c id"\n', "control characters"),
    ('service_args: "--tp \'8"\n', "quote the arguments"),
    ('cuda_repo_url: "http://mirror/\\nTrusted: yes"\n', "control characters"),
    ('cuda_repo_url: "ftp://mirror/cuda"\n', "http://, https:// or file:/ URL"),
    ('cuda_repo_url: "http://mirror/cuda?x=1"\n', "without spaces, query or fragment"),
    ('cuda_repo_key_url: "not a url"\n', "http://, https:// or file:/ URL"),
    ('cuda_repo_fingerprint: "3BF863CC"\n', "40-hex-digit"),
    ('cuda_repo_distro: "Debian-12"\n', "lower-case letters and digits"),
    ('venv_installer: "conda"\n', "use one of uv, pip"),
    ('venv_managed: "maybe"\n', "true or false"),
    ('venv_index_url: "pypi.org/simple"\n', "http://, https:// or file:/ URL"),
    ('venv_find_links: ["relative/dir"]\n', "absolute directory"),
    ('venv_lock: "files/locks/missing-cp311-x86_64.txt"\n', "missing-cp311-x86_64.txt"),
    ('venv_python: "python3.11"\n', "the absolute path of a CPython >= 3.11 installed by root"),
    ('venv_python: "/tmp/cpython/bin/python3.11"\n', "outside directories every user can write"),
    ('service_model: "my model"\n', "use a hub id"),
    ('service_env: "CUDA_HOME=/usr/local/cuda-12.8"\n', "CUDA_HOME is decided by the plan"),
    ('service_env: {"1BAD": "x"}\n', "KEY=value with KEY a variable name"),
    ('prewarm_modules: ["sampling", "activation:relu"]\n', "modules of files/prewarm.py"),
    ('prewarm_dtypes: ["fp8"]\n', "use one of bf16, fp16"),
    ('prewarm_deep_gemm: "sometimes"\n', "true or false"),
    ('prewarm_deep_gemm_timeout: 30\n', "use whole seconds from 60 to 86400"),
    ('target_sms: ["4.2"]\n', "compute capabilities this release knows"),
    ('stack_torch_cudaa: "13.0"\n', "unknown setting"),
    ('service_port: [1, 2]\n', "single value"),
    ('service_cache_dir: "relative/cache"\n', "absolute, normalised path"),
    ('service_cache_dir: "/srv/cache/"\n', "absolute, normalised path"),
    ('service_env_file: "/etc/sglang/../passwd"\n', "absolute, normalised path"),
    ('stack_sglang: "0.5.23 extra"\n', "release number"),
    ("- just\n- a list\n", "expected a mapping of settings"),
    ("stack_torch: [unclosed\n", "not valid YAML"),
    ('cuda_repo_url: "http://[::1/x"\n', "Invalid IPv6 URL"),
    ('cuda_repo_url: "http://a\\"b/"\n', "RFC 3986"),
    ('cuda_repo_url: "https://user:pw@mirror/cuda"\n', "/etc/apt/auth.conf.d/"),
    ('stack_torch: "v2.14.1"\n', "write it as 2.14.1"),
    ('stack_sglang: " 0.5.23"\n', "write it as 0.5.23"),
    ('service_env_file: "/etc/sudoers.d/x"\n', "directory of its own"),
    ('service_env: {"NOTE": "a\\x85b"}\n', "line separators"),
    ('service_env: {"X": "v\\u2028CUDA_HOME=/opt/evil"}\n', "line separators"),
    ('service_cache_dir: "/opt/sglang/venvs"\n', "inside the venv root /opt/sglang"),
    ('venv_path: "/srv/sglang/venv"\nservice_cache_dir: "/srv/sglang"\n', "holds the venv /srv/sglang/venv"),
    ('venv_path: "/var/cache/sglang/venv"\n', "the service's cache /var/cache/sglang"),
    ('service_cache_dir: "/usr/local/libexec/gpu-bringup"\n', "/usr is where root reads"),
    ("deploy_steps: []\n", "name at least one step"),
    (ALIAS_BOMB, "alias bomb"),
    ("a: &a [*a]\n", "recursive document"),
    # Under the budget, still long: the line shows a bounded value.
    (SMALL_BOMB, "more characters"[:0] + "is invalid: use a single value"),
]

# facts document content, fragment of the message
PLAN_FACTS = [
    ('{"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [{"index": 0, "name": "G"}]}',
     "facts.gpus[0]: missing 'name'"[:0] + "facts.gpus[0]: missing 'compute_cap'"),
    ('{"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [], "driver": {"version": 580}}',
     "facts.driver.version: expected a version"),
    ('{"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": {}}', "facts.gpus: expected a list"),
    ('{"gpus": []}', "facts: missing 'os'"),
    ('["not", "an", "object"]', "facts: expected an object"),
    ('{"os": {"id": 12, "version_id": "12", "arch": "x86_64"}, "gpus": []}', "facts.os.id: expected a string"),
    ('{"facts": {"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}}}', "facts: missing 'gpus'"),
    ("{not json", "is not JSON"),
]


def facts_with(**fields):
    """The incident's facts with top-level fields replaced."""
    document = json.loads(INCIDENT.read_text())
    document.update(fields)
    return json.dumps(document)


KEYRING_SOURCE = {"file": "/etc/apt/sources.list.d/cuda-debian12-x86_64.list", "format": "one-line",
                  "uris": ["https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"],
                  "suites": ["/"], "signed_by": "/usr/share/keyrings/cuda-archive-keyring.gpg", "trusted": False}
# Version fields that do not parse, and values of the wrong type that raised TypeError deep in the planner.
PLAN_FACTS += [
    (facts_with(python={"version": "three point eleven"}), "facts.python.version: expected a version"),
    (facts_with(driver={"version": "580.95.05", "cuda_version": "thirteen"}), "facts.driver.cuda_version"),
    (facts_with(torch={"version": "latest", "cuda": "13.0", "arch_list": []}), "facts.torch.version"),
    (facts_with(flashinfer={"version": "0.7.2 beta"}), "facts.flashinfer.version"),
    (facts_with(sglang={"version": ""}), "facts.sglang.version"),
    (facts_with(python_interpreters=[{"path": "/usr/bin/python3.11", "version": "3.x"}]),
     "facts.python_interpreters[0].version"),
    (facts_with(toolkits=[{"home": "/usr/local/cuda-12.8", "version": "twelve", "nvcc_ok": True}]),
     "facts.toolkits[0].version"),
    (facts_with(apt={"sources": [KEYRING_SOURCE], "keyrings": {KEYRING_SOURCE["signed_by"]: 5}}),
     "facts.apt.keyrings['/usr/share/keyrings/cuda-archive-keyring.gpg']: expected a list"),
    (facts_with(apt={"sources": [KEYRING_SOURCE], "keyrings": {KEYRING_SOURCE["signed_by"]: [5]}}),
     "expected a string, got int 5"),
    (facts_with(cuda_packages={"cuda-nvcc-13-0": 13}), "facts.cuda_packages['cuda-nvcc-13-0']"),
]

# inventory/hosts.yml content, fragment of the message
HOSTS_FILES = [
    ("hosts:\n  - gpu-node-01\n", "hosts: expected a mapping of host name -> settings"),
    ("hosts:\n  gpu-node-01: 10.0.0.1\n", "host gpu-node-01: expected a mapping of settings"),
    ("hosts:\n  gpu-node-01:\n    ssh_strict_host_key_checking: 'no'\n", "host keys are always checked"),
    ("all: [1]\nhosts: {}\n", "all: expected a mapping of settings"),
    ("hosts: {gpu: [\n", "not valid YAML"),
    ("- a\n- b\n", "expected a mapping at the top level"),
    # Refused while loading, before any value is built or shown (9 levels: MemoryError before).
    ("all:\n" + "".join(f"  {line}\n" for line in ALIAS_BOMB.splitlines()) + "hosts:\n  gpu-node-01: {}\n",
     "refused while loading: its aliases expand it"),
    ("all: &a {x: [*a]}\nhosts:\n  gpu-node-01: {}\n", "recursive document"),
]

# A facts file that is not there: the plan CLI names it (its path, the OS's reason).
MISSING_FACTS = "/nonexistent/facts.json"


def data_value(value):
    """What ``pyinfra --data KEY=VALUE`` makes of VALUE (true/false, an int, JSON, else
    the string), by pyinfra's own function: what reaches the host's data.

    >>> data_value("70000"), data_value("12.0"), data_value("maybe")
    (70000, 12.0, 'maybe')
    """
    return parse_cli_arg(value)


def rows():
    """How many rows the table holds (every table, the missing facts file)."""
    tables = (PYINFRA_DATA, USERINFO, ENV_USERINFO, PLAN_CONFIG, PLAN_FACTS, HOSTS_FILES)
    return sum(map(len, tables)) + 1
