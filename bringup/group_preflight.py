"""A serving group's preflight (issue 38): its members' plans compared, once every member of the
run is planned, before anything changes. Pure: each member is summarised from its own facts and
plan (``member_summary``), and ``preflight`` compares the summaries; the control side
(control/groups.py) gathers them and says which members the run left out.

What must hold for the group to come up as one: every member on the same stack (the same locks,
by their digest; the same driver branch; the same CUDA), the same model from the same source
(the same snapshot of a hub model), GPUs per member times members matching the parallelism asked
(``--tp`` times ``--pp-size``: SGLang starts that many ranks, the same number on every node),
InfiniBand/RoCE on every member or on none (NCCL's transport is chosen per pair of ranks: a
member without RDMA makes its peers fall back or fail), and every member in the run.
And that each member reaches the head's rendezvous port: the head listens on it while the others
connect (``rendezvous_findings``, over what control/rendezvous.py found); the probe's route to the
head is each member's own finding (serving_group.py).

Every finding is the group's: the same blockers go on every member, naming the members and
their values.

    >>> from bringup.group import Member
    >>> members = tuple(Member(h, "llama", r, ("gpu-a", "gpu-b"), "10.0.0.1", 29500) for r, h in enumerate(("gpu-a", "gpu-b")))
    >>> same = {"stack": "s", "driver": "580", "model": "m", "gpus": 8, "rdma": ["mlx5_0:1"]}
    >>> preflight(members, "--tp 16", {"gpu-a": same, "gpu-b": same}, {})
    []
    >>> [f.code for f in preflight(members, "--tp 16", {"gpu-a": same, "gpu-b": {**same, "gpus": 4}}, {})]
    ['GROUP_GPUS_MISMATCH']
"""

from bringup.findings import BLOCKER, WARNING, Finding
from bringup.group import PP_OPTIONS, active_hcas, tp_size


def _short(digest):
    return digest[:12] if digest else "missing"


def member_summary(facts, config, node, digests):
    """What the preflight compares of one planned member: its stack (locks by digest, driver
    branch, CUDA), its model's source, its GPUs and its active RDMA ports. ``digests``: lock
    path -> sha256 of its content (the control side reads the files).

    >>> from bringup.config import Config
    >>> from bringup.plan.model import NodePlan, ToolkitPlan
    >>> node = NodePlan(torch_cuda="13.0", toolkit=ToolkitPlan("13.0", "/opt/toolkit", (), lock="t.txt"))
    >>> summary = member_summary({"gpus": [{}] * 8, "driver": {"version": "580.95.05"}}, Config(service_model="m"),
    ...                          node, {"t.txt": "ab" * 32})
    >>> summary["stack"], summary["driver"], summary["gpus"]
    ('sglang 0.5.23, CUDA 13.0, venv lock none, toolkit lock t.txt@abababababab', '580', 8)
    """
    venv_lock = node.venv.lock if node.venv is not None else ""
    toolkit_lock = node.toolkit.lock if node.toolkit is not None else ""
    locks = ", ".join(f"{role} lock {path + '@' + _short(digests.get(path)) if path else 'none'}"
                      for role, path in (("venv", venv_lock), ("toolkit", toolkit_lock)))
    if config.driver_manage:
        driver = f"{config.driver_branch} (driver_manage)"
    else:
        driver = ((facts.get("driver") or {}).get("version") or "none").split(".")[0]
    return {"stack": f"sglang {config.stack_sglang}, CUDA {node.torch_cuda}, {locks}", "driver": driver,
            "model": model_source(facts, config, node), "gpus": len(facts.get("gpus") or []),
            "rdma": active_hcas(facts.get("infiniband"))}


def model_source(facts, config, node):
    """Where the member's service takes ``service_model`` from: a directory, the snapshot its hub
    cache holds, deploy's fetch, or SGLang's own download at its start (whatever the hub serves
    then: members started apart may load different revisions).

    >>> from bringup.config import Config
    >>> from bringup.plan.model import NodePlan
    >>> model_source({"model": {"model": "org/m", "revision": "0123456789abcdef"}}, Config(service_model="org/m"), NodePlan())
    'org/m: the hub cache holds snapshot 0123456789ab'
    >>> model_source({}, Config(service_model="/models/m"), NodePlan())
    '/models/m: a directory on the node'
    """
    model = config.service_model
    if model.startswith("/"):
        return f"{model}: a directory on the node"
    revision = (facts.get("model") or {}).get("revision") or ""
    if revision:
        return f"{model}: the hub cache holds snapshot {revision[:12]}"
    if node.model_fetch is not None:
        return f"{model}: deploy fetches it from the hub"
    return f"{model}: SGLang downloads it from the hub at its start"


