"""The service's environment file: root-owned, not writable by others, holding every
key the plan manages with the plan's value (the operator's own lines may stand beside them)."""

from tests.node.remote import fail, service_environment, stat


def test_service_env_file_owner_and_mode(host, expected):
    path = expected.layout.env_file
    info = stat(host, path)
    if info is None or info.kind != "regular file" or info.owner != "root" or info.mode & ~0o644:
        fail(expected, "service env file", f"{path} regular file root:* 0644 or stricter",
             str(info) if info else "missing")


def test_service_env_file_matches_plan(host, expected):
    seen, why = service_environment(host, expected)
    if seen is None:
        fail(expected, "service environment", f"a readable {expected.layout.env_file}", why)
    want = expected.env
    problems = [f"missing {key}" for key in want if key not in seen]
    problems += [f"{key}={seen[key]} (want {want[key]})" for key in want if key in seen and seen[key] != want[key]]
    if problems:
        fail(expected, f"{expected.layout.env_file} content",
             f"the plan's {', '.join(want)}", "; ".join(problems))
