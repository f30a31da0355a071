"""The pre-warmed FlashInfer JIT cache: the pre-warm's manifest matches the venv and the
plan, every module's library is there, and ninja has nothing left to do for any."""

import json
import shlex

import pytest

from bringup.flashinfer import workspace_dir_name
from bringup.versions import parse
from tests.node.remote import fail, read_text, run_in_service_env, stat


@pytest.fixture(scope="module")
def manifest(host, expected):
    """The pre-warm manifest (the plan's ``layout.manifest``) and its stat, or ``{"error": why}``."""
    path = expected.layout.manifest
    text = read_text(host, path)
    if text is None:
        return {"error": f"no {path} (the JIT cache was not pre-warmed)"}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        return {"error": f"{path} is not JSON: {error}"}
    if not isinstance(data, dict):
        return {"error": f"{path} is not a JSON object"}
    return {"data": data, "stat": stat(host, path)}


def _manifest(expected, manifest, what):
    if "error" in manifest:
        fail(expected, what, "a pre-warm manifest", manifest["error"])
    modules = manifest["data"].get("modules") or []
    if not modules or not all(isinstance(m, dict) and m.get("dir") and m.get("library") for m in modules):
        fail(expected, what, "at least one module, each with name, dir and library", f"modules {modules!r}")
    return manifest["data"]


def test_prewarm_manifest_matches(host, expected, manifest):
    what = f"pre-warm manifest {expected.layout.manifest}"
    data = _manifest(expected, manifest, what)
    info = manifest["stat"]
    owners = ("root", expected.config.service_user)
    if info is None or info.owner not in owners or info.mode & ~0o644:
        fail(expected, what, f"owned by {' or '.join(owners)}, 0644 or stricter", str(info))
    venv_flashinfer = (expected.facts.get("flashinfer") or {}).get("version")
    if venv_flashinfer is None or parse(data.get("flashinfer")) != parse(venv_flashinfer):
        fail(expected, what, f"flashinfer {venv_flashinfer or '(none in the venv)'}", f"flashinfer {data.get('flashinfer')}")
    if data.get("arch_list") != expected.arch_list:
        fail(expected, what, f"arch_list {expected.arch_list!r}", f"arch_list {data.get('arch_list')!r}")
    request = expected.plan.prewarm.request
    if data.get("request") != request:
        fail(expected, what, f"request {request}", f"request {data.get('request')}")
    workspace = (f"{expected.layout.flashinfer_cache}/{data['flashinfer']}/"
                 f"{workspace_dir_name(expected.arch_list.split())}")
    if data.get("workspace") != workspace:
        fail(expected, what, f"workspace {workspace}", f"workspace {data.get('workspace')}")


def test_prewarm_libraries_exist(host, expected, manifest):
    data = _manifest(expected, manifest, "pre-warmed libraries")
    libraries = [module["library"] for module in data["modules"]]
    result = host.run("for f in " + " ".join(shlex.quote(lib) for lib in libraries)
                      + '; do [ -f "$f" ] || echo "$f"; done')
    missing = result.stdout.split()
    if result.rc != 0 or missing:
        fail(expected, "pre-warmed libraries", f"all {len(libraries)} present", f"missing {' '.join(missing)}")


def test_prewarm_ninja_no_work(host, expected, manifest):
    data = _manifest(expected, manifest, "ninja -n on the pre-warmed modules")
    # SGLang's own modules are content-addressed (their check is prewarm_sglang_no_compile).
    dirs = [module["dir"] for module in data["modules"] if module.get("kind", "flashinfer") == "flashinfer"]
    script = ("for d in " + " ".join(shlex.quote(d) for d in dirs)
              + '; do echo "@@dir $d"; ninja -n -C "$d" 2>&1; echo "@@rc $?"; done')
    result = run_in_service_env(host, expected, script, as_service_user=True)
    outputs, current = {}, None
    for line in result.stdout.splitlines():
        if line.startswith("@@dir "):
            current = line[len("@@dir "):]
            outputs[current] = []
        elif current is not None:
            outputs[current].append(line)
    stale = {d: out for d, out in ((d, outputs.get(d, [])) for d in dirs) if "ninja: no work to do." not in out}
    if stale:
        detail = "; ".join(f"{d}: {' / '.join(line for line in out if not line.startswith('@@'))[:200] or 'no output'}"
                           for d, out in stale.items())
        fail(expected, "ninja -n in the service environment", "ninja: no work to do. for every module", detail)


def test_prewarm_sglang_no_compile(host, expected, manifest):
    """SGLang's own JIT modules load from the cache with SGLANG_CRASH_ON_JIT_COMPILE=1:
    none would compile when the service starts."""
    data = _manifest(expected, manifest, "SGLang JIT modules")
    request = expected.plan.prewarm.request
    sglang = [module for module in request["modules"] if module.startswith("sglang-")]
    recorded = [module["request"] for module in data["modules"] if module.get("kind") == "sglang"]
    if sglang and not recorded:
        fail(expected, "SGLang JIT modules", f"{', '.join(sglang)} in the manifest", "none recorded")
    if not sglang:
        return
    prewarm = expected.plan.prewarm
    command = (f"{shlex.quote(prewarm.venv)}/bin/python {shlex.quote(prewarm.script)} --verify "
               f"--modules {','.join(sglang)} --dtypes {','.join(request['dtypes'])}"
               # As deploy pre-warmed: without a device where the plan says so.
               f"{' --no-device' if prewarm.no_device else ''}")
    result = run_in_service_env(host, expected, command, as_service_user=True)
    if result.rc != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        fail(expected, "SGLang JIT modules with SGLANG_CRASH_ON_JIT_COMPILE=1", "every module from the cache",
             " / ".join(line for line in detail if "JIT module" in line or "prewarm:" in line)[-400:]
             or f"exit {result.rc}")
