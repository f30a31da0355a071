"""The venv, run with the service's environment: FlashInfer resolves the plan's toolkit
and arch list, torch is the planned CUDA build and carries code for every GPU."""

import shlex

import pytest

from bringup.torch_builds import covers_sm
from bringup.versions import major_minor, same_major_minor
from tests.node.remote import fail, run_in_service_env, stand_in


@pytest.fixture(scope="module")
def venv(venv_probe):
    """What torch and FlashInfer report in the venv, run as the service user with the
    service's environment (the ``venv`` part of the host's one run, venv_probe.py),
    or ``{"error": why}``: a missing venv is a failing check, not a skipped one."""
    if not venv_probe.executable:
        return {"error": f"no {venv_probe.python} (the venv is not built)"}
    if venv_probe.env_error is not None:
        return {"error": venv_probe.env_error}
    answer = venv_probe.answer("venv")
    if answer is None:
        return {"error": f"{venv_probe.python} {venv_probe.died()}"}
    return answer


def _flashinfer(expected, venv, what, key):
    if "error" in venv:
        fail(expected, what, "a working venv", venv["error"])
    flashinfer = venv["flashinfer"]
    if key not in flashinfer:
        fail(expected, what, "FlashInfer to answer", flashinfer.get(f"{key.split('_')[0]}_error")
             or flashinfer.get("cuda_error") or "no answer")
    return flashinfer


def _torch(expected, venv, what):
    if "error" in venv:
        fail(expected, what, "a working venv", venv["error"])
    if "torch" not in venv:
        fail(expected, what, "torch to import", venv.get("torch_error"))
    return venv["torch"]


def test_flashinfer_resolves_toolkit(host, expected, venv):
    flashinfer = _flashinfer(expected, venv, "FlashInfer get_cuda_path()/get_cuda_version()", "cuda_version")
    if flashinfer["cuda_path"] != expected.home or not same_major_minor(flashinfer["cuda_version"], expected.version):
        fail(expected, "FlashInfer get_cuda_path()/get_cuda_version()", f"{expected.home} CUDA {expected.version}",
             f"{flashinfer['cuda_path']} CUDA {flashinfer['cuda_version']}")


def test_flashinfer_target_archs(host, expected, venv):
    flashinfer = _flashinfer(expected, venv, "FlashInfer CompilationContext().TARGET_CUDA_ARCHS", "archs")
    want = sorted(expected.arch_list.split())
    if not flashinfer["archs"] or sorted(flashinfer["archs"]) != want:
        fail(expected, "FlashInfer CompilationContext().TARGET_CUDA_ARCHS",
             " ".join(want) or "(the plan has no arch list)", " ".join(flashinfer["archs"]) or "(empty)")


def test_torch_cuda_build(host, expected, venv):
    torch = _torch(expected, venv, "torch.version.cuda")
    if major_minor(torch["cuda"]) is None or str(major_minor(torch["cuda"])) != expected.plan.torch_cuda:
        fail(expected, "torch.version.cuda", expected.plan.torch_cuda, f"{torch['cuda']} (torch {torch['version']})")


def test_torch_covers_gpu_sms(host, expected, venv):
    torch = _torch(expected, venv, "torch._C._cuda_getArchFlags()")
    sms = expected.sms
    uncovered = [str(sm) for sm in sms if not covers_sm(torch["arch_flags"], sm)]
    if not sms or uncovered:
        fail(expected, "torch._C._cuda_getArchFlags()",
             f"code for SM {' '.join(str(sm) for sm in sms) or '(no GPU SM known)'}",
             f"{' '.join(torch['arch_flags']) or '(empty)'}; nothing for SM {' '.join(uncovered)}")


