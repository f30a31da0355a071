"""Whether the node's apt lists serve what the locks pin: asked by validate (and deploy's
plan) where the node already holds a source of the CUDA repository, one apt-cache round
trip after the probe. Deploy asks again after refreshing the lists, before it installs
anything (tasks/locks_served.py)."""

from pyinfra import host

from bringup.findings import WARNING, Finding
from facts.dpkg import AptUnserved


def lock_served_findings(node, unserved):
    """``LOCK_NOT_SERVED`` for the locked pins the lists do not serve (``unserved``;
    None or empty: nothing to say).

    >>> from bringup.plan.model import NodePlan, RepoPlan, ToolkitPlan
    >>> repo = RepoPlan("http://m/cuda/debian12/x86_64/", "", "", "debian12", "x86_64", "", "", "", "",
    ...                 lock_command="make lock-cuda lock-driver CUDA_REPO_URL=http://m/cuda")
    >>> node = NodePlan(steps=("toolkit",), repo=repo, toolkit=ToolkitPlan("13.0", "/opt/toolkit", (),
    ...                 lock="files/locks/t.txt", pins=("cuda-nvcc-13-0=13.0.88-1", "cuda-cccl-13-0=13.0.85-1")))
    >>> [finding] = lock_served_findings(node, ["cuda-nvcc-13-0=13.0.88-1"])
    >>> finding.code, finding.severity, finding.message.split(" (")[2].split(")")[0]
    ('LOCK_NOT_SERVED', 'warning', 'files/locks/t.txt: cuda-nvcc-13-0=13.0.88-1')
    >>> lock_served_findings(node, [])
    []
    """
    if not unserved:
        return []
    named = "; ".join(f"{lock}: {' '.join(pin for pin in pins if pin in unserved)}"
                      for lock, pins in node.locked_pins().items() if set(pins) & set(unserved))
    return [Finding("LOCK_NOT_SERVED", WARNING,
                    f"the node's apt lists of {node.repo.url} (as last fetched) do not serve what the locks pin "
                    f"({named}): deploy refreshes them and stops before installing anything if they still do not",
                    f"resolve the locks against that repository: {node.repo.lock_command} (docs/locks.md)")]


def _holds_source(facts, url):
    sources = (facts.get("apt") or {}).get("sources") or []
    return any(uri.rstrip("/") == url.rstrip("/") for entry in sources for uri in entry.get("uris") or [])


def served_findings(facts, node):
    """Ask the node's apt about the locked pins deploy would install (those the probe
    saw missing, where it could tell), when its sources already name the repository."""
    if node.repo is None or not _holds_source(facts, node.repo.url):
        return []
    missing = node.toolkit.missing if node.toolkit is not None else None
    pins = [pin for lock_pins in node.locked_pins().values() for pin in lock_pins
            if missing is None or pin in missing or pin not in (node.toolkit.pins or ())]
    if not pins:
        return []
    return lock_served_findings(node, host.get_fact(AptUnserved, pins=pins, repo_url=node.repo.url))
