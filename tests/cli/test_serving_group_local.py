"""Serving groups through the real pyinfra CLI (issue 38): a group of two hosts without SSH,
@local and @chroot// (pyinfra's chroot connector on "/", the same machine, as
tests/cli/test_bad_input.py runs two hosts), GPU-less builders (target_sms). validate plans each
member (its unit's multi-node arguments, its route to the head asked of its own probe), runs the
group's preflight once both are planned, and refuses both (GPU-less builders: the GPUs do not
match --tp); --limit on one member names the other as left out, and deploy and rollback.py refuse
it, nothing run; --serial and --no-wait refuse every member before its probe; a member whose
group cannot be made is refused in one line before its probe."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
GROUP = {"target_sms": "12.0", "service_group": "llama", "service_model": "/models/none", "service_args": "--tp 2"}
# "@chroot//" sorts before "@local": it is the head (rank 0). 192.0.2.7 (TEST-NET-1) stands for the
# head's serving address: the member's probe asks the kernel for its route (ip route get sends
# nothing); the head's own probe asks for rank 1's, @local's 127.0.0.1: its own address here.
HOSTS = [("@local", {**GROUP, "service_group_address": "127.0.0.1"}),
         ("@chroot//", {**GROUP, "service_group_address": "192.0.2.7"})]


def run(tmp_path, *args, hosts=HOSTS, deploy_file="validate.py"):
    inventory = tmp_path / "group.py"
    inventory.write_text(f"hosts = {hosts!r}\n")
    reports = tmp_path / "reports"
    result = subprocess.run([PYINFRA, "-y", *args, str(inventory), deploy_file], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, stdin=subprocess.DEVNULL,
                            env={**os.environ, "GPU_BRINGUP_REPORTS": str(reports)})
    result.output = result.stdout + result.stderr
    assert "Traceback" not in result.output, result.output[-3000:]
    summary = json.loads((reports / "summary.json").read_text())
    return result, {row["host"]: row for row in summary["hosts"]}, reports


def codes(report):
    return {finding["code"] for finding in report["plan"]["findings"]}


def test_validate_plans_the_group_and_runs_its_preflight(tmp_path):
    result, rows, reports = run(tmp_path)
    assert result.returncode == 1, result.output[-3000:]
    member = json.loads((reports / "@local.json").read_text())
    head = json.loads((reports / "@chroot//.json").read_text())  # reports/<host>.json of the name "@chroot//"
    group = member["plan"]["group"]
    assert (group["rank"], group["members"], group["dist_init_addr"]) == (1, ["@chroot//", "@local"], "192.0.2.7:29500")
    assert member["plan"]["service"]["exec_line"].endswith(
        "--tp 2 --nnodes 2 --node-rank 1 --dist-init-addr 192.0.2.7:29500")
    assert member["facts"]["route"]["to"] == "192.0.2.7" and head["facts"]["route"]["to"] == "127.0.0.1"
    assert head["plan"]["group"]["rank"] == 0
    # Each member's own findings, and the preflight's in both reports (GPU-less builders: 0 GPUs
    # where --tp 2 over 2 members asks for 1 on each).
    assert "GROUP_GPUS_MISMATCH" in codes(member) & codes(head)
    # The head listened on its rendezvous port while the member tried the head's address there:
    # 192.0.2.7 is no address of this machine's, so nothing answers.
    [closed] = [f for f in member["plan"]["findings"] if f["code"] == "GROUP_RENDEZVOUS_CLOSED"]
    assert closed["message"].startswith("@local does not reach the head @chroot// at 192.0.2.7:29500"), closed
    assert "GROUP_NO_ROUTE" in codes(head)  # rank 1's address is its own here
    assert "== serving group 'llama': preflight of 2 members" in result.stderr
    assert rows["@local"]["verdict"] == rows["@chroot//"]["verdict"] == "blocked", rows
    assert "GROUP_GPUS_MISMATCH" in result.stderr.split("== fleet summary")[1]


def test_a_limit_that_takes_part_of_the_group_names_the_members_left_out(tmp_path):
    result, rows, reports = run(tmp_path, "--limit", "@local")
    assert list(rows) == ["@local"] and rows["@local"]["verdict"] == "blocked", rows
    [finding] = [f for f in json.loads((reports / "@local.json").read_text())["plan"]["findings"]
                 if f["code"] == "GROUP_MEMBERS_MISSING"]
    assert "left out @chroot// (outside --limit/--exclude)" in finding["message"], finding


@pytest.mark.parametrize("deploy_file", ["deploy.py", "rollback.py"])
def test_deploy_and_rollback_refuse_part_of_a_group_and_run_nothing(tmp_path, deploy_file):
    result, rows, _ = run(tmp_path, "--limit", "@local", deploy_file=deploy_file)
    assert result.returncode == 1
    purpose = deploy_file.removesuffix(".py")
    assert f"{purpose} refused, nothing changed" in result.output and "GROUP_MEMBERS_MISSING" in result.output
    assert rows["@local"]["verdict"] == "blocked", rows
    assert all(op["name"].startswith("Refuse ") or op["status"] != "changed"
               for op in rows["@local"].get("operations") or []), rows


@pytest.mark.parametrize("flags, said", [(("--serial",), "deploy runs each host on its own (--serial)"),
                                         (("--serial", "--parallel", "1"), "deploy runs each host on its own"),
                                         (("--no-wait",), "deploy runs each host on its own (--no-wait)")])
def test_a_run_that_cannot_restart_the_group_together_refuses_every_member(tmp_path, flags, said):
    result, rows, reports = run(tmp_path, *flags, deploy_file="deploy.py")
    assert result.returncode == 1
    assert f"@local: serving group 'llama': {said}" in result.output, result.output[-3000:]
    assert not (reports / "@local.json").exists() and not (reports / "@chroot//.json").exists()
    assert {row["verdict"] for row in rows.values()} == {"failed"}, rows


def test_a_group_that_cannot_be_made_is_one_line_before_any_probe(tmp_path):
    hosts = [(name, {**data, "service_args": "--tp 3"}) for name, data in HOSTS]
    result, rows, reports = run(tmp_path, hosts=hosts)
    assert result.returncode == 1
    assert ("@chroot//: service_args '--tp 3' gives a tensor-parallel size 3 that 2 nodes cannot share"
            in result.output), result.output[-3000:]
    assert rows["@local"]["verdict"] == "failed" and not (reports / "@local.json").exists(), rows


def test_a_member_that_reaches_the_heads_rendezvous_port_passes(tmp_path):
    hosts = [(name, {**data, "service_group_address": "127.0.0.1", "service_group_port": 29517})
             for name, data in HOSTS]
    result, _, reports = run(tmp_path, hosts=hosts)
    member = json.loads((reports / "@local.json").read_text())
    assert "GROUP_GPUS_MISMATCH" in codes(member), result.output[-3000:]  # the preflight ran
    assert not codes(member) & {"GROUP_RENDEZVOUS_CLOSED", "GROUP_RENDEZVOUS_UNCHECKED"}, member["plan"]["findings"]


def test_a_rendezvous_port_another_process_holds_is_named(tmp_path):
    """No SGLang runs on the head, and the port is held: its service could not listen there."""
    import socket

    hosts = [(name, {**data, "service_group_address": "127.0.0.1", "service_group_port": 29518})
             for name, data in HOSTS]
    with socket.create_server(("127.0.0.1", 29518)):
        result, _, reports = run(tmp_path, hosts=hosts)
    member = json.loads((reports / "@local.json").read_text())
    [closed] = [f for f in member["plan"]["findings"] if f["code"] == "GROUP_RENDEZVOUS_CLOSED"]
    assert closed["message"] == ("port 29518 on @chroot// is held by another process while its SGLang service is "
                                 "not running: the head's rendezvous could not listen there"), closed


@pytest.fixture
def env_file():
    """A service env file and deploy's record beside it, root's, outside /tmp (a setting's check)."""
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="cli-group-env-", dir="/var/lib"))
    etc = scratch / "sglang"
    etc.mkdir()
    yield etc / "sglang.env"
    shutil.rmtree(scratch)


