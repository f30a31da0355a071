"""tests/node/reach.py's script run here for real, as a throwaway non-root user
(``nobody``, through runuser as the node suite runs it), over a scratch venv root: a
0700 directory on the way is named (issue 32), through a link too, and an open tree
passes."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.node.reach import blocked_lines, reach_command, resolve_command

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"),
                                reason="runs the script as nobody through runuser: needs root")


@pytest.fixture
def root():
    """A scratch venv root under /tmp that others may pass (pytest's own tmp is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="reach-"))
    path.chmod(0o755)
    (path / "venvs" / "abc" / "bin").mkdir(parents=True)
    for directory in (path / "venvs", path / "venvs" / "abc", path / "venvs" / "abc" / "bin"):
        directory.chmod(0o755)
    python = path / "venvs" / "abc" / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    (path / "venv").symlink_to("venvs/abc")
    yield path
    shutil.rmtree(path)


def reach(root):
    paths = {"venv": str(root / "venv"), "venv python": str(root / "venv" / "bin" / "python")}
    resolved = subprocess.run(["sh", "-c", resolve_command(paths)], capture_output=True, text=True, check=True)
    done = subprocess.run(["sh", "-c", reach_command("nobody", paths, dict(zip(paths, resolved.stdout.split())))],
                          capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    return blocked_lines(done.stdout, "nobody", {str(root / "venv"): "venvs/abc"})


def test_an_open_tree_is_reached(root):
    assert reach(root) == []


def test_a_closed_venv_root_is_named(root):
    root.chmod(0o700)
    assert reach(root) == [
        f"venv {root}/venv (via {root}/venv -> venvs/abc): nobody cannot pass {root} (owner root, mode 700)",
        (f"venv python {root}/venv/bin/python (via {root}/venv -> venvs/abc): nobody cannot pass {root} "
         "(owner root, mode 700)")]


def test_a_closed_directory_behind_the_link_is_named(root):
    (root / "venvs").chmod(0o700)
    assert reach(root) == [
        f"venv {root}/venv (via {root}/venv -> venvs/abc): nobody cannot pass {root}/venvs (owner root, mode 700)",
        (f"venv python {root}/venv/bin/python (via {root}/venv -> venvs/abc): nobody cannot pass {root}/venvs "
         "(owner root, mode 700)")]


def test_an_unreadable_file_is_named(root):
    (root / "venvs" / "abc" / "bin" / "python").chmod(0o700)
    assert reach(root) == [(f"venv python {root}/venv/bin/python (via {root}/venv -> venvs/abc): nobody cannot read "
                            f"{root}/venvs/abc/bin/python (owner root, mode 700)")]


def test_the_node_checks_paths_leave_out_the_env_file(root):
    """The node suite's paths (tests/node/test_permissions.py service_paths), read on a
    scratch node: systemd and with-service-env read the env file as root and deploy
    keeps an operator's 0600 root:root one, so the service user is never asked to read
    it (review of issue 32: the check failed a node that serves)."""
    from types import SimpleNamespace

    from bringup.layout import NodeLayout
    from tests.node.test_permissions import service_paths

    class Host:
        def run(self, command):
            return subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False, timeout=30)

    env_file = root / "sglang.env"
    env_file.write_text("HF_TOKEN=x\n")
    env_file.chmod(0o600)
    layout = NodeLayout.for_settings(str(root / "venv"), str(env_file), str(root), "nobody")
    paths = service_paths(Host(), SimpleNamespace(layout=layout, config=SimpleNamespace(service_model="")))
    assert paths["venv"] == str(root / "venv") and "cache directory" in paths, paths
    assert str(env_file) not in paths.values(), paths
