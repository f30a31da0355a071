"""Parsing of probe sections that depend on the node's toolkits, on recorded text."""

import pytest

from facts.probe_output import build_document, split_sections

NVCC_12_8 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0"""
NVCC_13_0 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0"""
DEBIAN_11_8 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2022 NVIDIA Corporation
Built on Wed_Sep_21_10:33:58_PDT_2022
Cuda compilation tools, release 11.8, V11.8.89
Build cuda_11.8.r11.8/compiler.31833905_0"""


def framed(section):
    """One section as files/probe.d/lib.sh emits it: its header line, then each body line behind "|"."""
    header, *body = section.split("\n")
    return [header] + ["|" + line for line in body]


def probe_text(*sections):
    head = ['@@ os-release rc=0\nID=debian\nVERSION_ID="12"', "@@ uname rc=0\nx86_64", "@@ smi-query rc=127"]
    return [line for section in head + list(sections) for line in framed(section)]


def test_incident_toolkits_and_resolution():
    lines = probe_text(
        f"@@ toolkit rc=0 home=/usr/local/cuda-12.8\n{NVCC_12_8}",
        f"@@ toolkit rc=0 home=/usr/local/cuda-13.0\n{NVCC_13_0}",
        f"@@ toolkit rc=0 home=/usr\n{DEBIAN_11_8}",
        "@@ cuda-link rc=0\n/usr/local/cuda-12.8",
        "@@ login-env rc=0\nCUDA_HOME=\nCUDA_PATH=\nPATH=/usr/local/cuda-12.8/bin:/usr/bin\nnvcc=/usr/local/cuda-12.8/bin/nvcc",
        f"@@ path-nvcc rc=0 path=/usr/local/cuda-12.8/bin/nvcc\n{NVCC_12_8}",
        "@@ service-env rc=0\nenv_file=absent\nCUDA_HOME=\nCUDA_PATH=\nPATH=/usr/bin\n"
        "FLASHINFER_CUDA_ARCH_LIST=\nFLASHINFER_WORKSPACE_BASE=\nhome=/usr/local/cuda\nvia=default",
        f"@@ resolved-nvcc rc=0 home=/usr/local/cuda\n{NVCC_12_8}",
    )
    facts = build_document(lines)
    assert [(tk["home"], tk["version"]) for tk in facts["toolkits"]] == [
        ("/usr/local/cuda-12.8", "12.8"), ("/usr/local/cuda-13.0", "13.0"), ("/usr", "11.8")]
    assert facts["cuda_symlink"] == "/usr/local/cuda-12.8"
    assert facts["path_nvcc"] == {"path": "/usr/local/cuda-12.8/bin/nvcc", "version": "12.8"}
    assert facts["resolution"]["cuda_home"] == "/usr/local/cuda"
    assert (facts["resolution"]["version"], facts["resolution"]["via"]) == ("12.8", "default")


def test_broken_nvcc_is_a_toolkit_without_version():
    facts = build_document(probe_text(
        "@@ toolkit rc=126 home=/usr/local/cuda-12.4\n/usr/local/cuda-12.4/bin/nvcc: cannot execute binary file"))
    assert facts["toolkits"] == [{"home": "/usr/local/cuda-12.4", "version": None, "nvcc_ok": False,
                                  "error": "/usr/local/cuda-12.4/bin/nvcc: cannot execute binary file"}]


def test_toolkit_dir_without_nvcc():
    facts = build_document(probe_text("@@ toolkit rc=127 home=/usr/local/cuda-12.2"))
    assert facts["toolkits"][0]["error"] == "no bin/nvcc"


def test_unrunnable_resolved_nvcc_falls_back_to_torch_cuda():
    """FlashInfer's get_cuda_version() falls back to torch.version.cuda."""
    facts = build_document(probe_text(
        "@@ service-env rc=0\nenv_file=present\nCUDA_HOME=/opt/gone\nhome=/opt/gone\nvia=CUDA_HOME",
        "@@ resolved-nvcc rc=127 home=/opt/gone",
        '@@ venv rc=0\n{"flashinfer": "0.7.2", "sglang": null, "torch": {"version": "2.14.1+cu130", '
        '"cuda": "13.0", "arch_list": ["sm_120"]}}'))
    resolution = facts["resolution"]
    assert (resolution["version"], resolution["via"], resolution["nvcc_ok"]) == ("13.0", "CUDA_HOME+torch-fallback", False)
    assert facts["torch"]["arch_list"] == ["sm_120"] and facts["flashinfer"] == {"version": "0.7.2"}


def test_no_python_on_the_node():
    facts = build_document(probe_text("@@ python rc=127", "@@ venv rc=127"))
    assert facts["python"] is None and facts["torch"] is None


def test_garbage_before_first_section_is_an_error():
    with pytest.raises(ValueError, match="section header"):
        split_sections(["bash: warning: setlocale", "@@ uname rc=0"])


def test_malformed_gpu_row_is_an_error():
    lines = ["@@ os-release rc=0", "|ID=debian", "@@ smi-query rc=0", "|0, NVIDIA B200"]
    with pytest.raises(ValueError, match="unexpected nvidia-smi row"):
        build_document(lines)


UNIT_FAILED = "@@ unit rc=0 name=sglang.service\nLoadState=loaded\nActiveState=failed\nSubState=failed\n" \
              "Result=exit-code\nNRestarts=0"


@pytest.mark.parametrize("sections,expected", [
    # systemd does not run on the node (a container, a chroot): no unit state at all.
    ("@@ unit rc=127", None),
    # The unit file is not there.
    ("@@ unit rc=0 name=sglang.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nResult=success\n"
     "NRestarts=0", None),
    ("@@ unit rc=0 name=sglang.service\nLoadState=loaded\nActiveState=active\nSubState=running\nResult=success\n"
     "NRestarts=0",
     {"name": "sglang.service", "active_state": "active", "sub_state": "running", "result": "success",
      "restarts": 0, "journal": []}),
    # Journal lines are framed like every body: a line that looks like a section header stays a line.
    ((UNIT_FAILED, "@@ unit-journal rc=0\nTraceback (most recent call last):\n@@ venv rc=0\n\nRuntimeError: x"),
     {"name": "sglang.service", "active_state": "failed", "sub_state": "failed", "result": "exit-code",
      "restarts": 0, "journal": ["Traceback (most recent call last):", "@@ venv rc=0", "", "RuntimeError: x"]}),
    # systemd older than 235 has no NRestarts.
    ("@@ unit rc=0 name=sglang.service\nLoadState=loaded\nActiveState=activating\nSubState=auto-restart\n"
     "Result=exit-code\nNRestarts=",
     {"name": "sglang.service", "active_state": "activating", "sub_state": "auto-restart", "result": "exit-code",
      "restarts": 0, "journal": []}),
], ids=["no-systemd", "no-unit", "running", "failed-with-journal", "no-nrestarts"])
def test_service_unit(sections, expected):
    facts = build_document(probe_text(*([sections] if isinstance(sections, str) else sections)), ["service_unit"])
    assert facts["service_unit"] == expected