def test_flashinfer_detects_gpu_arch(host, expected, venv_probe, record_property):
    """With FLASHINFER_CUDA_ARCH_LIST unset, FlashInfer's own detection on this node's GPUs
    and toolkit gives the plan's arch list: the plan did not pick something FlashInfer
    would not. Per visible GPU, flashinfer/compilation_context.py normalises torch's
    device capability (the ``detect`` part of the host's one run, venv_probe.py). On a
    node that declares its GPUs stand-ins (gpu_standin) where CUDA does not start, torch
    is told the capabilities the recorded nvidia-smi reports; nowhere else: without the
    declaration, a CUDA that does not start fails the check."""
    what = "FlashInfer's own arch detection (no FLASHINFER_CUDA_ARCH_LIST)"
    caps = venv_probe.caps
    if not caps:
        fail(expected, what, "GPUs to detect", "nvidia-smi lists none")
    if venv_probe.env_error is not None:
        fail(expected, "service environment", "an env file", venv_probe.env_error)
    detected = venv_probe.answer("detect")
    if detected is None or "error" in detected:
        fail(expected, what, "an answer", venv_probe.died() if detected is None else detected["error"])
    if detected["archs"] != sorted(expected.arch_list.split()):
        fail(expected, what, expected.arch_list or "(the plan has none)",
             " ".join(detected["archs"]) or ("(empty: CUDA does not start)" if not detected["cuda"]
                                             else "(empty: the trap)"))
    if detected["standin"]:
        stand_in(record_property, expected, what, f"torch given nvidia-smi's capabilities {' '.join(caps)}")


# Run by the interpreter the unit's entry point names: where it really is and which venv
# it is (sys.prefix), after importing nothing.
PREFIX_SCRIPT = 'import os, sys; print("@@prefix " + os.path.realpath(sys.prefix))'


def entry_argv(point):
    """The interpreter's command line as the kernel builds it from the entry point's
    ``#!`` line (its first word, then the rest as one argument), or the interpreter a
    ``/bin/sh`` wrapper execs (the probe's ``entry_point``).

    >>> entry_argv({"wrapper": None, "interpreter": "/usr/bin/env", "first_line": "#!/usr/bin/env python3"})
    ['/usr/bin/env', 'python3']
    >>> entry_argv({"wrapper": "/bin/sh", "interpreter": "/v/bin/python", "first_line": "#!/bin/sh"})
    ['/v/bin/python']
    """
    if point.get("wrapper"):
        return [point["interpreter"]]
    words = (point.get("first_line") or "")[2:].strip().split(None, 1)
    return words[:1] + [word.strip() for word in words[1:]]


def test_service_entry_point_starts(host, expected):
    """The unit's ExecStart program starts as systemd will start it: its ``#!`` interpreter
    (as the probe read it, validate's SERVICE_ENTRY_POINT_BROKEN) runs as the service user
    with the service's environment and is the venv's own python. bin/python answering
    proves nothing of it: a venv copied from another path keeps the old python there."""
    script = expected.layout.entry_point
    point = expected.facts.get("entry_point") or {}
    what = f"{script}'s #! interpreter (the unit's ExecStart, as systemd runs it)"
    if not point.get("script"):
        fail(expected, what, f"{script}, the unit's ExecStart program", "missing")
    if not point.get("interpreter"):
        fail(expected, what, "a #! line naming the venv's python", repr(point.get("first_line")))
    argv = entry_argv(point)
    result = run_in_service_env(host, expected, f"{shlex.join(argv)} -I -c {shlex.quote(PREFIX_SCRIPT)} 2>&1",
                                as_service_user=True)
    line = next((line for line in result.stdout.splitlines() if line.startswith("@@prefix ")), None)
    venv = (point.get("venv_bin") or f"{expected.layout.venv}/bin").rsplit("/", 1)[0]
    if line is None:
        fail(expected, what, f"{' '.join(argv)} to start",
             f"exit {result.rc}: {result.stdout.strip()[-200:]} (systemd fails the unit with status=203/EXEC: "
             "bad interpreter)")
    if line[len("@@prefix "):] != venv:
        fail(expected, what, f"the venv's python (sys.prefix {venv})", f"{' '.join(argv)}: sys.prefix "
             f"{line[len('@@prefix '):]}, another venv")
