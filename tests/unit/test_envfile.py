"""The env file as its three readers see it: systemd (a line-by-line port of
``parse_env_file_internal``, systemd's src/basic/env-file.c, below), bringup/envfile.py
and files/service-env.sh (run here under sh). Every value the deploy writes reads back
exactly in all three; every operator file either reads alike in all three or is
refused, naming the line and key, never the value."""

import random
import re
import subprocess
from pathlib import Path

import pytest

from bringup import envfile

ROOT = Path(__file__).resolve().parents[2]
SERVICE_ENV_SH = ROOT / "files" / "service-env.sh"

# ------------------------------------------------------------- systemd's reader

WHITESPACE, NEWLINE, COMMENTS, SHELL_NEED_ESCAPE = " \t\n\r", "\n\r", "#;", "\"\\`$"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # env_name_is_valid


def systemd_env(text, before_254=False):
    """What systemd's EnvironmentFile= gives a service: ``parse_env_file_internal``
    (state for state, systemd v257), ``load_env_file_push`` (a later key replaces an
    earlier one) and ``strv_env_clean`` (invalid names dropped). ``before_254``: a
    comment ending in ``\\`` swallows the next line (systemd 252 on Debian 12, 249 and 255
    on Ubuntu 22.04 and 24.04 differ here)."""
    env = {}
    key, value = [], None
    last_key_ws = last_value_ws = None
    state = "PRE_KEY"

    def push():
        name = "".join(key if last_key_ws is None else key[:last_key_ws])
        env[name] = "" if value is None else "".join(value)

    for c in text.split("\0")[0]:  # a C string: NUL ends it
        if state == "PRE_KEY":
            if c in COMMENTS:
                state = "COMMENT"
            elif c not in WHITESPACE:
                state, last_key_ws, key = "KEY", None, [c]
        elif state == "KEY":
            if c in NEWLINE:
                state, key = "PRE_KEY", []
            elif c == "=":
                state, last_value_ws = "PRE_VALUE", None
            else:
                if c not in WHITESPACE:
                    last_key_ws = None
                elif last_key_ws is None:
                    last_key_ws = len(key)
                key.append(c)
        elif state == "PRE_VALUE":
            if c in NEWLINE:
                push()
                state, key, value = "PRE_KEY", [], None
            elif c == "'":
                state = "SINGLE_QUOTE_VALUE"
            elif c == '"':
                state = "DOUBLE_QUOTE_VALUE"
            elif c == "\\":
                state = "VALUE_ESCAPE"
            elif c not in WHITESPACE:
                state = "VALUE"
                value = (value or []) + [c]
        elif state == "VALUE":
            if c in NEWLINE:
                if last_value_ws is not None and value is not None:
                    value = value[:last_value_ws]
                push()
                state, key, value = "PRE_KEY", [], None
            elif c == "\\":
                state, last_value_ws = "VALUE_ESCAPE", None
            else:
                if c not in WHITESPACE:
                    last_value_ws = None
                elif last_value_ws is None:
                    last_value_ws = len(value or [])
                value = (value or []) + [c]
        elif state == "VALUE_ESCAPE":
            state = "VALUE"
            if c not in NEWLINE:
                value = (value or []) + [c]
        elif state == "SINGLE_QUOTE_VALUE":
            if c == "'":
                state = "PRE_VALUE"
            else:
                value = (value or []) + [c]
        elif state == "DOUBLE_QUOTE_VALUE":
            if c == '"':
                state = "PRE_VALUE"
            elif c == "\\":
                state = "DOUBLE_QUOTE_VALUE_ESCAPE"
            else:
                value = (value or []) + [c]
        elif state == "DOUBLE_QUOTE_VALUE_ESCAPE":
            state = "DOUBLE_QUOTE_VALUE"
            if c in SHELL_NEED_ESCAPE:
                value = (value or []) + [c]
            elif c != "\n":
                value = (value or []) + ["\\", c]
        elif state == "COMMENT":
            if c == "\\":
                state = "COMMENT_ESCAPE"
            elif c in NEWLINE:
                state = "PRE_KEY"
        elif state == "COMMENT_ESCAPE":
            state = "COMMENT" if before_254 or c not in NEWLINE else "PRE_KEY"
    if state in ("PRE_VALUE", "VALUE", "VALUE_ESCAPE", "SINGLE_QUOTE_VALUE", "DOUBLE_QUOTE_VALUE",
                 "DOUBLE_QUOTE_VALUE_ESCAPE"):
        if state == "VALUE" and last_value_ws is not None and value is not None:
            value = value[:last_value_ws]
        push()
    return {name: item for name, item in env.items() if ENV_NAME.match(name)}


