"""Public evidence for the NVIDIA locks (files/locks/evidence.yaml, bringup/lock_evidence.py):
the table parses, no row is stale (its package=version is in a shipped lock of every distro
it names), each lock's confirmed lines are computed from it, and docs/locks.md's block is
what ``python -m bringup.lock_evidence`` makes of the table and the locks."""

import subprocess
import sys
from pathlib import Path

import pytest

from bringup import lock_evidence

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "locks.md"
ROWS, CONTRADICTED = lock_evidence.read_table()
LOCKS = lock_evidence.read_locks()
COVERAGE = lock_evidence.coverage(ROWS, LOCKS)


def lines(lock, status):
    return {line for line, found, _ in COVERAGE[lock] if found == status}


def test_every_nvidia_lock_is_read():
    assert set(LOCKS) == {path.name for path in (ROOT / "files" / "locks").glob("*.txt")
                          if path.name.startswith(("cuda-", "driver-", "dcgm-"))}
    assert ROWS


def test_no_row_is_stale():
    """A row whose package=version left every lock of a distro it names is evidence for nothing."""
    assert lock_evidence.stale([*ROWS, *CONTRADICTED], LOCKS) == []


def test_a_row_no_lock_holds_is_stale():
    moved = lock_evidence.Row("cuda-nvcc-13-0", "13.0.48-1", "debian12/x86_64", ("debian12", "ubuntu2404"),
                              "https://example.org/x", "cuda-nvcc-13-0=13.0.48-1", "pin")
    assert lock_evidence.stale([moved], LOCKS) == [
        "cuda-nvcc-13-0=13.0.48-1 (https://example.org/x): no shipped lock of debian12 holds it",
        "cuda-nvcc-13-0=13.0.48-1 (https://example.org/x): no shipped lock of ubuntu2404 holds it"]


def test_every_source_is_a_file_or_page_with_its_line():
    for row in [*ROWS, *CONTRADICTED]:
        assert row.source.startswith("https://") and row.quote and row.distros
    for row in ROWS:
        assert row.package in row.quote and row.version in row.quote, row


@pytest.mark.parametrize("lock,confirmed", [
    ("cuda-13.0-ubuntu2404-x86_64.txt", {
        "cuda-cccl-13-0=13.0.85-1", "cuda-crt-13-0=13.0.88-1", "cuda-cudart-13-0=13.0.96-1",
        "cuda-cudart-dev-13-0=13.0.96-1", "cuda-driver-dev-13-0=13.0.96-1", "cuda-nvcc-13-0=13.0.88-1",
        "cuda-toolkit-13-0-config-common=13.0.96-1", "libcublas-13-0=13.0.2.14-1", "libcublas-dev-13-0=13.0.2.14-1"}),
    ("cuda-13.0-debian12-x86_64.txt", {"cuda-crt-13-0=13.0.88-1", "cuda-cudart-13-0=13.0.96-1",
                                       "cuda-nvcc-13-0=13.0.88-1", "libnvvm-13-0=13.0.88-1"}),
    ("cuda-13.0-debian12-aarch64.txt", set()),
    ("cuda-13.0-debian13-x86_64.txt", set()),
    ("cuda-13.0-ubuntu2204-x86_64.txt", set()),
    ("driver-580-debian12-x86_64.txt", set()),
])
def test_confirmed_lines_per_lock(lock, confirmed):
    """Confirmed: a public source from the lock's own repository directory (distro and CPU)."""
    assert lines(lock, "confirmed") == confirmed


def test_another_repository_is_not_a_confirmation():
    assert "cuda-nvcc-13-0=13.0.88-1" in lines("cuda-13.0-debian12-aarch64.txt", "elsewhere")
    assert "cuda-nvcc-13-0=13.0.88-1" in lines("cuda-13.0-ubuntu2204-x86_64.txt", "elsewhere")  # ubuntu2204/sbsa's
    assert lines("driver-580-debian13-x86_64.txt", "elsewhere") == {"nvlsm=2025.06.10-1"}


