"""A found apt source for the CUDA repository through the real probe (files/probe.d/,
its /etc/apt moved to a scratch directory) and the real planner CLI
(``python -m bringup.plan``): a keyring that holds a key besides the pinned one is not
adopted; its source is disabled and the plan writes its own."""

import json
import subprocess
import sys
from pathlib import Path

from tests.unit.scenarios import converged
from tests.unit.test_probe_apt import DEBIAN_KEYRING, URL, probe_apt, scratch

ROOT = Path(__file__).resolve().parents[2]
# A key of Debian's archive keyring (this machine's debian-archive-keyring): pinned
# here, the keyring's other keys are the extra ones.
PINNED = "1F89983E0081FDE018F3CC9673A4F27B8DD47936"


def plan_cli(tmp_path, apt):
    facts = dict(converged(), apt=apt)
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    (tmp_path / "settings.yaml").write_text(f"cuda_repo_fingerprint: {PINNED}\n")
    run = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(tmp_path / "facts.json"), "--config",
                          str(tmp_path / "settings.yaml"), "--host", "gpu-7"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


def test_a_keyring_with_two_keys_is_not_adopted(tmp_path):
    keyring = tmp_path / "cuda-archive-keyring.gpg"
    keyring.write_bytes(DEBIAN_KEYRING.read_bytes())  # several keys, the pinned one among them
    etc = scratch(tmp_path, f"deb [signed-by={keyring}] {URL} /\n")
    apt = probe_apt(etc)
    assert PINNED in apt["keyrings"][str(keyring)] and len(apt["keyrings"][str(keyring)]) > 1
    plan = plan_cli(tmp_path, apt)
    assert plan["repo"]["adopt"] is False
    assert plan["repo"]["source_file"] == "/etc/apt/sources.list.d/nvidia-cuda.sources"
    assert plan["repo"]["disable"] == [str(etc / "sources.list.d" / "cuda-debian12-x86_64.list")]
    conflict = [f for f in plan["findings"] if f["code"] == "APT_SOURCE_CONFLICT"]
    assert [f["severity"] for f in conflict] == ["fix"]
    assert f"signed by {keyring}, which holds the pinned key and also " in conflict[0]["message"]
