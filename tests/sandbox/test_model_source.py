"""Where the model comes from (bringup/plan/model_source.py, tasks/operations/model.py),
over real SSH to one light sandbox node with real systemd: no toolkit, no venv build, no
pre-warm (``deploy_steps=env,account,service``), SGLang's HTTP server played by the test
double (tests/fixtures/serving/fake_sglang.py, run by an operator's drop-in).

Sandbox nodes cannot reach huggingface.co (nothing here downloads a real model), so:
validate names the hub that does not answer for an uncached model (a blocker: the
service would never serve); the fetch (``service_model_fetch``) runs the real
``hf download`` of huggingface_hub 1.33.0, the venv lock's pin, from a venv of that
package and its dependencies alone (the lock's wheels, from the sandbox's wheel mirror),
against a hub double on loopback that answers validate's HEAD and nothing hf can use:
it fails the host in one line, before the unit is written; with the model's files in
the service's hub cache (a minimal, well-formed entry, as hf writes one) validate says
"from the cache", deploy writes HF_HUB_OFFLINE=1 and the fetch does nothing; a second
deploy changes nothing. A fetch killed midway (by its timeout, against a hub double the
real ``hf download`` fetches from, slowly) leaves an entry that is not cached: validate
refuses to take it offline, the next deploy fetches it again and records it whole; deploy's
own HF_HUB_OFFLINE=1 is taken back once the hub answers again.
"""

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.hub_double import answering_hub, closed_endpoint, serving_hub
from tests.sandbox_fixtures import (ENV_FILE, changed_operations, plant_fake_sglang, plant_hub_entry_command,
                                    pyinfra_cli, report_path, run_ssh, ssh_command, summary_row)

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[2]
NAME, ADDR = "md-model", "127.0.0.94"
MODEL = "Qwen/Qwen3-0.6B"
# The service's hub cache: the plan's XDG_CACHE_HOME (bringup/caches.py) + huggingface/hub.
CACHE = "/var/cache/sglang/xdg/huggingface/hub"
VENV = "/opt/sglang/venv"
LOCK = ROOT / "files" / "locks" / "sglang-0.5.23-cp311-x86_64.txt"
# huggingface_hub 1.33.0 and what it needs (its wheel's Requires-Dist, resolved in LOCK).
HF_PACKAGES = ("huggingface-hub", "anyio", "certifi", "click", "filelock", "fsspec", "h11", "hf-xet", "httpcore", "httpx",
               "idna", "packaging", "pyyaml", "tqdm", "typing-extensions")



def said(output, text):
    """Whether deploy printed ``text`` as a line of this host's: pyinfra pads the host's
    prefix to the longest name of the inventory, so the space after it varies."""
    return re.search(rf"\[{re.escape(NAME)}\] +{re.escape(text)}", output) is not None

def only_pins(text, names):
    """A lock's text reduced to the requirements (pin and hash lines) of ``names``.

    >>> only_pins("a==1 \\\\\\n    --hash=sha256:x\\nb==2 \\\\\\n    --hash=sha256:y\\n", {"b"})
    'b==2 \\\\\\n    --hash=sha256:y\\n'
    """
    kept, keeping = [], False
    for line in text.splitlines(keepends=True):
        if line[:1].strip() and not line.startswith("#"):
            keeping = line.split("==", 1)[0].strip().lower() in names
        elif not line.lstrip().startswith("--hash"):
            continue
        if keeping:
            kept.append(line)
    return "".join(kept)


