"""Where the sandbox keeps its state, and the state files more than one part of it
reads: the node registry (``sandbox.node`` writes it) and the two servers' state files
(``sandbox.aptrepo`` and ``sandbox.pypimirror`` write them). ``sandbox.registration``
reads all three to register the running nodes for ``inventory/gpu.py``; keeping their
places here keeps it below the modules that publish through it.

>>> registry_path().name, APTREPO_SERVER_JSON.name, PYPIMIRROR_JSON.name
('nodes.yaml', 'server.json', 'pypimirror.json')
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STATE_DIR = REPO_ROOT / ".sandbox"
# The apt repository is the checkout's, whichever state directory its nodes use.
APTREPO_ROOT = DEFAULT_STATE_DIR / "aptrepo"
APTREPO_SERVER_JSON = APTREPO_ROOT / "server.json"
# The wheel mirror's state follows $SANDBOX_STATE_DIR as it is when the sandbox starts.
PYPIMIRROR_STATE_DIR = Path(os.environ.get("SANDBOX_STATE_DIR", DEFAULT_STATE_DIR))
PYPIMIRROR_JSON = PYPIMIRROR_STATE_DIR / "pypimirror.json"


def state_dir() -> Path:
    """The state directory: $SANDBOX_STATE_DIR, else <repo root>/.sandbox."""
    override = os.environ.get("SANDBOX_STATE_DIR")
    return Path(override).resolve() if override else DEFAULT_STATE_DIR


def registry_path() -> Path:
    """The node registry (sandbox.registration makes inventory/gpu.py's host list of it)."""
    return state_dir() / "nodes.yaml"


def read_registry() -> dict[str, dict]:
    """Nodes in the registry, by name ({} when there is no registry)."""
    try:
        data = yaml.safe_load(registry_path().read_text()) or {}
    except FileNotFoundError:
        return {}
    return dict(data.get("nodes") or {})
