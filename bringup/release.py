"""The service's releases (files/release.sh records them on the node): what a look at
them says, when deploy must restart for a release not yet live, and the one line that
refuses a rollback (pure: plain data in, decisions and text out)."""

import re

# What release.sh's look prints, one ``key=value`` line each (digests and names only).
LOOK_KEYS = ("current", "live", "previous", "previous_venv", "previous_problem", "recordable")
NO_PREVIOUS = "no previous release recorded"
# The state a failed restore says it left the node in (its stderr's ``state=`` line):
# nothing changed; a rename failed and what was renamed is back; a part could not be put
# back; or it did not say (it died on something unforeseen).
UNCHANGED, AS_BEFORE, MIXED, UNKNOWN = "unchanged", "as-before", "mixed", "unknown"
# The blockers of the host's settings that refuse a rollback: those about the safety of
# the paths it writes (the venv link's, the env file's, the records'). The others (a
# model that cannot be had, a GPU the new stack does not support) are about the change,
# not about the release it goes back to.
# A rollback also needs its whole serving group in the run: part of a group put back alone breaks it.
ROLLBACK_BLOCKERS = ("UNSAFE_PATH", "GROUP_MEMBERS_MISSING")


def parse_look(lines):
    """The look's lines as a dict of every ``LOOK_KEYS`` key ("" when absent).

    >>> look = parse_look(["current=aa", "live=bb", "previous=", "noise"])
    >>> look["current"], look["live"], look["previous"], look["previous_problem"]
    ('aa', 'bb', '', '')
    """
    look = dict.fromkeys(LOOK_KEYS, "")
    for line in lines:
        key, separator, value = line.partition("=")
        if separator and key in look:
            look[key] = value.strip()
    return look


def pending(look):
    """Whether what is live on the node is not what the service was last started with:
    a change an earlier deploy made and did not restart for (it was interrupted, or ran
    without the service step). The service step restarts for it as for a change of its
    own run; a node with no record yet has nothing pending.

    >>> pending({"current": "aa", "live": "bb"}), pending({"current": "aa", "live": "aa"})
    (True, False)
    >>> pending({"current": "", "live": "bb"})
    False
    """
    return bool(look.get("current")) and look.get("current") != look.get("live")


def rollback_blockers(blockers):
    """Which of the plan's ``blockers`` (Findings) refuse a rollback: only those about
    the safety of the paths it writes (``ROLLBACK_BLOCKERS``).

    >>> from bringup.findings import BLOCKER, Finding
    >>> found = [Finding("MODEL_UNAVAILABLE", BLOCKER, "m", "f"), Finding("UNSAFE_PATH", BLOCKER, "p", "f")]
    >>> [finding.code for finding in rollback_blockers(found)]
    ['UNSAFE_PATH']
    """
    return [finding for finding in blockers if finding.code in ROLLBACK_BLOCKERS]


def rollback_problem(managed, enabled, look=None):
    """Why the host cannot be rolled back ("" when it can): an external venv, the look's
    own answer about the release it would restore (none recorded, its venv missing or
    incomplete), or a service deploy does not start. ``look`` None: not looked at yet
    (the node answers at the rollback itself).

    >>> rollback_problem(False, True)
    'venv_managed is false'
    >>> rollback_problem(True, False, {"previous_problem": "no previous release recorded"})
    'no previous release recorded'
    >>> rollback_problem(True, True, {"previous_problem": ""}), rollback_problem(True, True)
    ('', '')
    """
    if not managed:
        return "venv_managed is false"
    problem = (look or {}).get("previous_problem", "")
    if problem:
        return problem
    if not enabled:
        return "the service is not enabled"
    return ""


def restore_failure(stderr_lines):
    """(state, problem) of a restore that failed, from its stderr: the ``state=`` line
    files/release.sh writes before its one line, ``UNKNOWN`` when there is none.

    >>> restore_failure(["state=unchanged", "no previous release recorded"])
    ('unchanged', 'no previous release recorded')
    >>> restore_failure(["sh: 1: cannot create /x: Read-only file system"])
    ('unknown', 'sh: 1: cannot create /x: Read-only file system')
    """
    lines = [line.strip() for line in stderr_lines if line.strip()]
    states = [line.split("=", 1)[1] for line in lines if line.startswith("state=")]
    problem = next((line for line in reversed(lines) if not line.startswith("state=")),
                   "the rollback failed on the node")
    return (states[-1] if states else UNKNOWN), problem


