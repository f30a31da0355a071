"""The API key file, decided before anything changes: pure decisions on what the control
machine's key source (``service_api_key_source``) and the node's key file
(``service_api_key_file``) look like.

Two ways to give SGLang its key (``api-key: <key>`` in a YAML file SGLang reads with
``--config``): the operator keeps the file on the control machine and deploy uploads it
after the service account exists, ``root:<service group>`` 0640 (``service_api_key_source``),
or the operator puts it on the node (``service_api_key_file`` alone), where it must
already be ``root:<service group>`` 0640: on a fresh node that group does not exist before
deploy's account step, so the first way is the one for fresh nodes. Either way validate
says what is wrong before deploy changes anything (``API_KEY_FILE_UNUSABLE``, a blocker);
the key's value is never read here, only whether the source has an ``api-key:`` line.
"""

import yaml

from bringup import yamlload
from bringup.findings import BLOCKER, FIX, Finding

KEY_FILE_NAME = "api-key.yaml"
SOURCE_MOST_BYTES = 64 * 1024

# SGLang's --config parser (server_args_config_parser) reads the file with yaml.safe_load
# and passes each top-level value as `--key str(value)`: `api-key: ""` is no key at all
# (SGLang adds its key check only for a non-empty one), `api-key: ~` the key "None".


def has_key(text):
    """Whether ``text``, read as YAML as SGLang reads it, gives a non-empty key (bounded:
    bringup/yamlload.py; a parse error says nothing, since its text quotes the file).

    >>> has_key("api-key: sk-1\\n"), has_key('api-key: ""\\n'), has_key("api-key: # later\\n")
    (True, False, False)
    >>> has_key("api-key: sk-1\\napi-key: ''\\n"), has_key("api-key: [a\\n"), has_key("api-key: true\\n")
    (False, False, False)
    """
    try:
        document = yamlload.load(text)
    except (yaml.YAMLError, ValueError):
        return False
    value = document.get("api-key") if isinstance(document, dict) else None
    return isinstance(value, (str, int, float)) and not isinstance(value, bool) and bool(str(value).strip())


def source_problem(state):
    """Why the control machine's key source cannot be uploaded ("" when it can).

    + state: {"kind": "file"|"link"|"directory"|"other"|None, "readable": bool,
      "size": int, "has_key": bool, "mode": int} (control/api_key.py reads it)

    >>> source_problem({"kind": "file", "readable": True, "size": 20, "has_key": True, "mode": 0o600})
    ''
    >>> source_problem({"kind": None})
    'does not exist on the control machine'
    >>> source_problem({"kind": "file", "readable": True, "size": 9, "has_key": False, "mode": 0o600})
    'holds no `api-key: <key>` line SGLang reads as a key (YAML: a non-empty value at the top level)'
    """
    kind = state.get("kind")
    if kind is None:
        return "does not exist on the control machine"
    if kind != "file":
        return f"is a {kind} on the control machine, not a regular file"
    if not state.get("readable"):
        return "cannot be read by the user running pyinfra on the control machine"
    if state.get("size", 0) > SOURCE_MOST_BYTES:
        return f"is larger than {SOURCE_MOST_BYTES} bytes: not a key file"
    if not state.get("has_key"):
        return "holds no `api-key: <key>` line SGLang reads as a key (YAML: a non-empty value at the top level)"
    return ""


def node_file_problem(found, group, uploaded):
    """Why the node's key file cannot be used ("" when it can, or when deploy's upload
    makes it so).

    + found: {"kind", "user", "group", "mode", "readable", "writable_dir", "closed_dir"} of the node's file
      (validate: facts.files.KeyFileAccess; ``readable``: the service user can read it, None when
      the account does not exist yet; deploy's own check: facts.files.ManagedFile, without the
      directory keys)
    + group: the service user's group
    + uploaded: whether deploy uploads it (``service_api_key_source``)

    >>> node_file_problem({"kind": None}, "sglang", True)
    ''
    >>> node_file_problem({"kind": "link"}, "sglang", True)
    'is a link (deploy never writes through one)'
    >>> node_file_problem({"kind": "file", "user": "root", "group": "sglang", "mode": "644", "readable": True},
    ...                   "sglang", False)
    'is mode 0644: other users can read the key'
    >>> node_file_problem({"kind": None}, "sglang", False)
    'does not exist'
    """
    kind = found.get("kind")
    if kind == "link":
        return "is a link (deploy never writes through one)"
    if kind not in (None, "file"):
        return f"is a {kind}, not a regular file"
    if uploaded and found.get("writable_dir"):
        # Root's stage, chown and rename there could be swapped for a link to any file.
        return (f"is in {found['writable_dir']}, a directory a user other than root may write: deploy "
                "uploads the key only where root alone writes every directory above it")
    if uploaded and found.get("closed_dir"):
        # Deploy's upload would succeed and SGLang, as the service user, not read the key.
        return (f"is in {found['closed_dir']}, a directory the service user {group} cannot reach: SGLang "
                "could not read the key deploy uploads")
    if uploaded:
        return ""  # deploy writes it whole, root:<group> 0640, after the account exists
    if kind is None:
        return "does not exist"
    mode = int(found.get("mode") or "0", 8)
    if found.get("user") != "root" or found.get("group") != group:
        return f"is owned {found.get('user')}:{found.get('group')}, not root:{group}"
    if mode & 0o007:
        return f"is mode {mode:04o}: other users can read the key"
    if mode & 0o020 or not mode & 0o040:
        return f"is mode {mode:04o}: the service's group must read it and only root write it"
    if found.get("readable") is False:
        return f"cannot be read by the service user {group} (a directory above it is closed to it)"
    return ""


