"""A serving group of two sandbox nodes through the real CLI (docs/fleets.md, "Serving groups"):
two light nodes, each in a network namespace of its own on the sandbox's bridge (198.18.0.x: a
member's route to the head names an interface, and a firewall rule closes a port of one node
only), 8 GPUs each, serving one model with ``--tp 16``.

The test double of SGLang (tests/fixtures/serving/fake_sglang.py) runs the unit's own arguments
(``--args-from-unit``: the drop-in replaces the program, not the plan's ``--nnodes``,
``--node-rank`` and ``--dist-init-addr``); its head listens at the dist-init address and answers
``/health`` only once every rank joined, a member serves its dummy health server once the head
let it go, and ``FAKE_SGLANG_NEVER_JOIN=1`` keeps a member loading forever.

The group's venv holds a real torch (TORCH_LOCK: torch 2.14.1 for CUDA 13.0): the node suite's
group check reduces across the members through it. Each node is found as a deploy that stopped
after building that venv (the ``venv-built`` state: the product's build-venv.sh run once per
machine into a layer both nodes share), so the deploy switches it in instead of building 7 GB
twice.

In order, on the same two nodes: what validate finds before anything changes (a closed
rendezvous port, a member on another lock, part of the group under ``--limit``); the group
deployed to serving as one (each member's arguments and NCCL/Gloo interface), the node suite's
Gloo all-reduce across both members as the service user, and a second deploy that changes
nothing; then a change with which a member never joins, rolled back on both members
(``service_rollback: on-failure``), each back on the release that served.
"""

import json

import pytest
import yaml

from tests.sandbox_fixtures import (
    FAKE_SGLANG_DROP_IN,
    FAKE_SGLANG_PATH,
    OPERATOR_LOCK,
    REPO_ROOT,
    changed_operations,
    close_port,
    hosts_path,
    node_suite,
    open_port,
    pyinfra_cli,
    registered_serving_nodes,
    report_path,
    run_ssh,
    summary_rows,
)

pytestmark = pytest.mark.sandbox

HEAD, MEMBER = "grp-a", "grp-b"  # sorted by name: the head is rank 0
ADDRESSES = {HEAD: "198.18.0.21", MEMBER: "198.18.0.22"}
PORT = 29500
# The venv-built state's lock (sandbox/field_states.py), for the nodes' CPython 3.11.
TORCH_LOCK = "sandbox/locks/handbuilt-venv-cp311-x86_64.txt"
DATA = ("deploy_steps=env,account,venv,service", "cuda_manage_alternative=false", "service_model=fake/model",
        "service_ready_timeout=25", "venv_installer=pip", "service_group=llama", "service_args=--tp 16")
# The drop-in runs the double with the unit's own arguments.
DROP_IN = (f"printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/python3 -I {FAKE_SGLANG_PATH} --args-from-unit "
           f"/etc/systemd/system/sglang.service\\nEnvironment=FAKE_SGLANG_READY_AFTER=2\\n' > {FAKE_SGLANG_DROP_IN}")
LIVE = ("readlink /opt/sglang/venv; sha256sum /etc/systemd/system/sglang.service /etc/sglang/sglang.env | "
        "cut -d' ' -f1; systemctl is-active sglang.service || true")


@pytest.fixture(scope="module")
def group(sandbox_node, tmp_path_factory):
    with registered_serving_nodes(sandbox_node, ADDRESSES, DROP_IN, network="bridge",
                                  states=("venv-built", "iproute2")) as (entries, _):
        second = tmp_path_factory.mktemp("locks") / "second-cp311-x86_64.txt"
        second.write_text("# the group's second venv\n" + (REPO_ROOT / OPERATOR_LOCK).read_text())
        yield dict(entries, second_lock=str(second))


def run(script, *data, options=(), json_output=False):
    """A pyinfra run over both members, with their summary rows by host."""
    result = pyinfra_cli("inventory/gpu.py", script, *options, data=(*DATA, *data), json_output=json_output,
                         timeout=600)
    result.rows = summary_rows()
    return result


def report(host):
    return json.loads(report_path(host).read_text())


def codes(host):
    return {finding["code"]: finding for finding in report(host)["plan"]["findings"]}


def live(entry):
    """(venv link target, unit sha256, env file sha256, systemd's state)."""
    return tuple(run_ssh(entry, LIVE).stdout.split())


