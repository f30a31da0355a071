"""testinfra end-state suite: proves a node is serving-ready (see README.md here)."""