def api_key_findings(source, source_state, dest, found, user, account_deployed):
    """The key file's findings: ``API_KEY_FILE_UNUSABLE`` (a blocker) naming the file and
    the fix; ``API_KEY_FILE_UPLOAD`` (a fix) when deploy uploads a source the node's
    file does not match yet.

    + source: ``service_api_key_source`` ("" for none)
    + source_state: source_problem's state (with ``sha1``), None without a source
    + dest: ``service_api_key_file``
    + found: node_file_problem's found (with ``sha1``)
    + user: the service user (its group has its name)
    + account_deployed: whether deploy's account step creates the account if missing

    >>> [f.code for f in api_key_findings("k.yaml", {"kind": None}, "/etc/sglang/api-key.yaml", {"kind": None},
    ...                                   "sglang", True)]
    ['API_KEY_FILE_UNUSABLE']
    >>> [f.code for f in api_key_findings("", None, "/etc/sglang/api-key.yaml", {"kind": None}, "sglang", True)]
    ['API_KEY_FILE_UNUSABLE']
    >>> api_key_findings("", None, "", {"kind": None}, "sglang", True)
    []
    """
    if not dest:
        return []
    if source:
        problem = source_problem(source_state or {})
        if problem:
            return [Finding("API_KEY_FILE_UNUSABLE", BLOCKER, f"service_api_key_source={source} {problem}",
                            f"put SGLang's key in {source} on the control machine as one line `api-key: <key>` "
                            f"(`chmod 0600 {source}`), or correct service_api_key_source; deploy uploads it to "
                            f"{dest}, root:{user} 0640")]
    problem = node_file_problem(found, user, bool(source))
    if problem:
        if source and found.get("writable_dir") and problem.startswith("is in "):
            fix = (f"choose a service_api_key_file in a directory only root writes (the default beside "
                   f"service_env_file, /etc/sglang/{KEY_FILE_NAME}), or make {found['writable_dir']} and the "
                   "directories above it root's and closed to others' writes")
        elif source and found.get("closed_dir") and problem.startswith("is in "):
            fix = (f"let {user} traverse {found['closed_dir']} and the directories above it (`chmod o+x`, or "
                   f"group {user} and g+x), or choose a service_api_key_file it can reach (the default beside "
                   f"service_env_file, /etc/sglang/{KEY_FILE_NAME})")
        elif found.get("kind") == "link" or found.get("kind") not in (None, "file"):
            fix = f"remove {dest} on the node (`rm {dest}`) so that deploy can write a file there, or choose " \
                  "another service_api_key_file"
        else:
            fix = (f"set service_api_key_source to a file on the control machine holding `api-key: <key>`: deploy "
                   f"uploads it to {dest} after it creates the service account, root:{user} 0640 (works on a "
                   f"fresh node); or, once the account exists, `chown root:{user} {dest} && chmod 0640 {dest}`")
        return [Finding("API_KEY_FILE_UNUSABLE", BLOCKER, f"service_api_key_file={dest} {problem}", fix)]
    if source and not account_deployed and found.get("readable") is None:
        return [Finding("API_KEY_FILE_UNUSABLE", BLOCKER,
                        f"service_api_key_file={dest}: the service account {user} does not exist and deploy_steps "
                        "leaves out the account step: the key file's group cannot be set",
                        "add account to deploy_steps (or deploy it once with all steps)")]
    if source and (found.get("kind") is None or found.get("sha1") != (source_state or {}).get("sha1")
                   or (found.get("user"), found.get("group"), found.get("mode")) != ("root", user, "640")):
        return [Finding("API_KEY_FILE_UPLOAD", FIX,
                        f"service_api_key_file={dest} is not yet the key of service_api_key_source={source}",
                        f"deploy uploads {source} to {dest} whole, root:{user} 0640, after the service account "
                        "exists, and restarts the service to read it")]
    return []