def restore_failure_line(host, state, problem):
    """The one line of a restore that failed after it may have changed the node, saying
    in which state it left it (never "nothing changed": ``refusal_line`` is for that).

    >>> restore_failure_line("n1", AS_BEFORE, "could not put the env file /e in place (x); "
    ...                      "the unit /u put back: the node is as it was before the rollback")[:64]
    'n1: rollback failed, the node is as it was before it: could not '
    >>> restore_failure_line("n1", UNKNOWN, "sh: 1: x: I/O error").split("; fix: ")[0]
    'n1: rollback failed, the node may be half-restored: sh: 1: x: I/O error'
    """
    if state == AS_BEFORE:
        return (f"{host}: rollback failed, the node is as it was before it: {problem}; fix: make the file's "
                "directory writable, then run rollback.py again")
    if state == MIXED:
        return (f"{host}: rollback failed, the node is half-restored: {problem}; fix: run rollback.py again (it "
                "puts the whole previous release in place), or deploy.py the release you want")
    return (f"{host}: rollback failed, the node may be half-restored: {problem}; fix: run rollback.py again "
            "(it puts the whole previous release in place), or deploy.py the release you want")


def fix_for(problem):
    """What the operator does about a rollback's ``problem``.

    >>> fix_for(NO_PREVIOUS)
    'nothing to go back to (none recorded yet, or a rollback already used it): deploy the release you want with deploy.py'
    """
    if problem == "venv_managed is false":
        return ("the venv at venv_path is yours and deploy records no release of it: put the venv you want back "
                "there yourself, then restart sglang")
    if problem == "the service is not enabled":
        return "deploy starts no service here (service_enable, service_model, systemd): nothing to roll back"
    if problem == NO_PREVIOUS:
        return ("nothing to go back to (none recorded yet, or a rollback already used it): deploy the release you "
                "want with deploy.py")
    # A check of the node refused the restore: what to do about that check, then run it again.
    account = re.search(r"belongs to (user|group) (\S+), (?:who|which) no longer exists", problem)
    if account:
        return f"create {account[1]} {account[2]} again (or deploy the release you want), then run rollback.py again"
    directory = re.search(r"the directory of .*, (/\S*), is (not writable|missing|not root's alone)", problem)
    if directory:
        path, what = directory[1], directory[2]
        todo = {"not writable": f"make {path} writable (remount it read-write)",
                "missing": f"make {path} a directory of root's (not a link)",
                "not root's alone": f"make {path} root's and writable by root alone"}[what]
        return f"{todo}, then run rollback.py again"
    return "deploy the release you want with deploy.py (its venv_lock and settings)"


def refusal_line(host, problem):
    """The one line that refuses a rollback of ``host``.

    >>> refusal_line("n1", NO_PREVIOUS)[:60]
    'n1: rollback refused, nothing changed: no previous release r'
    """
    return f"{host}: rollback refused, nothing changed: {problem}; fix: {fix_for(problem)}"


def rollback_outcome(rollback, gate):
    """The verdict of a host that was rolled back (or refused one), and why, from what
    was recorded: ``rollback`` (``{"state": "rolled back" | "refused" | "failed", "cause", "reason"}``,
    ``cause`` the failure of deploy's gate that asked for it, "" for rollback.py) and the
    gate's record after it. Returns (verdict, reason); verdict None: the rollback's gate
    did not run (the host's failed operation says why).

    >>> rollback_outcome({"state": "rolled back", "cause": "failed: exited; cause: CUDA_UNAVAILABLE"},
    ...                  {"state": "serving"})
    ('rolled back', 'the change failed (failed: exited; cause: CUDA_UNAVAILABLE); back on the previous release, serving')
    >>> rollback_outcome({"state": "refused", "cause": "", "reason": "no previous release recorded"}, None)[1]
    'rollback refused: no previous release recorded'
    >>> rollback_outcome({"state": "rolled back", "cause": "x"}, {"state": "failed", "reason": "y"})
    ('failed', 'the change failed (x); rolled back, and the previous release does not serve either: failed: y')
    >>> rollback_outcome({"state": "failed", "cause": "", "reason": "rollback failed, the node is as it was"}, None)
    ('failed', 'rollback failed, the node is as it was')
    """
    cause = rollback.get("cause") or ""
    before = f"the change failed ({cause}); " if cause else ""
    if rollback.get("state") == "refused":
        return "failed", f"{before}rollback refused: {rollback.get('reason', '')}"
    if rollback.get("state") == "failed":
        return "failed", f"{before}{rollback.get('reason', '')}"
    if not gate:
        return None, ""
    if gate.get("state") == "serving":
        return "rolled back", f"{before}back on the previous release, serving"
    return "failed", (f"{before}rolled back, and the previous release does not serve either: "
                      f"{gate.get('state')}: {gate.get('reason', '')}")
