"""CUDA_HOME and the first nvcc resolve the plan's toolkit for every consumer: a login
shell, a non-interactive SSH command and the service (its env file, read literally)."""

import shlex

from bringup.versions import same_major_minor
from facts.probe_output import parse_assignments, parse_nvcc_release
from tests.node.remote import fail, run_as_login_user, run_in_service_env

RESOLVE = ('n=$(command -v nvcc); printf "CUDA_HOME=%s\\nnvcc=%s\\n" "$CUDA_HOME" "$n"; '
           'if [ -n "$n" ]; then "$n" --version; fi')


def _check(expected, where, result):
    lines = result.stdout.splitlines()
    seen = parse_assignments("\n".join(line for line in lines if line.startswith(("CUDA_HOME=", "nvcc="))))
    release = parse_nvcc_release(result.stdout)
    want_nvcc = f"{expected.home}/bin/nvcc"
    if seen.get("CUDA_HOME") != expected.home or seen.get("nvcc") != want_nvcc \
            or not same_major_minor(release, expected.version):
        fail(expected, where,
             f"CUDA_HOME={expected.home}, first nvcc {want_nvcc}, release {expected.version}",
             f"CUDA_HOME={seen.get('CUDA_HOME') or '(unset)'}, first nvcc {seen.get('nvcc') or '(none)'}, "
             f"release {release or '(none)'}")


def test_login_shell_resolves_toolkit(host, expected):
    _check(expected, "login shell (bash -lc)", run_as_login_user(host, f"bash -lc {shlex.quote(RESOLVE)}"))


def test_ssh_command_resolves_toolkit(host, expected):
    _check(expected, "non-interactive SSH command", run_as_login_user(host, RESOLVE))


def test_service_env_resolves_toolkit(host, expected):
    _check(expected, f"service environment ({expected.config.service_env_file})",
           run_in_service_env(host, expected, RESOLVE))