def _values(summaries, key):
    """``value: host, host`` for each distinct value, in the members' order."""
    by_value = {}
    for host, summary in summaries.items():
        by_value.setdefault(str(summary[key]), []).append(host)
    return "; ".join(f"{', '.join(hosts)}: {value}" for value, hosts in by_value.items())


def preflight(members, service_args, summaries, missing):
    """The group's findings. ``members``: its Members in rank order; ``service_args``: the group's;
    ``summaries``: host -> ``member_summary`` of each member planned; ``missing``: host -> why a
    member is not planned in this run (outside --limit/--exclude, unreachable, refused before its plan)."""
    group = members[0].group
    found = []
    if missing:
        left = "; ".join(f"{host} ({why})" for host, why in missing.items())
        found.append(Finding("GROUP_MEMBERS_MISSING", BLOCKER,
                             f"serving group {group!r} is {len(members)} members and this run plans "
                             f"{len(members) - len(missing)}: left out {left}; a group is changed and restarted as "
                             "one (part of it restarted breaks it)",
                             "run with every member (a --limit that takes the whole group, e.g. all its names), "
                             "after fixing what kept a member out; or take the host out of service_group"))
    planned = {member.host: summaries[member.host] for member in members if member.host in summaries}
    for key, code, what, fix in (
            ("stack", "GROUP_STACK_DIFFERS", "the members plan different stacks",
             "give every member the same platform (distribution, CPU, CPython) and settings, so that they plan "
             "the same locks"),
            ("driver", "GROUP_STACK_DIFFERS", "the members run different driver branches",
             "put every member on one driver branch (driver_manage with one driver_branch)"),
            ("model", "GROUP_MODEL_SOURCE_DIFFERS", "the members take the model from different sources",
             "give every member the same source: the same directory, or the same snapshot in each hub cache "
             "(service_model_fetch: true fetches it on each)")):
        if len({str(summary[key]) for summary in planned.values()}) > 1:
            found.append(Finding(code, BLOCKER, f"{what}: {_values(planned, key)}", fix))
    tp, pp = tp_size(service_args), tp_size(service_args, PP_OPTIONS) or 1
    if tp and planned:
        per = tp * pp // len(members)
        wrong = {host: summary for host, summary in planned.items() if summary["gpus"] != per}
        if wrong or tp * pp % len(members):
            found.append(Finding("GROUP_GPUS_MISMATCH", BLOCKER,
                                 f"service_args {service_args!r} asks for {tp * pp} GPUs (tp {tp} x pp {pp}) over "
                                 f"{len(members)} members, {per} on each; {_values(wrong or planned, 'gpus')} GPU(s)",
                                 f"set --tp (times --pp-size) to the GPUs of all members ({len(members)} x the "
                                 "GPUs of one), on members with the same number of GPUs"))
    with_rdma = [host for host, summary in planned.items() if summary["rdma"]]
    if with_rdma and len(with_rdma) < len(planned):
        without = [host for host in planned if host not in with_rdma]
        found.append(Finding("GROUP_RDMA_MIXED", BLOCKER,
                             f"active InfiniBand/RoCE ports on {', '.join(with_rdma)} and none on "
                             f"{', '.join(without)}: NCCL would take RDMA between some members and fail or fall "
                             "back to sockets between others",
                             "bring the RDMA ports up on every member (ibstat, the subnet manager), or serve the "
                             "group over Ethernet on all of them (NCCL_IB_DISABLE=1 in each member's service_env)"))
    return found


