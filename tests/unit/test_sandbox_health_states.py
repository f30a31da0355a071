"""The GPU health states' stand-in answers (sandbox/gpu_health_states.py), read by the
product's own parsers: each state says what it claims on the GPU it claims, and only
there; the control refuses an unknown state."""

import pytest

from facts.sections.gpu_health import parse_health_rows, parse_remapped_rows, parse_xid_lines
from facts.sections.gpus import parse_gpu_rows
from sandbox.driver_texts import driver_texts
from sandbox.gpu_health_states import HEALTH_STATES, control_script, health_texts
from sandbox.gpu_standin import FIXTURES

PROFILE = FIXTURES / "rtx-pro-6000-x8"


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
