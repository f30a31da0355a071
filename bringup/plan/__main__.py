"""``python -m bringup.plan FACTS.json [--config CONFIG.yaml]`` (bringup/plan/cli.py)."""

import sys

from bringup.plan.cli import main

if __name__ == "__main__":
    sys.exit(main())
