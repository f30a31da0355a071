"""The one redaction of everything the tool prints or saves (reports/<host>.json,
reports/summary.json, the per-host report, the planner's JSON, settings errors): the
values of the service env file and of ``service_env`` (an ``HF_TOKEN``, a password)
become ``<redacted>``, their keys stay; credentials in URLs
(``https://user:pw@host``) become ``https://<redacted>@host``.

The values of the keys the plan decides itself (bringup.planned_env.PLANNED_ENV_KEYS:
CUDA_HOME, PATH, the arch list, the cache directories, CXX) are not secret and the
findings need them; they stay. The plan the tasks act on keeps every real value:
only what is printed or saved passes through here.
"""

import re
import shlex

from bringup.planned_env import NOT_SECRET_ENV_KEYS

REDACTED = "<redacted>"
# scheme://userinfo@ : everything between the scheme and the LAST "@" of the word (up to
# a space). A password may hold "/", "?" or "#" (urllib then ends the authority there
# and says "nonnumeric port: 'PASSWORD@host'"), so the authority's end is not looked for:
# any "@" after "scheme://" is taken as ending a userinfo. The one pattern of the tool:
# the settings' checks refuse what it finds (bringup/setting_checks.py), the redaction replaces
# it, the probe (files/probe.d/) cuts the endpoint at its last "@" the same way.
USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)\S*@")
# In one value (a setting, an assignment of the env file) the userinfo runs from the
# scheme to the value's last "@", whatever it holds, a space too (a password may: urllib
# then says "URL can't contain control characters. 'svc:PASS WORD@host'"): what the
# settings' checks refuse and an error line replaces, as the probe (files/probe.d/) cuts the endpoint.
VALUE_USERINFO = re.compile(r"(?s)(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://).*@")
# urllib's and http.client's port errors quote the authority's tail, which is a password
# when the URL had one ("nonnumeric port: 'PASSWORD@host'"): no scheme left to find it by.
PORT_ERROR = re.compile(r"(?P<keep>(?:nonnumeric port|Port could not be cast to integer value as):? )'[^']*'")
# Values this short are no secret, and blanking them in a message would blank words.
SHORTEST_SECRET = 4


def urls(text, replacement=REDACTED):
    """``text`` with the userinfo of every URL in it replaced.

    >>> urls("index https://alice:s3cret@pypi.example/simple and http://mirror/x")
    'index https://<redacted>@pypi.example/simple and http://mirror/x'
    >>> urls("https://svc:pa/ss?#x@mirror/models nonnumeric")
    'https://<redacted>@mirror/models nonnumeric'
    >>> urls("nonnumeric port: 'PASSWORD@mirror'")
    "nonnumeric port: '<redacted>'"
    """
    text = PORT_ERROR.sub(lambda match: f"{match.group('keep')}'{replacement}'", text)
    return USERINFO.sub(lambda match: f"{match.group('scheme')}{replacement}@", text)


def value(text, replacement=REDACTED):
    """One value ``text`` with its URL's userinfo replaced, up to the value's last "@".

    >>> value("https://svc:pa ss@mirror/m")
    'https://<redacted>@mirror/m'
    """
    return VALUE_USERINFO.sub(lambda match: f"{match.group('scheme')}{replacement}@", text)


def has_userinfo(text):
    """Whether the value ``text`` holds a URL with a user or password (``value`` would
    replace it).

    >>> has_userinfo("https://svc:p/w@mirror"), has_userinfo("https://mirror/simple"), has_userinfo("a@b")
    (True, False, False)
    >>> has_userinfo("https://svc:pa ss@mirror")
    True
    """
    return VALUE_USERINFO.search(str(text)) is not None


# What a server's own log can carry of a secret: SGLang logs its ServerArgs
# (``api_key='...'``, ``admin_api_key=...``), an echoed command line (``--api-key X``) or
# config (``api-key: X``), a request's ``Authorization: Bearer X``, a Hugging Face token.
LOG_SECRETS = (
    (re.compile(r"(?P<keep>\b(?:admin_)?api_key=)(?:'[^']*'|\"[^\"]*\"|[^\s,)]+)"), rf"\g<keep>'{REDACTED}'"),
    (re.compile(r"(?P<keep>--(?:admin-)?api-key[= ])\S+"), rf"\g<keep>{REDACTED}"),
    (re.compile(r"(?P<keep>\b(?:admin-)?api-key:\s*)\S+"), rf"\g<keep>{REDACTED}"),
    (re.compile(r"(?P<keep>\bBearer\s+)\S+", re.IGNORECASE), rf"\g<keep>{REDACTED}"),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}\b"), REDACTED),
)


def log_line(line):
    """A log line as it may be printed or saved: the secrets a server's log can carry
    (LOG_SECRETS) and URL credentials replaced; ``api_key=None`` stays.

    >>> log_line("server_args=ServerArgs(model_path='m', api_key='s3cret-key', admin_api_key=None)")
    "server_args=ServerArgs(model_path='m', api_key='<redacted>', admin_api_key=None)"
    >>> log_line("sglang serve --api-key s3cret --port 30000; Authorization: Bearer abc123")
    'sglang serve --api-key <redacted> --port 30000; Authorization: Bearer <redacted>'
    """
    for pattern, replacement in LOG_SECRETS:
        line = pattern.sub(lambda match: match.group(0) if match.group(0).endswith("=None")
                           else match.expand(replacement), line)
    return urls(line)


