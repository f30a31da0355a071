"""Render a host's facts and plan as the readable validation report (pure text).

    python -m bringup.report reports/HOST.json   # the report of a saved run, as -v prints it
    python -m bringup.plan FACTS --json > plan.json && python -m bringup.report plan.json

Each file is a host report validate.py or deploy.py saved (``{"host", "facts",
"settings", "plan"}``) or a plan document (``python -m bringup.plan --json``: the plan
alone, so the facts' lines are left out). Exit status (docs/exit-statuses.md): 0 when
every plan has no blocker, 1 when one has, 2 when a file cannot be read or is neither.
"""

import argparse
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

from bringup import redact, setting_checks
from bringup.findings import SEVERITIES

MARKS = {"blocker": "BLOCKER", "fix": "FIX", "warning": "WARN", "info": "INFO"}
# How well NVIDIA's repository directory is known (bringup.platforms.REPO_EVIDENCE).
EVIDENCE = {"nvidia": "listed by NVIDIA", "third-party": "used by third parties, not seen in NVIDIA's listings",
            "unverified": "unverified"}


class NotJSON(ValueError):
    """A file that cannot be read as JSON: its syntax, bytes that are no UTF-8, or
    nesting deeper than the parser goes (a RecursionError, no bug of the planner)."""


def read_json(path):
    """The JSON document in ``path``; NotJSON when it is none (OSError as open raises it).

    >>> import tempfile; from pathlib import Path
    >>> deep = Path(tempfile.mkdtemp()) / "deep.json"; _ = deep.write_text("[" * 100000)
    >>> try:
    ...     read_json(deep)
    ... except NotJSON as error:
    ...     str(error).endswith("is not JSON (nested too deeply)")
    True
    """
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise NotJSON(f"{path} is not JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise NotJSON(f"{path} is not JSON (not UTF-8: byte {error.start})") from None
    except RecursionError:
        raise NotJSON(f"{path} is not JSON (nested too deeply)") from None


def print_out(text):
    """Print ``text`` on stdout; a reader that went away (``| head``) ends the output, not
    the command: no BrokenPipeError traceback, the exit status still the answer's."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # What is left to print, and the interpreter's flush at exit, go nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _gpu_lines(facts):
    gpus = facts.get("gpus") or []
    if not gpus:
        error = (facts.get("nvidia_smi") or {}).get("error")
        return [f"  GPUs      : none{f' ({error})' if error else ''}"]
    counts = {}
    for gpu in gpus:
        key = (gpu["name"], gpu["compute_cap"])
        counts[key] = counts.get(key, 0) + 1
    return [f"  GPUs      : {count}x {name} (SM {cap})" for (name, cap), count in counts.items()]


def render(host, facts, node):
    """The report ``validate.py`` prints for one host (URL credentials redacted: the
    repository's URL is printed; env values reach it redacted through the findings).

    + host: the host's name
    + facts: the facts document, or None for a plan alone (the facts' lines left out)
    + node: the NodePlan
    """
    lines = [f"== {host}: {'READY TO DEPLOY' if node.ok else 'BLOCKED'}"]
    if facts is not None:
        lines += _fact_lines(facts, node)
    lines.append(f"  plan      : CUDA {node.toolkit.version} at {node.toolkit.home}, "
                 f"FLASHINFER_CUDA_ARCH_LIST=\"{node.arch_list}\"")
    if node.repo:
        known = EVIDENCE.get(node.repo.evidence, "unverified")
        lines.append(f"  repo      : {node.repo.url} ({node.repo.distro}/{node.repo.arch}: {known})")
    lines.append(f"  toolkit   : {node.toolkit.lock or 'not locked'}")
    venv = node.venv
    if venv and venv.managed:
        lines.append(f"  venv      : {venv.lock or 'no lock'} with {venv.python} "
                     f"(CPython {venv.python_version or '-'}), uv from {venv.uv_lock or '-'}")
    group = getattr(node, "group", None)
    if group:
        lines += _group_lines(group)
    ordered = sorted(node.findings, key=lambda finding: SEVERITIES.index(finding.severity))
    for finding in ordered:
        lines.append(f"  [{MARKS[finding.severity]:7}] {finding.code}: {finding.message}")
        lines.append(f"            fix: {finding.fix}")
    return redact.urls("\n".join(lines))


def _fact_lines(facts, node):
    """The report's lines of what the node has (GPUs, driver, toolkits, torch, service)."""
    driver = facts.get("driver")
    resolved = facts.get("resolution") or {}
    torch = facts.get("torch")
    toolkits = ", ".join(f"{tk['home']} ({tk.get('version') or 'broken nvcc'})"
                         for tk in facts.get("toolkits") or []) or "none"
    lines = _gpu_lines(facts)
    lines.append(f"  driver    : {driver['version']} (CUDA {driver.get('cuda_version')})" if driver else "  driver    : none")
    lines.append(f"  toolkits  : {toolkits}")
    lines.append(f"  resolves  : {resolved.get('cuda_home') or 'nothing'} "
                 f"(CUDA {resolved.get('version') or '-'}, via {resolved.get('via', 'none')})")
    lines.append(f"  torch     : {torch.get('version')} (CUDA {torch.get('cuda')})" if torch and 'version' in torch
                 else f"  torch     : planned {node.torch_cuda} build (no venv yet)")
    unit = facts.get("service_unit")
    if unit:
        state = f"{unit['active_state']} ({unit['sub_state']})"
        restarts = f", {unit['restarts']} automatic restart(s)" if unit.get("restarts") else ""
        lines.append(f"  service   : {unit['name']} {state}{restarts}")
    return lines


def _group_lines(group):
    """A serving group's member: its place and what the group adds to its unit and env file.

    >>> from bringup.plan.model import GroupPlan
    >>> for line in _group_lines(GroupPlan("llama", 1, ("gpu-a", "gpu-b"), "10.0.0.1:29500",
    ...                                    ("--nnodes", "2"), {"NCCL_SOCKET_IFNAME": "=ib0"})):
    ...     print(line)
      group     : llama, rank 1 of 2 (head gpu-a at 10.0.0.1:29500; members gpu-a, gpu-b)
      group unit: --nnodes 2; env NCCL_SOCKET_IFNAME==ib0
    """
    env = group.env if isinstance(group.env, dict) else vars(group.env)
    members = list(group.members)
    return [f"  group     : {group.name}, rank {group.rank} of {len(members)} (head {members[0]} at "
            f"{group.dist_init_addr}; members {', '.join(members)})",
            f"  group unit: {' '.join(group.args)}; env "
            + (" ".join(f"{key}={value}" for key, value in env.items()) or "none")]


def _namespace(value):
    """Plan data (NodePlan.as_dict()) as attributes, the way ``render`` reads a NodePlan."""
    if isinstance(value, dict):
        return SimpleNamespace(**{key: _namespace(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_namespace(item) for item in value]
    return value


def render_saved(document, name="node"):
    """The report of a saved reports/<host>.json, as validate.py printed it, or of a plan
    document (``python -m bringup.plan --json``), whose facts are not in it.

    >>> from bringup.layout import toolkit_home
    >>> plan = {"ok": False, "torch_cuda": "13.0", "toolkit": {"version": "13.0", "home": toolkit_home("13.0"),
    ...     "lock": ""}, "arch_list": "", "repo": {}, "venv": {},
    ...     "findings": [{"code": "NO_GPU", "severity": "blocker", "message": "m", "fix": "f"}]}
    >>> render_saved({"host": "n1", "facts": {"gpus": []}, "plan": plan}).splitlines()[:2]
    ['== n1: BLOCKED', '  GPUs      : none']
    >>> what_if = render_saved(plan, name="what-if").splitlines()
    >>> what_if[0], what_if[1].startswith("  plan      : CUDA 13.0 at " + toolkit_home("13.0"))
    ('== what-if: BLOCKED', True)
    """
    if "plan" in document and "facts" in document:
        host, facts, plan = document["host"], document["facts"], dict(document["plan"])
    elif "ok" in document and "findings" in document and "toolkit" in document:
        host, facts, plan = name, None, dict(document)
    else:
        raise ValueError("neither a host report (host, facts, plan) nor a plan document (ok, findings, toolkit)")
    node = _namespace({**plan, "repo": plan.get("repo") or None, "venv": plan.get("venv") or None})
    node.findings = [_namespace(finding) for finding in plan.get("findings") or []]
    return render(host, facts, node)


def main(argv=None):
    """``python -m bringup.report FILE...``: print each saved host report or plan document."""
    parser = argparse.ArgumentParser(prog="python -m bringup.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="reports/<host>.json, or a plan document (python -m bringup.plan --json)")
    args = parser.parse_args(argv)
    status = 0
    for path in args.files:
        try:
            document = read_json(path)
            if not isinstance(document, dict):
                raise TypeError(f"a JSON {type(document).__name__}, not an object")
            print_out(render_saved(document, name=Path(path).stem))
            status = max(status, 0 if document.get("plan", document).get("ok") else 1)
        except OSError as error:
            print(f"error: {path}: {error.strerror}", file=sys.stderr)
            status = 2
        except NotJSON as error:
            print(f"error: {error}", file=sys.stderr)
            status = 2
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            print(f"error: {path}: not a host report written by validate.py or deploy.py, nor a plan document of "
                  f"python -m bringup.plan --json ({setting_checks.cut(str(error))})", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    sys.exit(main())