def test_a_closed_rendezvous_port_is_found_before_anything_changes(group):
    close_port(group[HEAD], PORT)
    try:
        result = run("validate.py", f"venv_lock={TORCH_LOCK}")
    finally:
        open_port(group[HEAD], PORT)
    assert result.returncode == 1, result.output[-4000:]
    closed = codes(MEMBER)["GROUP_RENDEZVOUS_CLOSED"]
    assert closed["message"] == (f"{MEMBER} does not reach the head {HEAD} at {ADDRESSES[HEAD]}:{PORT} (SGLang's "
                                 "--dist-init-addr): timed out (dropped on the way: a firewall, or no host at that "
                                 "address)"), closed
    assert "GROUP_RENDEZVOUS_CLOSED" in codes(HEAD)
    # Open again, the same run finds the port reached and nothing else in the way.
    result = run("validate.py", f"venv_lock={TORCH_LOCK}")
    assert result.returncode == 0, result.output[-4000:]
    assert not [code for code in codes(MEMBER) if code.startswith("GROUP_")], codes(MEMBER)


def test_a_member_on_another_lock_or_left_out_is_refused_before_anything_changes(group):
    before = {name: run_ssh(group[name], "ls /opt/sglang 2>/dev/null; true").stdout for name in ADDRESSES}
    hosts_file = hosts_path()
    original = hosts_file.read_text()
    registered = yaml.safe_load(original)
    registered["hosts"][MEMBER]["venv_lock"] = group["second_lock"]
    hosts_file.write_text(yaml.safe_dump(registered))
    try:
        result = run("deploy.py")
    finally:
        hosts_file.write_text(original)
    assert result.returncode == 1, result.output[-4000:]
    differs = codes(HEAD)["GROUP_STACK_DIFFERS"]["message"]
    assert f"{MEMBER}: " in differs and group["second_lock"] in differs, differs
    assert {row["verdict"] for row in result.rows.values()} == {"blocked"}, result.rows

    part = run("deploy.py", f"venv_lock={TORCH_LOCK}", options=("--limit", MEMBER))
    assert part.returncode == 1 and list(part.rows) == [MEMBER], part.output[-4000:]
    assert f"left out {HEAD} (outside --limit/--exclude)" in codes(MEMBER)["GROUP_MEMBERS_MISSING"]["message"]
    assert before == {name: run_ssh(group[name], "ls /opt/sglang 2>/dev/null; true").stdout for name in ADDRESSES}


def test_the_group_deploys_to_serving_as_one_and_a_second_deploy_changes_nothing(group, tmp_path):
    result = run("deploy.py", f"venv_lock={TORCH_LOCK}")
    assert result.returncode == 0, result.output[-6000:]
    assert {name: row["verdict"] for name, row in result.rows.items()} == {HEAD: "serving", MEMBER: "serving"}
    for rank, name in enumerate((HEAD, MEMBER)):
        unit = run_ssh(group[name], "grep '^ExecStart=' /etc/systemd/system/sglang.service").stdout
        assert unit.rstrip().endswith(f"--tp 16 --nnodes 2 --node-rank {rank} --dist-init-addr "
                                      f"{ADDRESSES[HEAD]}:{PORT}"), unit
        env = run_ssh(group[name], "cat /etc/sglang/sglang.env").stdout.splitlines()
        assert {"NCCL_SOCKET_IFNAME==eth0", "GLOO_SOCKET_IFNAME=eth0"} <= set(env), env
    joined = run_ssh(group[HEAD], "journalctl -u sglang.service --no-pager -o cat").stdout
    assert f"rank 1 of 2 joined from {ADDRESSES[MEMBER]}" in joined, joined[-3000:]
    member_log = run_ssh(group[MEMBER], "journalctl -u sglang.service --no-pager -o cat").stdout
    assert "Starting dummy health check server at" in member_log, member_log[-3000:]

    # The node suite's group check: both members reduce together, as the service user with the
    # service's environment, through the interface the plan chose; NCCL is a stand-in here.
    suite = node_suite(tmp_path, "--node-limit", f"{HEAD},{MEMBER}", data=(*DATA, f"venv_lock={TORCH_LOCK}"),
                       checks="tests/node/test_group.py")
    assert suite.rc == 0, suite
    gloo, nccl = "gloo_all_reduce_across_the_group", "nccl_all_reduce_across_the_group"
    assert suite.results == {(name, check): status for name in ADDRESSES
                             for check, status in ((gloo, "PASS"), (nccl, "STAND-IN"))}, suite
    for name in ADDRESSES:
        assert suite.measured[(name, gloo)].startswith("2 members, 16777216 bytes: 5 all-reduces in "), suite.measured
        assert suite.measured[(name, gloo)].endswith(" over eth0"), suite.measured

    again = run("deploy.py", f"venv_lock={TORCH_LOCK}", json_output=True)
    assert again.returncode == 0, again.output[-4000:]
    assert changed_operations(again) == [], changed_operations(again)


