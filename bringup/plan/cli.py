"""The node plan: facts + settings -> every decision the deploy acts on, with findings.

    python -m bringup.plan FACTS.json [--config CONFIG.yaml] [--host NAME] [--json]

prints the report validate.py prints for the host (the READY TO DEPLOY or BLOCKED block,
each finding and its fix), or with ``--json`` the NodePlan as JSON (``ok``, ``findings``,
``toolkit``, ``arch_list``, ``env``, ``repo``, ``layout``, ``venv``, ``prewarm``,
``service``), which ``python -m bringup.report`` renders again. FACTS.json is a facts
document (docs/facts.md) or a ``reports/<host>.json`` (``{"facts": ...}``, whose host
name is used unless ``--host`` says another). Run it from the repository root: the venv
and toolkit locks are read from files/locks/ there.

Exit status (docs/exit-statuses.md): 0 when the plan has no blocker, 1 when it has one,
2 on bad input or usage (one line naming the host, never a traceback).
"""

import argparse
import json
import sys

import yaml

from bringup import facts_schema, setting_checks, yamlload
from bringup.config import Config, ConfigError
from bringup.report import NotJSON, print_out, read_json, render

EXIT_READY, EXIT_BLOCKED, EXIT_BAD_INPUT = 0, 1, 2


def load_facts(path):
    """Read a facts document, or the ``facts`` of a validate report."""
    return _facts_and_host(path)[0]


def _facts_and_host(path):
    """A facts document and the host name a validate report names (else None)."""
    data = read_json(path)
    if isinstance(data, dict) and "facts" in data and "gpus" not in data:
        host = data.get("host")
        return data["facts"], host if isinstance(host, str) and host else None
    return data, None


def exit_status(node):
    """0 when the plan has no blocker (deploy would go ahead), else 1.

    >>> from types import SimpleNamespace
    >>> exit_status(SimpleNamespace(ok=True)), exit_status(SimpleNamespace(ok=False))
    (0, 1)
    """
    return EXIT_READY if node.ok else EXIT_BLOCKED


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
    parser.add_argument("--host", help="host name used in messages (default: the report's host, else node)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON instead of the report")
    args = parser.parse_args(argv)
    given_host, args.host = args.host, args.host or "node"
    try:
        facts, saved_host = _facts_and_host(args.facts)
        args.host = given_host or saved_host or "node"
        config = Config.from_data(load_settings(args.config) if args.config else {}, host=args.host)
        node = plan(facts, config)
    except OSError as error:
        print(f"error: {args.host}: {error.strerror}: {error.filename}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except NotJSON as error:
        print(f"error: {args.host}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        print(f"error: {args.host}: {args.config} is not valid YAML"
              f"{f' (line {where.line + 1})' if where else ''}: {getattr(error, 'problem', error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except facts_schema.FactsError as error:
        print(f"error: {args.host}: {args.facts}: {error}; give a facts document (docs/facts.md) or a "
              "reports/<host>.json", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValueError as error:
        print(f"error: {args.host}: {setting_checks.cut(str(error))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as error:  # noqa: BLE001 - one line, never a traceback (control/host_plan.py does the same)
        print(f"error: {args.host}: planning failed: {type(error).__name__}: {setting_checks.cut(' '.join(str(error).split()))}"
              "; this is a bug of this tool: report it with the facts document", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print_out(json.dumps(node.as_dict(), indent=2))
    else:
        print_out(render(args.host, facts, node))
    return exit_status(node)
