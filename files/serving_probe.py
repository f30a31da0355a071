"""Ask the SGLang server on this node one question; print the answer as one JSON line.

    python3 -I serving_probe.py HOST PORT health|generate [KEY_FILE]

Run by deploy's readiness gate and the node suite as the service user (who can read
the key file: root:<service_user> 0640), with the system's python3 and the standard
library only. ``health`` is ``GET /health``; ``generate`` is ``POST /generate`` of one
token (bringup/serving.py: what the pinned release answers). The API key, when a key
file is given (SGLang's ``--config`` YAML, ``api-key: <key>``), goes in the
``Authorization: Bearer`` header and nowhere else: never printed.

Prints ``{"status": 200, "body": {...}}``, or ``{"status": null, "error": "..."}`` when
nothing answered. Exit status 0 either way (the caller decides).
"""

import json
import re
import sys
import urllib.error
import urllib.request

GENERATE = {"text": "The capital city of France is", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}


def api_key(path):
    if not path:
        return ""
    with open(path, encoding="utf-8") as handle:
        found = re.search(r"^\s*api[-_]key\s*:\s*['\"]?([^'\"\s#]+)", handle.read(), re.MULTILINE)
    return found.group(1) if found else ""


def ask(host, port, what, key_file=""):
    # A server bound to every address answers on the loopback.
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    headers = {"Content-Type": "application/json"}
    key = api_key(key_file)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if what == "generate":
        request = urllib.request.Request(url + "/generate", data=json.dumps(GENERATE).encode(), headers=headers)
    else:
        request = urllib.request.Request(url + "/health", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    except (OSError, ValueError) as error:
        return {"status": None, "error": str(getattr(error, "reason", error))}
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode("utf-8", "replace")[:200]
    return {"status": status, "body": body}


if __name__ == "__main__":
    print(json.dumps(ask(*sys.argv[1:5])))
