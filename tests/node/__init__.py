"""testinfra end-state suite: proves a node is serving-ready (see docs/node-suite.md)."""
