"""files/torch_info.py run here for real: a venv read without importing torch (versions
from dist-info names and torch/version.py, the arch list from a current record)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TORCH_INFO = ROOT / "files" / "torch_info.py"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A real venv with the dist-info and torch/version.py of torch, FlashInfer and SGLang
    (no torch code: an import fails, as a broken torch would)."""
    root = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    for name in ("torch-2.14.1", "flashinfer_python-0.7.2", "sglang-0.5.23"):
        (site / f"{name}.dist-info").mkdir()
        (site / f"{name}.dist-info" / "RECORD").write_text(f"{name}\n")
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text("__version__ = '2.14.1+cu130'\ncuda: Optional[str] = '13.0'\n")
    return root, site


def info(root, *args):
    run = subprocess.run([str(root / "bin" / "python"), "-I", str(TORCH_INFO), *args], capture_output=True,
                         text=True, timeout=60, cwd="/")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def stamp(site):
    stat = (site / "torch-2.14.1.dist-info" / "RECORD").stat()
    return f"torch-2.14.1.dist-info:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}"


def test_versions_and_a_current_record_need_no_import(venv, tmp_path):
    root, site = venv
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"stamp": stamp(site), "arch_list": ["sm_90", "sm_120"]}))
    assert info(root, "--record", str(record)) == {
        "flashinfer": "0.7.2", "sglang": "0.5.23",
        "torch": {"version": "2.14.1+cu130", "cuda": "13.0", "arch_list": ["sm_90", "sm_120"],
                  "arch_list_from": "record"}}


@pytest.mark.parametrize("record", [None, {"stamp": "torch-2.14.1.dist-info:1:2:3", "arch_list": ["sm_90"]},
                                    "not json"])
def test_without_a_current_record_torch_is_imported(venv, tmp_path, record):
    root, _ = venv
    path = tmp_path / "record.json"
    if record is not None:
        path.write_text(record if isinstance(record, str) else json.dumps(record))
    document = info(root, "--record", str(path))
    # The stub torch has no code: the import fails, as it would for a broken torch.
    assert "torch" not in document and "torch_error" in document
    assert document["flashinfer"] == "0.7.2"


def test_a_venv_without_torch_says_so(tmp_path):
    root = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    assert info(root) == {"flashinfer": None, "sglang": None,
                          "torch_error": "ModuleNotFoundError(\"No module named 'torch'\")"}