def test_a_member_that_never_joins_fails_the_group_and_on_failure_rolls_both_back(group):
    serving = {name: live(group[name]) for name in ADDRESSES}
    assert {state[-1] for state in serving.values()} == {"active"}, serving
    # The change: another venv, and an environment with which the member never joins the head
    # (the head has no use for the knob). Both members change, both restart, neither serves.
    failed = run("deploy.py", f"venv_lock={group['second_lock']}", "service_env=FAKE_SGLANG_NEVER_JOIN=1",
                 "service_rollback=on-failure")
    assert failed.returncode == 1, failed.output[-6000:]
    for name in ADDRESSES:
        row = failed.rows[name]
        assert row["verdict"] == "rolled back", row
        assert f"{MEMBER}: timed out" in row["reason"] and f"{HEAD} (the head): timed out" in row["reason"], row
    assert "serving group 'llama' is not serving as one" in failed.output, failed.output[-6000:]
    # Both back on the release that served, serving.
    assert {name: live(group[name]) for name in ADDRESSES} == serving


def test_rollback_py_takes_the_group_back_whole_or_not_at_all(group):
    before = {name: live(group[name]) for name in ADDRESSES}
    changed = run("deploy.py", f"venv_lock={group['second_lock']}", "service_env=FAKE_SGLANG_READY_AFTER=3")
    assert changed.returncode == 0, changed.output[-6000:]
    assert {row["verdict"] for row in changed.rows.values()} == {"serving"}, changed.rows
    after = {name: live(group[name]) for name in ADDRESSES}
    assert all(after[name] != before[name] for name in ADDRESSES), (before, after)

    # The member's previous venv lost its mark of a complete build (files/release.sh: it is
    # incomplete): it cannot go back, so neither goes back. The previous release's record names
    # its venv (files/release.sh: releases/previous/venv).
    previous = "/opt/sglang/" + run_ssh(group[MEMBER], "cat /opt/sglang/releases/previous/venv").stdout.strip()
    assert previous.startswith("/opt/sglang/venvs/"), previous
    run_ssh(group[MEMBER], f"mv {previous}/.complete {previous}/.complete.away")
    try:
        refused = run("rollback.py", f"venv_lock={group['second_lock']}", "service_env=FAKE_SGLANG_READY_AFTER=3")
    finally:
        run_ssh(group[MEMBER], f"mv {previous}/.complete.away {previous}/.complete")
    assert refused.returncode == 1, refused.output[-6000:]
    assert {name: row["verdict"] for name, row in refused.rows.items()} == {HEAD: "failed", MEMBER: "failed"}
    assert f"serving group 'llama' is not rolled back, nothing changed here: a group goes back whole or not at " \
           f"all, and {MEMBER}: its venv {previous}" in refused.rows[HEAD]["reason"], refused.rows[HEAD]
    assert {name: live(group[name]) for name in ADDRESSES} == after

    # With it back, both go back together and serve.
    back = run("rollback.py", f"venv_lock={group['second_lock']}", "service_env=FAKE_SGLANG_READY_AFTER=3")
    assert back.returncode == 0, back.output[-6000:]
    assert {row["verdict"] for row in back.rows.values()} == {"rolled back"}, back.rows
    assert {name: live(group[name]) for name in ADDRESSES} == before


def test_members_that_leave_the_group_serve_alone_and_lose_the_groups_keys(group):
    """service_group emptied: each host is deployed alone (its unit without the multi-node
    arguments) and the NCCL/Gloo keys deploy wrote for the group are taken out of its env file
    and of deploy's record (they would pin a lone server's NCCL to the group's interface)."""
    record = "/etc/sglang/sglang.env.deploy-owned"
    assert "GLOO_SOCKET_IFNAME=eth0" in run_ssh(group[MEMBER], f"cat {record}").stdout
    alone = run("deploy.py", f"venv_lock={TORCH_LOCK}", "service_group=", "service_args=--tp 8")
    assert alone.returncode == 0, alone.output[-6000:]
    assert {row["verdict"] for row in alone.rows.values()} == {"serving"}, alone.rows
    for name in ADDRESSES:
        unit = run_ssh(group[name], "grep '^ExecStart=' /etc/systemd/system/sglang.service").stdout
        assert unit.rstrip().endswith("--tp 8"), unit
        env = run_ssh(group[name], "cat /etc/sglang/sglang.env").stdout
        assert "SOCKET_IFNAME" not in env and "NCCL_IB_HCA" not in env, env
        assert "SOCKET_IFNAME" not in run_ssh(group[name], f"cat {record}").stdout
