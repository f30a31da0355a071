"""The probe's route section (files/probe.d/route.sh), the real script run here with stand-in
``ip`` and ``getent`` on the base PATH replaying iproute2's and glibc's recorded answers
(tests/fixtures/route/README.md), parsed and schema-checked by the product; and the input's
check (bringup/layout.py probe_address), the one way an address reaches the probe."""

import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.facts_schema import check
from bringup.layout import ProbeInputs, probe_address
from facts.probe_output import build_document
from facts.probe_script import probe_command
from tests.unit.test_probe_driver import SCRIPT, standin, write

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "route"


def ip_standin(bin_dir, json_answer, text_answer, json_exit=0, text_exit=0):
    """A stand-in ``ip``: ``-j route get ADDR`` answers one fixture, ``route get ADDR`` another;
    each call and its arguments are logged (the tests count them)."""
    data = bin_dir.parent / "data"
    write(data / "ip.json", (FIXTURES / json_answer).read_text())
    write(data / "ip.text", (FIXTURES / text_answer).read_text())
    standin(bin_dir, "ip", f'printf "%s\\n" "$*" >> {data}/ip.calls\n'
                           f'if [ "$1" = -j ]; then file={data}/ip.json; code={json_exit}; '
                           f'else file={data}/ip.text; code={text_exit}; fi\n'
                           'while IFS= read -r line; do printf "%s\\n" "$line"; done < "$file"\nexit $code\n')
    return data / "ip.calls"


def getent_standin(bin_dir, names):
    """A stand-in ``getent ahosts NAME``: the recorded answer's shape for each name it knows,
    nothing and exit status 2 (glibc's "not found") for another."""
    cases = "".join(f'    {name}) printf "%s       STREAM {name}\\n%s       DGRAM  \\n" {address} {address} ;;\n'
                    for name, address in names.items())
    standin(bin_dir, "getent", f'case $2 in\n{cases}    *) exit 2 ;;\nesac\n')


