"""A serving group's members reduce together as SGLang's ranks will: every member at once, as
the service user with the service's environment, one rank each in the group's rank order,
meeting at the head's address: a Gloo all-reduce over TCP through the interface the plan chose
(GLOO_SOCKET_IFNAME), then an NCCL all-reduce across the members' first GPUs
(tests/node/group.py: the script and the verdicts).

Collected only for the members of a serving group (an inventory host whose ``service_group``
names one); every member must be in the run (``--node-limit`` may not leave one out). One run
answers every member's two checks. A node whose settings declare ``gpu_standin`` reports the
NCCL check as STAND-IN when CUDA does not start there; without the declaration that is a
failure, as for test_cuda.py.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest

from bringup.plan.model import SYSTEM_PYTHON
from tests.node.conftest import GROUP_RUNS, HOSTS, expected_of
from tests.node.expected import NodeNotReady
from tests.node.group import free_port_command, gloo_verdict, group_command, nccl_verdict, parse_group_output
from tests.node.remote import fail, run_in_service_env, stand_in

GLOO = "Gloo all-reduce across the serving group (torch.distributed over TCP, as the service user with the service env)"
NCCL = "NCCL all-reduce across the serving group's GPUs (torch.distributed, GPU 0 of each member)"


def _member_answer(node, expected, command):
    """One member's GROUP_SCRIPT answer, or ``{"run_error": why}``."""
    try:
        result = run_in_service_env(node, expected, command, as_service_user=True)
    except BaseException as error:  # a failed check's Failed, a lost connection: this member's answer
        return {"run_error": f"{type(error).__name__}: {str(error)[-300:]}"}
    answer = parse_group_output(result.stdout, result.rc)
    if "run_error" in answer and result.stderr.strip():
        # Its own error output only: the service env's values are never in it.
        answer["run_error"] += f": {result.stderr.strip()[-300:]}"
    return answer


def run_group(config, group):
    """Every member's answer (member -> answer, rank order): each member's script started at
    once, in a thread of its own, after the head named a free port."""
    def nobody_ran(why):
        return {name: {"run_error": why} for name in group.members}

    nodes = config.stash[HOSTS]
    missing = [name for name in group.members if name not in nodes]
    if missing:
        return nobody_ran(f"{', '.join(missing)} not in this run: the all-reduce needs every member (widen "
                          "--node-limit)")
    expected = {name: expected_of(config, name, nodes[name]) for name in group.members}
    unready = [f"{name}: {found}" for name, found in expected.items() if isinstance(found, NodeNotReady)]
    if unready:
        return nobody_ran("; ".join(unready))
    head = group.members[0]
    port = nodes[head].run(free_port_command(SYSTEM_PYTHON, group.dist_init_addr))
    if port.rc != 0 or not port.stdout.strip().isdigit():
        return nobody_ran(f"no free port on the head {head}: {(port.stderr or port.stdout).strip()[-300:]}")
    with ThreadPoolExecutor(max_workers=len(group.members)) as pool:
        futures = {name: pool.submit(_member_answer, nodes[name], expected[name],
                                     group_command(expected[name].venv_python, group.dist_init_addr,
                                                   int(port.stdout), rank, len(group.members)))
                   for rank, name in enumerate(group.members)}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def group_answers(host, expected, request):
    """The group's answers, one run per group whichever member's check comes first."""
    group = expected.plan.group
    if group is None:
        fail(expected, "serving group", "a member's plan", "the plan places this host in no group")
    runs = request.config.stash[GROUP_RUNS]
    if group.name not in runs:
        runs[group.name] = run_group(request.config, group)
    return runs[group.name]


def test_gloo_all_reduce_across_the_group(host, expected, group_answers, record_property):
    planned = expected.plan.group.env.get("GLOO_SOCKET_IFNAME")
    wrong, measured = gloo_verdict(expected.name, group_answers, planned)
    if wrong:
        fail(expected, GLOO, f"every member's sums right through {planned or 'the interface Gloo chose'}", wrong)
    record_property("measured", measured)


def test_nccl_all_reduce_across_the_group(host, expected, group_answers, record_property):
    wrong, measured = nccl_verdict(expected.name, group_answers, expected.plan.group.env)
    own = group_answers.get(expected.name) or {}
    # A stand-in only for CUDA that did not start here: any other failure is one.
    if wrong and expected.config.gpu_standin and "cuda_error" in (own.get("nccl") or {}):
        stand_in(record_property, expected, NCCL, wrong)
        return
    if wrong:
        fail(expected, NCCL, "every member's sums right", wrong)
    record_property("measured", measured)
