"""The probe on a deployed sandbox node: a non-root user plants
programs in a directory of its own that the service env file's PATH names, and the
env file gets an LD_PRELOAD of that user's library; validate.py probes the node as
root and no planted program, and no process with the library, ever runs as root.
The env file is restored afterwards (the node is the shared deployed one)."""

import base64
import shutil
import subprocess

import pytest

from tests.sandbox_fixtures import DEPLOY_DATA, pyinfra_cli, run_ssh

pytestmark = pytest.mark.sandbox

ENV_FILE = "/etc/sglang/sglang.env"
SAVED = "/root/sglang.env.hardening-probe"
EVIL = "/tmp/hardening-probe-bin"
# Each planted program records the uid it ran as, then does what the real one does.
PLANTED = ("sed", "printenv", "sort", "sha256sum", "cut", "env", "nvcc", "c++", "python3")
SPY = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void spy(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/hardening-probe-preload-as-%d", (int)getuid());
    FILE *f = fopen(path, "a");
    if (f) fclose(f);
}
"""


@pytest.fixture(scope="module")
def node(deployed_node):
    return deployed_node


def spy_library(tmp_path):
    """The LD_PRELOAD library, built here (the node has no compiler; both are amd64
    Debian 12), base64 for the trip; None without a compiler here."""
    compiler = shutil.which("cc")
    if compiler is None:
        return None
    (tmp_path / "spy.c").write_text(SPY)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(tmp_path / "spy.so"), str(tmp_path / "spy.c")],
                   check=True)
    return base64.b64encode((tmp_path / "spy.so").read_bytes()).decode()


def test_root_never_runs_what_the_env_files_path_or_preload_names(node, tmp_path):
    library = spy_library(tmp_path)
    plants = "\n".join(
        f"printf '#!/bin/sh\\nid -u > /tmp/hardening-probe-ran-as-$(id -u)\\n"
        f"real=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v {name}) && exec \"$real\" \"$@\"\\n' "
        f"| runuser -u sglang -- tee {EVIL}/{name} >/dev/null && runuser -u sglang -- chmod 755 {EVIL}/{name}"
        for name in PLANTED)
    preload = (f"echo {library} | base64 -d | runuser -u sglang -- tee {EVIL}/libspy.so >/dev/null && "
               f"echo 'LD_PRELOAD={EVIL}/libspy.so' >> {ENV_FILE}" if library else "true")
    run_ssh(node, f"""
        set -e
        rm -rf {EVIL} /tmp/hardening-probe-ran-as-* /tmp/hardening-probe-preload-as-*
        cp -p {ENV_FILE} {SAVED}
        runuser -u sglang -- mkdir -m 755 {EVIL}
        {plants}
        echo 'PATH={EVIL}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' >> {ENV_FILE}
        echo 'LD_LIBRARY_PATH={EVIL}' >> {ENV_FILE}
        {preload}""")
    try:
        result = pyinfra_cli("inventory/gpu.py", "--limit", node["name"], "validate.py", data=DEPLOY_DATA)
        ran = run_ssh(node, "ls /tmp/hardening-probe-ran-as-* /tmp/hardening-probe-preload-as-* 2>/dev/null; true"
                      ).stdout.split()
    finally:
        run_ssh(node, f"mv -f {SAVED} {ENV_FILE}; rm -rf {EVIL} /tmp/hardening-probe-ran-as-* "
                      "/tmp/hardening-probe-preload-as-*")
    # validate probed the node (its report is the proof the probe ran), whatever it found.
    assert "Traceback" not in result.output and node["name"] in result.output, result.output[-3000:]
    assert "/tmp/hardening-probe-ran-as-0" not in ran, ran
    assert "/tmp/hardening-probe-preload-as-0" not in ran, ran
    restored = run_ssh(node, f"grep -c {EVIL} {ENV_FILE} || true").stdout.strip()
    assert restored == "0"
