"""The one table of GPU architectures (bringup/gpu_archs.py): every row's fields are well
formed and read by the decisions (CUDA's range, FlashInfer's target, the open-module
flavour, the PCI bus, torch's arch flags), and no copy of an SM truth is left elsewhere in
bringup/ (a grep over the sources)."""

import re
from pathlib import Path

import pytest
from packaging.version import Version

from bringup import cuda, flashinfer, gpu_archs
from bringup.gpu_archs import ARCHITECTURES, OPEN_REQUIRED, OPEN_SUPPORTED, OPEN_UNSUPPORTED
from bringup.gpu_ids import gpu_model
from bringup.plan.driver_step import flavour_for
from bringup.torch_builds import covers_sm

REPO_ROOT = Path(__file__).resolve().parents[2]
ROWS = {str(arch.sm): arch for arch in ARCHITECTURES}
SOURCES = {"CUDA_GPUS", "CUDA_NOTES", "OPEN_MODULES", "FLASHINFER", "NVLINK5", "IMEX"}


def test_one_row_per_sm_in_order():
    sms = [arch.sm for arch in ARCHITECTURES]
    assert sms == sorted(sms) and len(set(sms)) == len(sms)


@pytest.mark.parametrize("sm", ROWS)
def test_row_cites_sources_the_module_names(sm):
    arch = ROWS[sm]
    cited = {name.strip() for name in arch.sources.split(",")}
    assert cited and cited <= SOURCES
    doc = gpu_archs.__doc__
    assert all(f"- {name}:" in doc for name in cited)
    assert all("https://" in doc.split(f"- {name}:")[1].split("\n- ")[0] for name in cited)


@pytest.mark.parametrize("sm", ROWS)
def test_cuda_range_is_what_cuda_py_decides(sm):
    arch = ROWS[sm]
    assert cuda.cuda_supports_sm(arch.first_cuda, arch.sm)
    before = Version(f"{arch.first_cuda.major}.{arch.first_cuda.minor - 1}") if arch.first_cuda.minor else None
    assert before is None or not cuda.cuda_supports_sm(before, arch.sm)
    if arch.last_cuda:
        assert cuda.cuda_supports_sm(arch.last_cuda, arch.sm)
        assert not cuda.cuda_supports_sm(Version(f"{arch.last_cuda.major + 1}.0"), arch.sm)


@pytest.mark.parametrize("sm", ROWS)
def test_flashinfer_target_is_the_rows_suffix(sm):
    arch = ROWS[sm]
    nvcc = arch.last_cuda or Version("13.0")
    assert arch.flashinfer_suffix in ("", "a", "f")
    assert flashinfer.normalize_arch(Version("0.7.2"), nvcc, arch.sm) == f"{arch.sm}{arch.flashinfer_suffix}"


@pytest.mark.parametrize("sm", ROWS)
def test_cuda_arch_flag_is_what_torch_lists_for_it(sm):
    arch = ROWS[sm]
    assert arch.cuda_arch == f"sm_{arch.sm.major}{arch.sm.minor}"
    assert covers_sm([arch.cuda_arch], arch.sm)


@pytest.mark.parametrize("sm", ROWS)
def test_open_module_column_decides_the_flavour(sm):
    arch = ROWS[sm]
    assert arch.open_modules in (OPEN_UNSUPPORTED, OPEN_SUPPORTED, OPEN_REQUIRED)
    assert flavour_for("auto", (arch.sm,)) == ("proprietary" if arch.open_modules == OPEN_UNSUPPORTED else "open")
    assert (arch.sm.major in gpu_archs.OPEN_ONLY_MAJORS) == (arch.open_modules == OPEN_REQUIRED)


@pytest.mark.parametrize("sm", ROWS)
def test_products_are_found_on_the_bus_with_the_rows_sm(sm):
    for product in ROWS[sm].products:
        assert re.fullmatch(r"[0-9a-f]{4}", product.pci_id) and product.name.startswith("NVIDIA ")
        assert gpu_model({"vendor": "10de", "device": product.pci_id}).compute_cap == sm


def test_a_pci_id_is_one_product():
    ids = [product.pci_id for arch in ARCHITECTURES for product in arch.products]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("sm", "suffix"), [("13.0", "a"), ("12.5", "a"), ("9.5", "a"), ("8.8", ""), ("6.1", "")])
def test_an_unknown_sm_takes_flashinfers_rule_of_its_neighbour_below(sm, suffix):
    assert gpu_archs.architecture(Version(sm)) is None
    assert gpu_archs.flashinfer_suffix(Version(sm)) == suffix


# Copies of an SM truth: an SM or its major compared with a literal, a hand-written table
# keyed by SM or by major, a product with its compute capability written beside it, a
# named architecture constant.
SM_LITERALS = (
    re.compile(r"\.major\s*(==|!=|in|<|>|>=|<=)\s*[\d(\[{]"),
    re.compile(r"\bsms?\b\s*(<|>|<=|>=|==|!=)\s*Version\("),
    re.compile(r"(?<!FOR_)MAJORS?\s*=\s*[\d(\[{]"),  # (a CUDA major's table is CUDA's)
    re.compile(r"_FOR_SM\s*=\s*\{\s*(Version\(|$)"),
    re.compile(r"GpuModel\(\s*\"[^\"]*\",\s*\"\d+\.\d+\"\)"),
    re.compile(r"^(TURING|AMPERE|ADA|HOPPER|BLACKWELL)\w*\s*="),
)


def sm_literals(root):
    """``path:line: text`` of every SM literal under ``root``/bringup outside the table."""
    found = []
    for path in sorted((root / "bringup").rglob("*.py")):
        if path.name == "gpu_archs.py" and path.parent.name == "bringup":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(pattern.search(line) for pattern in SM_LITERALS):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_no_sm_literal_outside_the_table():
    assert sm_literals(REPO_ROOT) == []


def test_the_grep_finds_a_copy(tmp_path):
    (tmp_path / "bringup" / "plan").mkdir(parents=True)
    (tmp_path / "bringup" / "plan" / "x.py").write_text(
        "OPEN_ONLY_MAJORS = (10, 12)\nok = any(sm.major in (10, 12) for sm in sms)\nTURING = Version('7.5')\n")
    assert len(sm_literals(tmp_path)) == 3


def test_imex_parts_are_the_grace_blackwell_trays():
    """GB200 and GB300 (NVL compute trays) need IMEX; B200, B300 (HGX, Fabric Manager) do not."""
    assert gpu_archs.IMEX_NAMES == {"NVIDIA GB200", "NVIDIA GB300"}
    assert all(gpu_archs.needs_imex(pci_id=pci_id) for pci_id in gpu_archs.IMEX_PCI_IDS)
    assert not gpu_archs.needs_imex(name="NVIDIA B200") and not gpu_archs.needs_imex(pci_id="3182")