def test_the_port_reads_systemd_exec_5s_examples():
    # systemd.exec(5), EnvironmentFile=: quotes, continuation, comments, no expansion.
    text = ('# comment\n; also\nA="x y"\nB=\'single $quoted\'\nC=one\\\ntwo\nD="esc\\"aped"\nE=  trim  \n'
            "F=$HOME\nG=a#b\n")
    assert systemd_env(text) == {"A": "x y", "B": "single $quoted", "C": "onetwo", "D": 'esc"aped',
                                 "E": "trim", "F": "$HOME", "G": "a#b"}
    assert systemd_env("# c \\\nA=1\n") == {"A": "1"}
    assert systemd_env("# c \\\nA=1\n", before_254=True) == {}


# ------------------------------------------------------- files/service-env.sh

def sh_env(path):
    """The K* variables files/service-env.sh exports for the file at ``path`` (sh)."""
    script = '. "$1"; load_service_env "$2"; env -0'
    out = subprocess.run(["env", "-i", "sh", "-c", script, "sh", str(SERVICE_ENV_SH), str(path)],
                         capture_output=True, check=True).stdout.decode()
    pairs = (item.partition("=") for item in out.split("\0") if item)
    return {key: value for key, _, value in pairs if key.startswith("K")}


def readers(text, tmp_path):
    """What each reader makes of ``text``: systemd (both comment rules), ours, sh's."""
    path = tmp_path / "env"
    path.write_bytes(text.encode())
    keys = lambda values: {key: value for key, value in values.items() if key.startswith("K")}  # noqa: E731
    return {"systemd": keys(systemd_env(text)), "systemd<254": keys(systemd_env(text, before_254=True)),
            "envfile": keys(envfile.parse_env_file(text)), "service-env.sh": sh_env(path)}


# Every kind of value the deploy may write: each must read back exactly, everywhere.
VALUES = [
    "plain", "", "/usr/local/cuda-13.0/bin:/usr/bin", "trailing backslash\\", "C:\\dir\\", "back\\slash",
    'double "quotes"', "single 'quotes'", '"starts with a quote', "'starts with a quote", 'ends with a quote"',
    "$HOME and ${PATH} and `cmd`", "$(rm -rf /)", "  leading spaces", "trailing spaces  ", "\tleading tab",
    "#not a comment", "; nor this", "a # b", "x=y=z", "=leading equals", "a;b", "NOTE=a\x85b", "v\u2028CUDA_HOME=/x",
    "u\u2029w", "fs\x1cgs\x1drs\x1e", "unicode ünïcödé", "\\", "''", '""', "'", '"', "it's $5 \\ no",
]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v) for v in VALUES])
def test_every_written_value_reads_back_exactly_in_all_three_readers(value, tmp_path):
    try:
        line = envfile.render("K", value)
    except envfile.EnvFileError as error:
        # Only a value no quoting holds is refused, by name, without its value.
        assert "'" in value and str(error).startswith("K's value") and value not in str(error)
        return
    text = f"K_BEFORE=1\n{line}\nK_AFTER=2\n"
    assert envfile.problems(text) == []
    seen = readers(text, tmp_path)
    assert all(found == {"K_BEFORE": "1", "K": value, "K_AFTER": "2"} for found in seen.values()), seen


def test_only_values_with_a_single_quote_and_an_escape_are_refused():
    refused = [value for value in VALUES if envfile.writable("K", value)]
    assert refused == ["it's $5 \\ no"]


# Operator files: the readers agree, or the file is refused (line and key named).
FILES = {
    "plain lines": ("K_A=1\nK_B=two words\n", None),
    "comments and noise": ("# c\n; c\n  \nnot an assignment\nexport K_X=1\n1K=2\nK_A=1\n", None),
    "quotes in pairs": ("K_A='a \\ b'\nK_B=\"x y\"\nK_C=a\"b\nK_D=''\n", None),
    "CRLF line ends": ("K_A=1\r\nK_B='x'\r\n", None),
    "U+0085 stays one line": ("K_NOTE=a\x85b\n", None),
    "U+2028 sets no second key": ("K_X=v\u2028K_HOME=/opt/evil\n", None),
    "no final newline": ("K_A=1\nK_B=2", None),
    "trailing backslash joins the next line": ("K_NOTE=abc\\\nK_HOME=/x\n", "line 1 (K_NOTE): a backslash"),
    "escapes": ('K_A="x\\"y"\n', "line 1 (K_A): a backslash"),
    "a quote open across lines": ("K_A='abc\nK_HOME=/x\n'\n", "line 1 (K_A): a quote"),
    "quotes glued": ("K_A='a'b\n", "line 1 (K_A): a quote"),
    "blanks around =": ("K_A = 1\n", "line 1 (K_A): blanks around"),
    "blank after =": ("K_A= 1\n", "line 1 (K_A): blanks around"),
    "comment ending in a backslash": ("# note \\\nK_HOME=/x\n", "line 1: a comment ending"),
    "carriage return inside": ("K_A=1\rK_B=2\n", "line 1 (K_A): a carriage return"),
    "dropped key opening a quote": ("bad key='x\nK_HOME=/x\n'\n", "line 1: a quote"),
    "vertical tab": ("K_A=1\v\n", "line 1 (K_A): a vertical tab"),
}


