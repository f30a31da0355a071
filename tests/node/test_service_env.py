"""The service's environment file: root-owned, readable by the service's group at most
(it holds the operator's secrets), holding every key the plan manages with the plan's
value (the operator's own lines may stand beside them). Values that are not the plan's
own are never printed (bringup/redact.py)."""

from bringup import redact
from tests.node.remote import fail, service_environment, stat


def test_service_env_file_owner_and_mode(host, expected):
    path = expected.layout.env_file
    info = stat(host, path)
    groups = ("root", expected.config.service_user)
    if info is None or info.kind != "regular file" or info.owner != "root" or info.group not in groups \
            or info.mode & ~0o640:
        fail(expected, "service env file", f"{path} regular file root:{'|'.join(groups)} 0640 or stricter",
             str(info) if info else "missing")


def test_service_env_file_matches_plan(host, expected):
    seen, why = service_environment(host, expected)
    if seen is None:
        fail(expected, "service environment", f"a readable {expected.layout.env_file}", why)
    want = expected.env
    shown_seen, shown_want = redact.env({key: seen[key] for key in want if key in seen}), redact.env(want)
    problems = [f"missing {key}" for key in want if key not in seen]
    problems += [f"{key}={shown_seen[key]} (want {shown_want[key]})" for key in want
                 if key in seen and seen[key] != want[key]]
    if problems:
        fail(expected, f"{expected.layout.env_file} content",
             f"the plan's {', '.join(want)}", "; ".join(problems))
