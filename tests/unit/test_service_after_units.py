"""The SGLang unit starts after the driver's daemons the node has: decided in
the plan from ``driver_layer.units`` (bringup/plan/service.py ``driver_units``), shown by
``python -m bringup.plan``, rendered in files/templates/sglang.service.j2; a node without
those units (every sandbox node by default) gets the unit it had."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyinfra.api.util import get_template

from bringup.plan.model import ServicePlan
from bringup.plan.service import driver_units
from tests.fixtures.facts.driver_layer.make import changed, healthy_layer, hgx_layer

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = "files/templates/sglang.service.j2"
NOT_FOUND = {"load_state": "not-found", "active_state": "inactive", "unit_file_state": ""}
FAILED = {"load_state": "loaded", "active_state": "failed", "unit_file_state": "enabled"}

# name, the facts' driver_layer, the units the service is ordered after
CASES = [
    ("older report: no driver layer", None, ()),
    ("no driver daemons", changed(healthy_layer(), [(("units", "nvidia-persistenced"), NOT_FOUND)]), ()),
    ("persistenced only (PCIe node)", healthy_layer(), ("nvidia-persistenced.service",)),
    ("NVSwitch node", hgx_layer(), ("nvidia-persistenced.service", "nvidia-fabricmanager.service")),
    # A failed unit is still the node's: ordering after it costs nothing, and its finding says why it failed.
    ("fabric manager failed", changed(hgx_layer(), [(("units", "nvidia-fabricmanager"), FAILED),
                                                     (("units", "nvidia-persistenced"), NOT_FOUND)]),
     ("nvidia-fabricmanager.service",)),
    ("units missing from the report", {"units": {}}, ()),
]


@pytest.mark.parametrize("layer, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_driver_units(layer, expected):
    assert driver_units({"driver_layer": layer}) == expected


def plan_of(tmp_path, layer):
    facts = json.loads((ROOT / "tests/fixtures/facts/debian13-x86_64-rtx-pro-6000.json").read_text())
    if layer is not None:
        facts["driver_layer"] = layer
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    out = subprocess.run([sys.executable, "-m", "bringup.plan", "--json", str(path)], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("layer, expected", [(None, []), (hgx_layer(), ["nvidia-persistenced.service",
                                                                        "nvidia-fabricmanager.service"])],
                         ids=["older report", "NVSwitch node"])
def test_the_plan_cli_shows_them(tmp_path, layer, expected):
    assert plan_of(tmp_path, layer)["service"]["after_units"] == expected


def render(after_units):
    service = ServicePlan("sglang", "/var/lib/sglang", "/etc/sglang/sglang.env", {}, "/etc/systemd/system/sglang.service",
                          (), "/opt/sglang/venv/bin/sglang serve", "SGLang server (m)", True, after_units=after_units)
    return get_template(str(ROOT / TEMPLATE)).render({"service": service})


def unit_section(text):
    return text.split("[Unit]\n", 1)[1].split("[Service]", 1)[0].splitlines()


def test_the_unit_wants_and_follows_the_daemons():
    lines = unit_section(render(("nvidia-persistenced.service", "nvidia-fabricmanager.service")))
    assert "Wants=nvidia-persistenced.service nvidia-fabricmanager.service" in lines
    assert "After=nvidia-persistenced.service nvidia-fabricmanager.service" in lines
    assert lines[-1] == "", "one blank line before [Service]"


def test_a_node_without_them_gets_the_unit_it_had():
    assert unit_section(render(())) == ["Description=SGLang server (m)", "Wants=network-online.target",
                                        "After=network-online.target", ""]
