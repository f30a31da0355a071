"""The node plan: facts + settings -> every decision the deploy acts on, with findings.

    python -m bringup.plan FACTS.json [--config CONFIG.yaml] [--host NAME]

prints the NodePlan as JSON (``ok``, ``findings``, ``toolkit``, ``arch_list``, ``env``,
``repo``, ``layout``, ``venv``, ``prewarm``, ``service``). FACTS.json is a facts
document (docs/facts.md) or a ``reports/<host>.json`` (``{"facts": ...}``). Run it from
the repository root: the venv and toolkit locks are read from files/locks/ there. Bad
input is one line naming the host and exit status 2, never a traceback.
"""

import argparse
import json
import sys

import yaml

from bringup import checks, facts_schema, yamlload
from bringup.config import Config, ConfigError


def load_facts(path):
    """Read a facts document, or the ``facts`` of a validate report."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return data["facts"] if isinstance(data, dict) and "facts" in data and "gpus" not in data else data


def load_settings(path):
    """Settings from a YAML file (a mapping of bringup.config keys)."""
    with open(path, encoding="utf-8") as handle:
        settings = yamlload.load(handle) or {}  # an alias bomb is refused as it loads
    if not isinstance(settings, dict):
        raise ValueError(f"{path}: expected a mapping of settings, got {type(settings).__name__}")
    return settings


def main(argv=None):
    # The package's plan(): bringup/plan/__init__.py imports this module, so it is read
    # once the package is whole.
    from bringup.plan import plan

    parser = argparse.ArgumentParser(prog="python -m bringup.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("facts", help="facts JSON (a facts document or reports/<host>.json)")
    parser.add_argument("--config", help="YAML settings (the keys of bringup.config.Config)")
    parser.add_argument("--host", default="node", help="host name used in messages")
    args = parser.parse_args(argv)
    try:
        config = Config.from_data(load_settings(args.config) if args.config else {}, host=args.host)
        node = plan(load_facts(args.facts), config)
    except OSError as error:
        print(f"error: {args.host}: {error.strerror}: {error.filename}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as error:
        print(f"error: {args.host}: {args.facts} is not JSON ({error})", file=sys.stderr)
        return 2
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        print(f"error: {args.host}: {args.config} is not valid YAML"
              f"{f' (line {where.line + 1})' if where else ''}: {getattr(error, 'problem', error)}", file=sys.stderr)
        return 2
    except facts_schema.FactsError as error:
        print(f"error: {args.host}: {args.facts}: {error}; give a facts document (docs/facts.md) or a "
              "reports/<host>.json", file=sys.stderr)
        return 2
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"error: {args.host}: {checks.cut(str(error))}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - one line, never a traceback (control/host_plan.py does the same)
        print(f"error: {args.host}: planning failed: {type(error).__name__}: {checks.cut(' '.join(str(error).split()))}"
              "; this is a bug of this tool: report it with the facts document", file=sys.stderr)
        return 2
    print(json.dumps(node.as_dict(), indent=2))
    return 0
