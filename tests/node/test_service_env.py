"""The service's environment file: root-owned, not writable by others, exactly the plan's env."""

from tests.node.remote import fail, service_env, stat


def test_service_env_file_owner_and_mode(host, expected):
    path = expected.config.service_env_file
    info = stat(host, path)
    if info is None or info.kind != "regular file" or info.owner != "root" or info.mode & ~0o644:
        fail(expected, "service env file", f"{path} regular file root:* 0644 or stricter",
             str(info) if info else "missing")


def test_service_env_file_matches_plan(host, expected):
    seen, want = service_env(host, expected), expected.env
    if seen != want:
        problems = [f"missing {key}" for key in want if key not in seen]
        problems += [f"extra {key}={seen[key]}" for key in seen if key not in want]
        problems += [f"{key}={seen[key]} (want {want[key]})" for key in want if key in seen and seen[key] != want[key]]
        fail(expected, f"{expected.config.service_env_file} content",
             f"exactly the plan's {', '.join(want)}", "; ".join(problems))
