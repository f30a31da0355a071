"""The GPU health states' stand-in answers (sandbox/gpu_health_states.py), read by the
product's own parsers: each state says what it claims on the GPU it claims, and only
there; the control refuses an unknown state. The DCGM states: the dcgmi stand-in answers
the public samples, the nvidia-smi stand-in the process the control put on a GPU."""

import subprocess
from pathlib import Path

import pytest

from facts.sections.gpu_health import parse_health_rows, parse_remapped_rows, parse_xid_lines
from facts.sections.gpus import parse_gpu_rows
from sandbox.driver_texts import driver_texts
from sandbox.gpu_health_states import HEALTH_STATES, SAMPLES, control_script, health_texts
from sandbox.gpu_standin import FIXTURES

PROFILE = FIXTURES / "rtx-pro-6000-x8"
NVIDIA_SMI = Path(__file__).resolve().parents[2] / "sandbox" / "files" / "nvidia-smi"


@pytest.fixture(scope="module")
def texts():
    base = {**{name: (PROFILE / name).read_text() for name in ("query.csv", "smi.txt")},
            **driver_texts(PROFILE, "x86_64")}
    return base, health_texts(PROFILE, base)


def answer(texts, state, name):
    base, health = texts
    return health.get(f"health/{state}/{name}", health[name] if name == "health.csv" else base[name])


@pytest.mark.parametrize("state, field, value", [
    ("healthy", "ecc_uncorrected_volatile", 0),
    ("ecc-uncorrectable", "ecc_uncorrected_volatile", 2),
    ("link-x8", "pcie_width_current", 8),
    ("hw-slowdown", "hw_slowdown", True),
])
def test_the_health_query_of_each_state(texts, state, field, value):
    rows = parse_health_rows(answer(texts, state, "health.csv").splitlines())
    assert len(rows) == 8 and rows[3][field] == value
    assert all(row[field] == parse_health_rows(answer(texts, "healthy", "health.csv").splitlines())[0][field]
               for row in rows if row["index"] != 3)


@pytest.mark.parametrize("state, pending, failure", [("healthy", False, False), ("row-remap-pending", True, False),
                                                     ("row-remap-failure", False, True)])
def test_remapped_rows_in_q(texts, state, pending, failure):
    rows = parse_remapped_rows(answer(texts, state, "smi-q.txt"))
    assert len(rows) == 8 and (rows["0000:48:00.0"]["pending"], rows["0000:48:00.0"]["failure"]) == (pending, failure)
    assert not rows["0000:18:00.0"]["pending"]


def test_a_gpu_missing_from_every_listing_but_the_bus(texts):
    assert len(parse_gpu_rows(answer(texts, "gpu-missing", "query.csv").splitlines())) == 7
    assert len(parse_health_rows(answer(texts, "gpu-missing", "health.csv").splitlines())) == 7
    assert "0000:88:00.0" not in parse_remapped_rows(answer(texts, "gpu-missing", "smi-q.txt"))
    assert ": 7\n" in answer(texts, "gpu-missing", "smi-q.txt") and "GPU7" not in answer(texts, "gpu-missing", "topo.txt")
    assert answer(texts, "gpu-missing", "smi.txt").count("NVIDIA RTX PRO 6000") == 7


@pytest.mark.parametrize("state, xid", [("ecc-uncorrectable", 95), ("row-remap-pending", 63), ("row-remap-failure", 64),
                                        ("gpu-missing", 79)])
def test_the_xid_lines_are_in_the_drivers_format(texts, state, xid):
    events = parse_xid_lines(texts[1][f"health/{state}/xid.txt"].splitlines())
    assert [(event["xid"], event["bus_id"]) for event in events] == [(xid, "0000:88:00.0" if xid == 79 else "0000:48:00.0")]


def test_every_state_has_a_control_and_an_unknown_one_is_refused():
    assert all(f"echo {state} >" in control_script(state) for state in HEALTH_STATES if state != "healthy")
    with pytest.raises(ValueError, match="unknown health state 'broken'"):
        control_script("broken")


def run_dcgm_states(tmp_path, *states):
    """The DCGM states' control scripts and the stand-ins under tmp_path (their node paths moved there)."""
    def moved(text):
        return (text.replace("/usr/share/", f"{tmp_path}/share/").replace("/var/lib/", f"{tmp_path}/var/")
                .replace("/usr/bin/", f"{tmp_path}/bin/"))
    (tmp_path / "bin").mkdir(exist_ok=True)
    for state in states:
        subprocess.run(["sh", "-c", moved(control_script(state))], check=True, timeout=30)

    def tool(name, *args):
        source = (tmp_path / "bin" / name) if name == "dcgmi" else NVIDIA_SMI
        return subprocess.run(["sh", "-c", moved(source.read_text()), name, *args], capture_output=True, text=True,
                              timeout=30)
    return tool


@pytest.mark.parametrize("state, rc, sample", [("dcgm-pass", 0, "diag-r1-pass.json"),
                                               ("dcgm-fail", 226, "diag-r2-fail.json")])
def test_the_dcgmi_standin_answers_the_public_samples(tmp_path, state, rc, sample):
    tool = run_dcgm_states(tmp_path, state)
    for level in ("1", "2"):
        run = tool("dcgmi", "diag", "-r", level, "-j")
        assert run.returncode == rc and run.stdout == (SAMPLES / sample).read_text()
    assert tool("dcgmi", "diag", "-r", "3", "-j").returncode == 1
    run_dcgm_states(tmp_path, "dcgm-none")
    assert not (tmp_path / "bin" / "dcgmi").exists()


def test_the_process_on_a_gpu_is_in_nvidia_smis_compute_apps(tmp_path):
    tool = run_dcgm_states(tmp_path, "gpu-process")
    query = ("--query-compute-apps=pid,process_name,gpu_bus_id", "--format=csv,noheader")
    assert tool("nvidia-smi", *query).stdout == "4242, python3, 00000000:18:00.0\n"
    run_dcgm_states(tmp_path, "gpu-idle")
    assert (tool("nvidia-smi", *query).returncode, tool("nvidia-smi", *query).stdout) == (0, "")