def test_a_host_that_left_its_group_has_deploys_group_keys_taken_back(tmp_path, env_file):
    """The env file still holds the NCCL/Gloo keys deploy wrote while the host was a member (its
    record says so); serving alone now, the plan takes them back, and keeps the operator's own
    (NCCL_DEBUG) and a group key the operator changed since (no longer deploy's value)."""
    env_file.write_text("NCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME==eth0\nGLOO_SOCKET_IFNAME=eth7\n")
    env_file.chmod(0o640)
    record = env_file.with_name("sglang.env.deploy-owned")
    record.write_text("# gpu-bringup\nNCCL_SOCKET_IFNAME==eth0\nGLOO_SOCKET_IFNAME=eth0\n")
    record.chmod(0o600)
    hosts = [("@local", {"target_sms": "12.0", "service_env_file": str(env_file)})]
    _, _, reports = run(tmp_path, hosts=hosts)
    report = json.loads((reports / "@local.json").read_text())
    assert report["facts"]["service_env_owned"] == {"NCCL_SOCKET_IFNAME": "=eth0"}
    assert report["plan"]["env_drop"] == {"NCCL_SOCKET_IFNAME": "=eth0"}, report["plan"]


def test_a_group_key_set_by_hand_that_the_group_leaves_unset_is_taken_out(tmp_path, env_file):
    """No RDMA port is active here: the group sets no NCCL_IB_HCA, and a hand-set one (a port
    long gone) would send NCCL there: each member says it will go, and plans it taken out."""
    env_file.write_text("NCCL_DEBUG=INFO\nNCCL_IB_HCA==mlx5_9:1\n")
    env_file.chmod(0o640)
    hosts = [(name, {**data, "service_env_file": str(env_file)}) for name, data in HOSTS]
    _, _, reports = run(tmp_path, hosts=hosts)
    for name in ("@local", "@chroot//"):
        report = json.loads((reports / f"{name}.json").read_text())
        assert report["plan"]["env_drop"] == {"NCCL_IB_HCA": "=mlx5_9:1"}, report["plan"]
        assert "NCCL_IB_HCA" not in report["plan"]["service"]["env"]
        found = [f for f in report["plan"]["findings"]
                 if f["code"] == "SERVICE_ENV_OVERRIDDEN" and "NCCL_IB_HCA" in f["message"]]
        assert len(found) == 1, found
        finding = found[0]
        assert finding["message"] == (f"{env_file} sets NCCL_IB_HCA==mlx5_9:1, which the serving group leaves "
                                      "unset: no RDMA port is active (deploy removes it)"), finding