def run_route_probe(tmp_path, route_to, sections="route"):
    """The probe's route section with PROBE_ROUTE_TO=route_to -> (raw output, ``route``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("env", "runuser"):
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin"))
    env = {"PATH": "/usr/bin:/bin", "PROBE_SERVICE_PATH": str(bin_dir), "PROBE_FS_ROOT": str(tmp_path / "root"),
           **({"PROBE_SECTIONS": sections} if sections else {}), **({"PROBE_ROUTE_TO": route_to} if route_to else {})}
    run = subprocess.run(["sh", "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60, check=True)
    document = build_document(run.stdout.splitlines(), ["route"])
    check({"os": {"id": "debian", "version_id": "12", "arch": "x86_64"}, "gpus": [], **document})
    return run.stdout, document.get("route")


# (case, asked, ip's -j answer and exit, its text answer and exit, expected fact's fields)
CASES = [
    ("an address through a gateway", "8.8.8.8", ("via-gateway.json", 0), ("via-gateway.txt", 0),
     {"address": "8.8.8.8", "interface": "eth0", "source": "192.0.2.2", "gateway": "192.0.2.1", "local": False,
      "error": None}),
    ("the node's own address", "127.0.0.1", ("local.json", 0), ("local.txt", 0),
     {"address": "127.0.0.1", "interface": "lo", "source": "127.0.0.1", "gateway": None, "local": True,
      "error": None}),
    ("an IPv6 address", "2001:db8::1", ("ipv6.json", 0), ("via-gateway.txt", 0),
     {"address": "2001:db8::1", "interface": "eth0", "source": "fd00::2", "gateway": "fd00::1", "local": False,
      "error": None}),
    ("an iproute2 without -j: the text form", "8.8.8.8", ("old-iproute2.txt", 255), ("via-gateway.txt", 0),
     {"address": "8.8.8.8", "interface": "eth0", "source": "192.0.2.2", "gateway": "192.0.2.1", "local": False,
      "error": None}),
    ("no route", "10.20.0.11", ("unreachable.txt", 2), ("unreachable.txt", 2),
     {"address": "10.20.0.11", "interface": None, "source": None, "gateway": None, "local": False,
      "error": "ip route get 10.20.0.11 exited 2: RTNETLINK answers: Network is unreachable"}),
    ("a host name the node resolves", "gpu-head-01", ("via-gateway.json", 0), ("via-gateway.txt", 0),
     {"address": "10.20.0.11", "interface": "eth0", "source": "192.0.2.2", "gateway": "192.0.2.1", "local": False,
      "error": None}),
    ("a host name the node does not resolve", "gpu-head-02", ("via-gateway.json", 0), ("via-gateway.txt", 0),
     {"address": None, "interface": None, "source": None, "gateway": None, "local": False,
      "error": "the node does not resolve gpu-head-02"}),
]


@pytest.mark.parametrize("case, asked, json_answer, text_answer, expected", CASES, ids=[case[0] for case in CASES])
def test_the_route_to_an_address(tmp_path, case, asked, json_answer, text_answer, expected):
    calls = ip_standin(tmp_path / "bin", json_answer[0], text_answer[0], json_answer[1], text_answer[1])
    getent_standin(tmp_path / "bin", {"gpu-head-01": "10.20.0.11"})
    raw, route = run_route_probe(tmp_path, asked)
    assert route == {"to": asked, **expected}, raw
    if expected["address"]:
        # The JSON form first; the text form only where -j gave no JSON list.
        asked_ip = calls.read_text().splitlines()
        assert asked_ip[0] == f"-j route get {expected['address']}"
        assert asked_ip[1:] == ([] if json_answer[0].endswith(".json") else [f"route get {expected['address']}"])


def test_nothing_asked_costs_nothing(tmp_path):
    """No PROBE_ROUTE_TO: no section written, no program started, the key null."""
    calls = ip_standin(tmp_path / "bin", "via-gateway.json", "via-gateway.txt")
    raw, route = run_route_probe(tmp_path, "")
    assert route is None and "@@ route" not in raw and not calls.exists()


def test_the_whole_probe_runs_it_when_asked(tmp_path):
    ip_standin(tmp_path / "bin", "via-gateway.json", "via-gateway.txt")
    raw, route = run_route_probe(tmp_path, "8.8.8.8", sections="")
    assert raw.count("@@ route rc=0 format=json\n") == 1 and route["interface"] == "eth0"


@pytest.mark.parametrize("value", ["$(reboot)", "-j", "10.0.0.1;id", "a b", "x`id`"])
def test_the_shell_refuses_what_the_control_side_would_never_send(tmp_path, value):
    """Defence in depth: an inherited PROBE_ROUTE_TO that is no address or name reaches no
    program (the control side's probe_address refuses it first)."""
    calls = ip_standin(tmp_path / "bin", "via-gateway.json", "via-gateway.txt")
    raw, route = run_route_probe(tmp_path, value)
    assert route["error"] == "the probe refused the address" and route["to"] == "refused", raw
    assert not calls.exists()


@pytest.mark.parametrize("value, expected", [
    ("10.20.0.11", "10.20.0.11"), ("2001:DB8::1", "2001:db8::1"), ("gpu-head-01", "gpu-head-01"),
    ("gpu-head-01.example.internal.", "gpu-head-01.example.internal."), ("h100", "h100"),
])
def test_probe_address_takes_addresses_and_host_names(value, expected):
    assert probe_address(value) == expected


@pytest.mark.parametrize("value", ["", "10.0.0.256", "-j", "a b", "$(id)", "head_0", "-head", "a..b", "x" * 64,
                                   "10.0.0.1:5000", "'quoted'",
                                   # ipaddress takes any zone after '%'; '$' matched before a final newline
                                   "fe80::1%eth0", "fe80::1%$(reboot)", "fd00::1%a b", "gpu-head-01\n", "10.0.0.1\n"])
def test_probe_address_refuses_anything_else_in_one_line(value):
    with pytest.raises(ValueError) as error:
        probe_address(value)
    assert str(error.value).startswith(repr(value)) and "\n" not in str(error.value)


def test_the_command_carries_the_input_quoted_and_pins_it_otherwise():
    """ProbeInputs checks it; the command pins it empty when not asked (an inherited value from the
    session never counts) and sets it, shell-quoted, when asked."""
    assert "PROBE_ROUTE_TO= " in probe_command(ProbeInputs.defaults())
    assert "PROBE_ROUTE_TO=gpu-head-01 " in probe_command(ProbeInputs(ProbeInputs.defaults().layout,
                                                                      route_to="gpu-head-01"))
    with pytest.raises(ValueError):
        ProbeInputs(ProbeInputs.defaults().layout, route_to="x;reboot")


# iproute2 6.1.0's answers on Debian 12 (a network namespace with 10.1.0.2/24 on a veth), unedited.
BROADCAST_JSON = ('[{"type":"broadcast","dst":"10.1.0.255","dev":"v0","prefsrc":"10.1.0.2","flags":[],"uid":0,'
                  '"cache":["local","brd"]}]')
MULTICAST_TEXT = "multicast 224.0.0.1 dev v0 src 10.1.0.2 rt_offload_failed uid 0 \n    cache <local,mc> "


@pytest.mark.parametrize("address, attr, lines, kind", [
    ("10.1.0.255", ("format", "json"), [BROADCAST_JSON], "broadcast"),
    ("224.0.0.1", ("format", "text"), MULTICAST_TEXT.splitlines(), "multicast"),
])
def test_a_broadcast_or_multicast_address_is_no_route_to_a_host(address, attr, lines, kind):
    """The kernel answers a network's broadcast address and a multicast group with rc 0 and an
    interface; they were taken as the route to the head (its interface for NCCL and Gloo)."""
    from facts.probe_framing import Section
    from facts.sections.route import route
    fact = route({"route-address": Section("route-address", 0, ("to", address), [address]),
                  "route": Section("route", 0, attr, lines)})
    assert fact["error"] == f"{address} is a {kind} address, not a host's" and fact["interface"] is None, fact