def test_the_nvvm_line_is_cuda_13s_name():
    """The evidence that contradicted the locks' cuda-nvvm-13-0 (CUDA 13 names NVVM
    libnvvm-13-0) now confirms their line; no lock holds CUDA 12's name at 13.0."""
    assert "libnvvm-13-0=13.0.88-1" in lines("cuda-13.0-debian12-x86_64.txt", "confirmed")
    assert not any("cuda-nvvm-13-0" in line for name in LOCKS for status in ("confirmed", "elsewhere", "none")
                   for line in lines(name, status))
    assert CONTRADICTED == []


def test_the_docs_block_is_the_tables():
    block = lock_evidence.docs_block(PAGE.read_text())
    assert block == lock_evidence.markdown(ROWS, CONTRADICTED, LOCKS), (
        "docs/locks.md's lock evidence is not files/locks/evidence.yaml's: "
        "python -m bringup.lock_evidence --write docs/locks.md")


def run(*args):
    return subprocess.run([sys.executable, "-m", "bringup.lock_evidence", *args], cwd=ROOT, capture_output=True,
                          text=True, check=False)


def test_the_page_is_checked_and_rewritten_by_the_module(tmp_path):
    page = tmp_path / "locks.md"
    text = PAGE.read_text()
    page.write_text(text.replace("| `cuda-13.0-debian12-x86_64.txt`", "| `cuda-13.0-debian12-x86_64.old`"))
    result = run("--check", str(page))
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "--write" in result.stderr, result
    assert run("--write", str(page)).returncode == 0 and page.read_text() == text
    assert run("--check", str(page)).returncode == 0
    assert run("--check", str(PAGE)).returncode == 0


def test_a_page_without_the_markers_is_refused_in_one_line(tmp_path):
    page = tmp_path / "locks.md"
    page.write_text("# Locks\n")
    result = run("--write", str(page))
    assert result.returncode == 2 and "Traceback" not in result.stderr and "markers" in result.stderr, result
    assert page.read_text() == "# Locks\n"


def test_a_stale_row_fails_the_module(tmp_path):
    (tmp_path / "files" / "locks").mkdir(parents=True)
    lock = "cuda-13.0-debian12-x86_64.txt"
    (tmp_path / "files" / "locks" / lock).write_text((ROOT / "files" / "locks" / lock).read_text())
    (tmp_path / "files" / "locks" / "evidence.yaml").write_text(
        "evidence:\n  - {package: cuda-nvcc-13-0, version: 13.0.48-1, repo: debian12/x86_64, kind: pin,\n"
        "     distros: [debian12], source: 'https://example.org/x', quote: 'cuda-nvcc-13-0=13.0.48-1'}\n")
    page = tmp_path / "locks.md"
    page.write_text(f"{lock_evidence.BEGIN}\n{lock_evidence.END}\n")
    assert lock_evidence.main(["--check", str(page)], root=tmp_path) == 1


@pytest.mark.parametrize("text,message", [
    ("evidence: [{package: a, version: 1-1, repo: debian12/x86_64, kind: pin, distros: [debian12], "
     "source: 'https://x', quote: 'b=2'}]", "does not name a and 1-1"),
    ("evidence: [{package: a, version: 1-1, repo: debian12/arm64, kind: pin, distros: [debian12], "
     "source: 'https://x', quote: 'a=1-1'}]", "not an NVIDIA repository directory"),
    ("evidence: [{package: a, version: 1-1, repo: debian12/x86_64, kind: seen, distros: [debian12], "
     "source: 'https://x', quote: 'a=1-1'}]", "kind 'seen'"),
    ("evidence: [{package: a, version: 1-1, repo: debian12/x86_64, kind: pin, distros: debian12, "
     "source: 'https://x', quote: 'a=1-1'}]", "distros must be a list"),
    ("contradicted: [{package: a, version: 1-1, repo: debian12/x86_64, distros: [debian12], "
     "source: 'https://x', quote: 'c=1'}]", "missing says"),
    ("rows: []", "expected the keys"),
])
def test_a_bad_row_is_named(text, message):
    with pytest.raises(lock_evidence.EvidenceError, match=message):
        lock_evidence.parse_table(text)