@pytest.mark.parametrize("name", FILES)
def test_an_operator_file_reads_alike_everywhere_or_is_refused(name, tmp_path):
    text, refused = FILES[name]
    found = envfile.problems(text)
    if refused:
        assert len(found) == 1 and found[0].startswith(refused), found
        with pytest.raises(envfile.EnvFileError, match=refused.split(": ")[0].replace("(", r"\(").replace(")", r"\)")):
            envfile.merge(text, {"K_HOME": "/usr/local/cuda-13.0"}, "# managed")
        return
    assert found == []
    seen = readers(text, tmp_path)
    assert len({repr(values) for values in seen.values()}) == 1, seen


def test_line_separators_are_no_line_ends_for_the_merge():
    text = "NOTE=a\x85b\nX=v\u2028CUDA_HOME=/opt/evil\n"
    merged = envfile.merge(text, {"CUDA_HOME": "/usr/local/cuda-13.0"}, "# managed")
    assert merged == text + "# managed\nCUDA_HOME=/usr/local/cuda-13.0\n"
    assert systemd_env(merged)["CUDA_HOME"] == "/usr/local/cuda-13.0"


def test_a_refused_file_names_the_key_and_never_the_value():
    with pytest.raises(envfile.EnvFileError) as raised:
        envfile.merge("HF_TOKEN=hf_secret123\\\nCUDA_HOME=/x\n", {"CUDA_HOME": "/y"}, "# m")
    assert "line 1 (HF_TOKEN)" in str(raised.value) and "hf_secret123" not in str(raised.value)


def sh_envs(paths):
    """``sh_env`` of many files in one sh process (one subshell each)."""
    script = '. "$1"; shift; for file; do (load_service_env "$file"; env -0); printf "\\035"; done'
    out = subprocess.run(["env", "-i", "sh", "-c", script, "sh", str(SERVICE_ENV_SH), *map(str, paths)],
                         capture_output=True, check=True).stdout.decode()
    found = []
    for chunk in out.split("\x1d")[:-1]:
        pairs = (item.partition("=") for item in chunk.split("\0") if item)
        found.append({key: value for key, _, value in pairs if key.startswith("K")})
    return found


def random_file(rng):
    """A file of one to three lines made of the characters that matter."""
    alphabet = ["K", "=", "'", '"', "\\", "#", ";", " ", "\t", "x", "$", "\r", "\x85", "export "]

    def noise(most):
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, most)))

    def line():
        if rng.random() < 0.3:
            return noise(7)
        return f"{rng.choice(['', ' ', 'export '])}K_{rng.choice('AB')}{rng.choice(['', ' '])}={noise(6)}"

    return "\n".join(line() for _ in range(rng.randint(1, 3))) + rng.choice(["", "\n"])


def test_random_files_read_alike_in_service_env_sh(tmp_path):
    """Files ``problems`` passes, drawn at random: files/service-env.sh reads each as we do."""
    rng = random.Random(2113)
    texts = [text for text in (random_file(rng) for _ in range(3000)) if not envfile.problems(text)][:600]
    paths = []
    for number, text in enumerate(texts):
        paths.append(tmp_path / f"env{number}")
        paths[-1].write_bytes(text.encode())
    ours = [{key: value for key, value in envfile.parse_env_file(text).items() if key.startswith("K")}
            for text in texts]
    theirs = sh_envs(paths)
    assert len(theirs) == len(texts) > 300
    assert [(text, mine) for text, mine, sh in zip(texts, ours, theirs) if mine != sh] == []


def test_random_lines_systemd_reads_alike_or_they_are_refused():
    """Lines of the characters that matter, thousands of them: wherever ``problems``
    passes a file, systemd (both comment rules) reads exactly what we read."""
    rng = random.Random(21)
    accepted = assigned = 0
    for _ in range(20000):
        text = random_file(rng)
        if envfile.problems(text):
            continue
        ours = envfile.parse_env_file(text)
        assert systemd_env(text) == ours, repr(text)
        assert systemd_env(text, before_254=True) == ours, repr(text)
        accepted, assigned = accepted + 1, assigned + bool(ours)
    assert accepted > 2000 and assigned > 1000  # the draw reaches both kinds of file


def test_merge_output_reads_back_the_managed_values_in_systemd():
    text = "HF_TOKEN=hf_x\n# note\nCUDA_HOME=/old\nCUDA_HOME=/older\n"
    managed = {"CUDA_HOME": "/usr/local/cuda-13.0", "NOTE": "ends in \\", "PAD": " x "}
    merged = envfile.merge(text, managed, "# managed")
    assert systemd_env(merged) == {"HF_TOKEN": "hf_x", **managed}
    assert envfile.parse_env_file(merged) == {"HF_TOKEN": "hf_x", **managed}