def plant_hf_venv(entry, tmp):
    """A venv at VENV holding huggingface_hub 1.33.0 and its dependencies at the lock's
    pins and hashes (wheels fetched into the sandbox's wheel mirror as the mirror does),
    root-owned as a managed venv is; its bin/hf is the package's console script."""
    from sandbox import pypimirror

    requirements = tmp / "hf-requirements.txt"
    requirements.write_text(only_pins(LOCK.read_text(), set(HF_PACKAGES)))
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    pypimirror.CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(pypimirror.download_command(LOCK, requirements), env=env, check=True, capture_output=True)
    site = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--find-links",
                    str(pypimirror.CACHE), "--target", str(site), "--only-binary=:all:", "-r", str(requirements)],
                   env=env, check=True, capture_output=True)
    archive = tmp / "site.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(site, arcname=".", filter=lambda info: None if info.name.startswith("./bin") else info)
    version = run_ssh(entry, "python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'").stdout.strip()
    packages = f"{VENV}/lib/python{version}/site-packages"
    script = "import sys\nfrom huggingface_hub.cli.hf import main\nsys.exit(main())\n"
    with archive.open("rb") as data:
        subprocess.run(ssh_command(entry, f"install -d -m 0755 {VENV}/bin {packages} && tar -x -o -C {packages} && "
                                          f"ln -sfn /usr/bin/python3 {VENV}/bin/python && "
                                          f"printf 'home = /usr/bin\\ninclude-system-site-packages = false\\n' > "
                                          f"{VENV}/pyvenv.cfg && printf '#!{VENV}/bin/python\\n%s' '{script}' > "
                                          f"{VENV}/bin/hf && chmod 0755 {VENV}/bin/hf && chown -R root:root {VENV}"),
                       stdin=data, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def model_node(sandbox_node, tmp_path_factory):
    entry = sandbox_node(NAME, ADDR, "rtx-pro-6000-x8", "none")
    plant_hf_venv(entry, tmp_path_factory.mktemp("hf-venv"))
    return entry


def data(entry, *more):
    return ("deploy_steps=env,account,service", f"service_model={MODEL}", "service_ready_timeout=60",
            "cuda_manage_alternative=false", f"service_host={entry['ssh_hostname']}", *more)


def validate(entry, *more, expect_rc=0):
    report_path(NAME).unlink(missing_ok=True)
    result = pyinfra_cli("inventory/gpu.py", "--limit", NAME, "validate.py", data=data(entry, *more), timeout=600)
    assert result.returncode == expect_rc, result.output[-4000:]
    report = json.loads(report_path(NAME).read_text())
    return {f["code"]: f for f in report["plan"]["findings"] if f["code"].startswith("MODEL_")}, report


def deploy(entry, *more, json_output=False):
    return pyinfra_cli("inventory/gpu.py", "--limit", NAME, "deploy.py", data=data(entry, *more),
                       json_output=json_output, timeout=600)


def test_the_model_is_found_fetched_or_refused_before_the_service_needs_it(model_node):
    entry = model_node
    # 1. Not cached, the hub unreachable: validate names it, a blocker, nothing changed.
    found, report = validate(entry, expect_rc=1)
    unavailable = found["MODEL_UNAVAILABLE"]
    assert unavailable["severity"] == "blocker", unavailable
    assert unavailable["message"].startswith(f"service_model={MODEL} is not in the service's hub cache ({CACHE}, "
                                             "from XDG_CACHE_HOME) and the hub (https://huggingface.co) does not "
                                             "answer from the node ("), unavailable["message"]
    assert report["facts"]["model"]["hub"]["status"] is None

    # 2. The fetch, against a hub that answers validate's HEAD but serves hf nothing it can
    #    use: the host fails in one line before the unit is written; nothing is started.
    plant_fake_sglang(entry, "FAKE_SGLANG_READY_AFTER=1", MODEL, hub_cache=False)
    run_ssh(entry, "systemctl daemon-reload")
    with answering_hub(200) as (endpoint, asked):
        failed = deploy(entry, "service_model_fetch=true", "service_model_fetch_timeout=60",
                        f"service_env=HF_ENDPOINT={endpoint}")
    assert failed.returncode == 1, failed.output[-4000:]
    assert said(failed.output, f"model: fetching {MODEL} into {CACHE} as sglang (service_model_fetch)"), \
        failed.output[-4000:]
    # hf itself asked the double.
    assert any(path.startswith(f"/api/models/{MODEL}") for path in asked), (asked, failed.output[-4000:])
    row = summary_row(NAME)
    assert row["verdict"] == "failed", row
    assert f"{NAME}: service_model_fetch: hf download {MODEL} failed (exit 1;" in row["reason"], row
    assert "the unit was not (re)started" in row["reason"] and "\n" not in row["reason"], row
    assert run_ssh(entry, "test -e /etc/systemd/system/sglang.service", check=False).returncode == 1
    assert run_ssh(entry, "systemctl is-active sglang", check=False).stdout.strip() != "active"

    # 3. The model in the service's hub cache, as hf writes it (the service user's): from
    #    the cache; the hub unreachable, so deploy writes HF_HUB_OFFLINE=1. The failed fetch's
    #    entry (its mark says deploy's fetch did not finish) is replaced whole, as its fix says.
    run_ssh(entry, f"rm -rf {CACHE}/models--{MODEL.replace('/', '--')} && "
                   f"sed -i '/^HF_ENDPOINT=/d' {ENV_FILE} && install -d -o sglang -g sglang -m 0755 "
                   f"/var/cache/sglang/xdg && {plant_hub_entry_command(CACHE, MODEL, 'sglang')} && "
                   "chown sglang: /var/cache/sglang/xdg/huggingface")
    found, _ = validate(entry, "service_model_fetch=true")
    offline = found["MODEL_OFFLINE"]
    assert offline["severity"] == "fix" and f"from the cache {CACHE}/models--Qwen--Qwen3-0.6B" in offline["message"]
    served = deploy(entry, "service_model_fetch=true")
    assert served.returncode == 0, served.output[-4000:]
    assert said(served.output, "sglang.service serves: /health answered 200"), served.output[-4000:]
    assert summary_row(NAME)["verdict"] == "serving"
    assert "HF_HUB_OFFLINE=1" in run_ssh(entry, f"cat {ENV_FILE}").stdout.splitlines()

    # 4. A second deploy: the fetch finds the model (a no-op), nothing changes.
    again = deploy(entry, "service_model_fetch=true", json_output=True)
    assert again.returncode == 0 and changed_operations(again) == [], again.output[-4000:]
    # The HF_HUB_OFFLINE=1 there is deploy's own (its record beside the env file): decided
    # again, the hub still unreachable, so kept (issue 33, finding 9).
    found, report = validate(entry, "service_model_fetch=true")
    assert "MODEL_OFFLINE" in found and report["facts"]["model"]["offline_by"] == "deploy", found


ENTRY = f"{CACHE}/models--{MODEL.replace('/', '--')}"
RECORD = f"{ENTRY}/.gpu-bringup-complete"
OWNED = f"{ENV_FILE}.deploy-owned"


def env_lines(entry):
    return run_ssh(entry, f"cat {ENV_FILE}").stdout.splitlines()


def test_a_fetch_killed_midway_is_not_cached_and_the_next_deploy_finishes_it(model_node):
    """Issue 33, findings 8 and 9: an interrupted fetch converges, and what deploy wrote it
    takes back. Written for the lead's sandbox run; not run by its author."""
    entry = model_node
    run_ssh(entry, f"rm -rf {ENTRY} {OWNED}; [ ! -f {ENV_FILE} ] || sed -i -e '/^HF_HUB_OFFLINE=/d' "
                   f"-e '/^HF_ENDPOINT=/d' {ENV_FILE}; install -d -o sglang -g sglang -m 0755 /var/cache/sglang/xdg")
    plant_fake_sglang(entry, "FAKE_SGLANG_READY_AFTER=1", MODEL, hub_cache=False)
    run_ssh(entry, "systemctl daemon-reload")

    # 1. The fetch killed midway by its timeout: the weights (256 KiB, 1 KiB every 0.5 s: two
    #    minutes) are not there when service_model_fetch_timeout (60 s, its least) ends it.
    with serving_hub(MODEL, chunk=1024, pause=0.5) as endpoint:
        killed = deploy(entry, "service_model_fetch=true", "service_model_fetch_timeout=60",
                        f"service_env=HF_ENDPOINT={endpoint}")
    assert killed.returncode == 1, killed.output[-4000:]
    assert f"hf download {MODEL} failed (exit 124;" in summary_row(NAME)["reason"], summary_row(NAME)
    listing = run_ssh(entry, f"cd {ENTRY} && find . | sort").stdout
    assert "./refs/main" in listing and "/config.json" in listing, listing
    assert "/model.safetensors" not in listing and ".gpu-bringup-complete" not in listing, listing
    assert "./.gpu-bringup-fetching" in listing, listing  # the fetch began and did not end

    # 2. The hub unreachable: the partial entry is no cached model (the old code planned
    #    MODEL_OFFLINE and started SGLang offline on it).
    found, report = validate(entry, "service_model_fetch=true", f"service_env=HF_ENDPOINT={closed_endpoint()}",
                             expect_rc=1)
    unavailable = found["MODEL_UNAVAILABLE"]
    assert unavailable["severity"] == "blocker" and f"entry {ENTRY} in the service's hub cache is partial" in \
        unavailable["message"], unavailable
    assert "MODEL_OFFLINE" not in found and "HF_HUB_OFFLINE" not in report["plan"]["env"]

    # 3. The hub serving again: deploy fetches it again (not a no-op), records it whole, serves.
    with serving_hub(MODEL) as endpoint:
        done = deploy(entry, "service_model_fetch=true", f"service_env=HF_ENDPOINT={endpoint}")
    assert done.returncode == 0, done.output[-4000:]
    assert said(done.output, f"model: fetching {MODEL} into {CACHE} as sglang (service_model_fetch)"), \
        done.output[-4000:]
    assert said(done.output, "sglang.service serves: /health answered 200"), done.output[-4000:]
    record = run_ssh(entry, f"stat -c '%U %a' {RECORD} && cat {RECORD}").stdout.splitlines()
    assert record[0] == "sglang 644" and record[1:] == [f"repo={MODEL}", "revision=" + record[2].split("=", 1)[1],
                                                        "file=config.json", "file=model.safetensors"], record
    assert run_ssh(entry, f"test -e {ENTRY}/.gpu-bringup-fetching", check=False).returncode == 1

    # 4. The hub unreachable, the cache whole: deploy writes HF_HUB_OFFLINE=1 and records it
    #    as its own (root's, 0600).
    down = deploy(entry, "service_model_fetch=true", f"service_env=HF_ENDPOINT={closed_endpoint()}")
    assert down.returncode == 0, down.output[-4000:]
    assert "HF_HUB_OFFLINE=1" in env_lines(entry)
    owned = run_ssh(entry, f"stat -c '%U %a' {OWNED} && cat {OWNED}").stdout.splitlines()
    assert owned[0] == "root 600" and "HF_HUB_OFFLINE=1" in owned, owned

    # 5. The hub answers again: validate asks it past deploy's HF_HUB_OFFLINE (no "HF_HUB_OFFLINE
    #    is set"), deploy takes the key back from the env file and from its record.
    with serving_hub(MODEL) as endpoint:
        found, report = validate(entry, "service_model_fetch=true", f"service_env=HF_ENDPOINT={endpoint}")
        assert report["facts"]["model"]["offline_by"] == "deploy" and report["facts"]["model"]["hub"]["status"] == 200
        assert report["plan"]["env_drop"] == {"HF_HUB_OFFLINE": "1"} and "MODEL_OFFLINE" not in found, found
        back = deploy(entry, "service_model_fetch=true", f"service_env=HF_ENDPOINT={endpoint}")
        assert back.returncode == 0, back.output[-4000:]
        assert not [line for line in env_lines(entry) if line.startswith("HF_HUB_OFFLINE=")], env_lines(entry)
        assert "HF_HUB_OFFLINE=1" not in run_ssh(entry, f"cat {OWNED}").stdout
        # 6. A second deploy changes nothing.
        again = deploy(entry, "service_model_fetch=true", f"service_env=HF_ENDPOINT={endpoint}", json_output=True)
    assert again.returncode == 0 and changed_operations(again) == [], again.output[-4000:]