def rendezvous_findings(members, listen, reach):
    """What the try of the rendezvous port found (control/rendezvous.py): ``listen``, the head's
    listener (None: it could not run; ``in_use``: the port was held, ``service`` when by the head's
    own service); ``reach``, host -> ``{"reached", "why"}`` of every other member (None: its try
    could not run; ``reached`` None: given up, ``why`` says so). A refusal while nothing of the
    check listened says nothing of a firewall: unchecked, not closed. A member that connected while the head's listener saw fewer connections than
    members connected reached something else at that address (a NAT, another host).

    >>> from bringup.group import Member
    >>> members = tuple(Member(h, "llama", r, ("gpu-a", "gpu-b"), "10.0.0.1", 29500) for r, h in enumerate(("gpu-a", "gpu-b")))
    >>> listening = {"listening": True, "in_use": False, "accepted": 1, "error": ""}
    >>> rendezvous_findings(members, listening, {"gpu-b": {"reached": True, "why": ""}})
    []
    >>> [f.message for f in rendezvous_findings(members, listening, {"gpu-b": {"reached": False, "why": "timed out"}})]
    ["gpu-b does not reach the head gpu-a at 10.0.0.1:29500 (SGLang's --dist-init-addr): timed out"]
    >>> [f.code for f in rendezvous_findings(members, None, {"gpu-b": None})]
    ['GROUP_RENDEZVOUS_UNCHECKED']
    >>> [f.code for f in rendezvous_findings(members, {**listening, "accepted": 0}, {"gpu-b": {"reached": True}})]
    ['GROUP_RENDEZVOUS_CLOSED']
    >>> refused = {"gpu-b": {"reached": False, "why": "connection refused"}}
    >>> [(f.code, f.message.endswith("refused (nothing listened on the head)"))
    ...  for f in rendezvous_findings(members, None, refused)]
    [('GROUP_RENDEZVOUS_UNCHECKED', True)]
    """
    head, found = members[0], []
    where = f"the head {head.host} at {head.dist_init_addr} (SGLang's --dist-init-addr)"
    unchecked = [f"{host}: its try could not run" if outcome is None else f"{host}: {outcome['why']}"
                 for host, outcome in reach.items() if outcome is None or outcome.get("reached") is None]
    if listen is None:
        unchecked.insert(0, f"the head {head.host}: its listener could not run")
    elif not (listen.get("listening") or listen.get("in_use")):
        unchecked.insert(0, f"the head {head.host} could not listen on port {head.port}: "
                            f"{listen.get('error') or 'no answer'}")
    tried = {host: outcome for host, outcome in reach.items()
             if outcome is not None and outcome.get("reached") is not None}
    closed = [f"{host} does not reach {where}: {outcome['why']}" for host, outcome in tried.items()
              if not outcome.get("reached")]
    if not (listen and listen.get("listening")):
        # Nothing of the check's listened on the head: a refusal says nothing of a firewall (no
        # one listens there), a drop or no route still does.
        refused = [line for line in closed if line.endswith("connection refused")]
        closed = [line for line in closed if line not in refused]
        why = (f"the head's service is {listen['service']} (it holds the port once the group is up; serving alone, "
               "it does not)" if listen and listen.get("service") else "nothing listened on the head")
        unchecked += [f"{line} ({why})" for line in refused]
    if listen and listen.get("in_use") and not listen.get("service"):
        closed.append(f"port {head.port} on {head.host} is held by another process while its SGLang service is not "
                      "running: the head's rendezvous could not listen there")
    reached = [host for host, outcome in tried.items() if outcome.get("reached")]
    if listen and listen.get("listening") and len(reached) > (listen.get("accepted") or 0):
        closed.append(f"{len(reached)} member(s) ({', '.join(reached)}) connected to {head.dist_init_addr} and the "
                      f"head's listener saw {listen.get('accepted') or 0}: something else answers at that address "
                      "(a NAT, another host)")
    if closed:
        found.append(Finding("GROUP_RENDEZVOUS_CLOSED", BLOCKER, "; ".join(closed),
                             f"open TCP port {head.port} on {head.host} to the members (its firewall, a security "
                             "group), or set service_group_port to a port that is open, or the head's "
                             "service_group_address to its address on the serving network"))
    if unchecked:
        found.append(Finding("GROUP_RENDEZVOUS_UNCHECKED", WARNING, "; ".join(unchecked),
                             "see what each names (validate -v, pyinfra --debug for a command that failed), then "
                             "validate again"))
    return found