def data(value):
    """Plain data (dicts, lists, tuples, strings) with ``urls`` applied to every string.

    >>> data({"venv": {"sources": ["--index-url", "https://u:p@m/simple"]}, "n": 1})
    {'venv': {'sources': ['--index-url', 'https://<redacted>@m/simple']}, 'n': 1}
    """
    if isinstance(value, str):
        return urls(value)
    if isinstance(value, dict):
        return {key: data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(data(item) for item in value)
    return value


def env(values, keep=None):
    """An env mapping (the plan's service env, the env file's values the probe saw)
    with every value redacted but those of ``keep`` (default: the planned keys and HF_HUB_OFFLINE).

    >>> env({"CXX": "/usr/bin/g++", "HF_TOKEN": "hf_abc"})
    {'CXX': '/usr/bin/g++', 'HF_TOKEN': '<redacted>'}
    """
    keep = NOT_SECRET_ENV_KEYS if keep is None else keep
    return {key: (value if key in keep else REDACTED) for key, value in (values or {}).items()}


def pairs(assignments):
    """The ``service_env`` setting's (key, value) pairs with every value redacted.

    >>> pairs((("HF_TOKEN", "hf_abc"),))
    (('HF_TOKEN', '<redacted>'),)
    """
    return tuple((key, REDACTED) for key, _ in assignments)


def _raw_assignments(value):
    """A raw ``service_env`` value (YAML mapping or ``--data`` words) redacted as well as
    it can be read: keys stay, everything else goes."""
    if isinstance(value, dict):
        return {key: REDACTED for key in value}
    try:
        words = shlex.split(str(value))
    except ValueError:
        return REDACTED
    return " ".join(f"{word.split('=', 1)[0]}={REDACTED}" if "=" in word else REDACTED for word in words)


def _secrets_of(value):
    """The pieces of a raw ``service_env`` value that may be secret (every value, and
    every word that is not KEY=value), for scrubbing them out of a message."""
    if isinstance(value, dict):
        return [str(item) for item in value.values()]
    text = str(value)
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    return [text] + [word.split("=", 1)[1] if "=" in word else word for word in words] + [text]


def scrub(text, secrets):
    """``text`` with every secret of at least SHORTEST_SECRET characters replaced
    (longest first, so a value inside another is not left half-shown).

    >>> scrub("got 'hf_abc' and 'x'", ["x", "hf_abc"])
    "got '<redacted>' and 'x'"
    """
    for secret in sorted({s for s in secrets if len(s) >= SHORTEST_SECRET}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


# Settings whose raw values are env values.
ENV_SETTINGS = ("service_env",)
# Settings whose raw value may carry SGLang's key (refused there: bringup/settings.py
# KeylessArguments), shown whole as REDACTED: a key may be quoted, split or in a list.
KEY_SETTINGS = ("service_args",)
KEY_WORD = re.compile(r"api[-_]key", re.IGNORECASE)


def setting(key, value, message=""):
    """A setting's raw value and the message about it, as they may be printed:
    ``service_env``'s values redacted (in the value and wherever they appear in the
    message), a ``service_args`` naming an API key option redacted whole, URL
    credentials redacted everywhere.

    >>> setting("service_env", {"HF_TOKEN": "hf_secret123", "CUDA_HOME": "/x"}, "CUDA_HOME is decided by the plan")
    ({'HF_TOKEN': '<redacted>', 'CUDA_HOME': '<redacted>'}, 'CUDA_HOME is decided by the plan')
    >>> setting("service_env", "HF_TOKEN=hf_secret123 'oops", "bad words in HF_TOKEN=hf_secret123 'oops")
    ('<redacted>', 'bad words in <redacted>')
    >>> setting("venv_index_url", "https://u:pw@mirror/simple", "no")
    ('https://<redacted>@mirror/simple', 'no')
    >>> setting("service_args", "--tp 2 --api-key=sk-1234", "remove --api-key, not sk-1234")
    ('<redacted>', 'remove --api-key, not <redacted>')
    """
    if key in KEY_SETTINGS and KEY_WORD.search(str(value)):
        words = [word.split("=", 1)[-1] for word in str(value).split()]  # the options' names stay
        return REDACTED, urls(scrub(message, [str(value), *(word for word in words if not word.startswith("-"))]))
    if key in ENV_SETTINGS:
        message = scrub(message, _secrets_of(value))
        value = _raw_assignments(value)
    return data(value), urls(message)


def facts(document):
    """A facts document as it may be saved: the env file's values the probe reported
    (``service_env``) redacted but the planned keys', URL credentials redacted.

    >>> facts({"service_env": {"CUDA_HOME": "/c", "HF_TOKEN": "hf_abc"}, "gpus": []})
    {'service_env': {'CUDA_HOME': '/c', 'HF_TOKEN': '<redacted>'}, 'gpus': []}
    """
    document = dict(document or {})
    if isinstance(document.get("service_env"), dict):
        document["service_env"] = env(document["service_env"])
    return data(document)
