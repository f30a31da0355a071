"""The ``login`` section: a login shell's view and its nvcc -> ``path_nvcc``, ``login_env``.

Its shell fragment is files/probe.d/login.sh (``probe_login``); docs/facts.md
documents what it parses into.
"""

from bringup.facts_kinds import OPT_STR, OPT_VERSION, STR, Optional, Values
from bringup.layout import toolkit_home
from facts.probe_framing import Key, ProbeSection, parse_assignments, parse_nvcc_release


def login_path_nvcc(by_name):
    """The first nvcc on a login shell's PATH, with the release it reports."""
    section = by_name.get("path-nvcc")
    if section is None:
        return None
    return {"path": section.attribute("path"), "version": parse_nvcc_release(section.text) if section.rc == 0 else None}


def _login_env(by_name):
    return parse_assignments(by_name["login-env"].text) if "login-env" in by_name else {}


SECTION = ProbeSection(
    name="login",
    group=2,
    raw=("login-env", "path-nvcc"),
    keys={
        "path_nvcc": Key(
            parse=login_path_nvcc,
            schema=Optional({"path": STR, "version": OPT_VERSION}),
            meaning="the first `nvcc` on a login shell's `PATH`; null when none",
            example={"path": f"{toolkit_home('12.8')}/bin/nvcc", "version": "12.8"},
        ),
        "login_env": Key(
            parse=_login_env,
            schema=Values(OPT_STR),
            meaning="a login shell's (`bash -lc`) view",
            example={"CUDA_HOME": None, "CUDA_PATH": None, "PATH": "...", "nvcc": f"{toolkit_home('12.8')}/bin/nvcc"},
        ),
    },
)
