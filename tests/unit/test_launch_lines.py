"""Who runs what in the commands the pre-warm, DeepGEMM and model fetch operations yield (their
exact commands are the JSON cases under tests/unit/operations/, which
test_operations.py checks against the operations themselves): root starts only the
system's ``/usr/bin/python3 -I`` (files/session-bound is stdlib only); the venv's
python, which another user may own (``venv_managed: false``) and whose site-packages
``.pth`` files run even under ``-I``, runs only as the service user: after ``runuser -u
<service user>``, or through ``files/with-service-env --as <service user>``, which reads
the env file as root and runs the command after its own runuser (its behaviour:
tests/unit/test_with_service_env.py)."""

import json
import re
import shlex
from pathlib import Path

import pytest

from bringup.plan import SYSTEM_PYTHON

CASES = Path(__file__).resolve().parent / "operations"
OPERATIONS = {"sglang.jit_prewarm": "prewarm", "sglang.deep_gemm_compiled": "deep_gemm", "model.model_fetched": "fetch"}
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
SEPARATORS = {"&&", "||", ";", "|", "(", ")"}


def segments(command):
    """The simple commands of a shell line, each as its words (a command substitution
    ``$(...)`` counted as one of them).

    >>> segments("echo a && x=$(b c); d 'e f' N=$(nproc) g")
    [['b', 'c'], ['nproc'], ['echo', 'a'], ['x=SUBST'], ['d', 'e f', 'N=SUBST', 'g']]
    """
    inner = SUBSTITUTION.findall(command)
    command = SUBSTITUTION.sub("SUBST", command)
    if inner:
        return [words for part in inner for words in segments(part)] + segments(command)
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    found, current = [], []
    for word in lexer:
        if word in SEPARATORS or set(word) <= set(";&|()"):
            if current:
                found.append(current)
            current = []
        else:
            current.append(word)
    return found + ([current] if current else [])


def drops_at(words, runner):
    """Where a simple command drops to the service user: its ``runuser`` or its
    ``with-service-env --as`` (len(words) when it does not)."""
    for at, word in enumerate(words):
        if word == "runuser" or (word == runner and words[at + 1:at + 2] == ["--as"]):
            return at
    return len(words)


def root_runs(words, runner):
    """The interpreters a root shell starts in one simple command: the program itself,
    and a python named before it drops to the service user."""
    started = []
    for word in words[:drops_at(words, runner)]:
        if word.endswith("/bin/python") or "python3" in word.rsplit("/", 1)[-1]:
            started.append(word)
    return started


def launch_cases():
    for operation, argument in OPERATIONS.items():
        for path in sorted((CASES / operation).glob("*.json")):
            case = json.loads(path.read_text())
            for command in case.get("commands", []):
                if isinstance(command, str):
                    yield pytest.param(case["kwargs"][argument], command, id=f"{operation}/{path.stem}")


PARAMS = list(launch_cases())


def test_there_are_launch_lines_to_check():
    assert len(PARAMS) >= 8 and any("/home/alice/venv" in str(param.values[0]) for param in PARAMS)


@pytest.mark.parametrize("plan,command", PARAMS)
def test_root_starts_only_the_system_python_and_the_venv_runs_as_the_service_user(plan, command):
    # The venv's program: its python, DeepGEMM's command, or the model fetch's hf.
    venv_python = plan.get("hf") or (f"{plan['venv']}/bin/python" if "venv" in plan else plan["command"][0])
    for words in segments(command):
        assert venv_python not in root_runs(words, plan["runner"]), f"root runs {venv_python}: {words}"
        assert set(root_runs(words, plan["runner"])) <= {SYSTEM_PYTHON}, words
        program = [word for word in words if word != "{"][:1]
        # A test of the file ([ -x ... ]) runs nothing of it.
        if venv_python in words and program not in (["["], ["test"]):
            at = drops_at(words, plan["runner"])
            assert words[at:at + 4] in (["runuser", "-u", plan["user"], "--"],
                                        [plan["runner"], "--as", plan["user"], plan["home"]]), words
            assert plan["runner"] in words[at:words.index(venv_python)], "the service env comes from with-service-env"
