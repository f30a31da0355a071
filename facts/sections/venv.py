"""The ``venv`` section: the SGLang venv's torch, FlashInfer and SGLang -> ``torch``, ``flashinfer``, ``sglang``.

Its shell fragment is files/probe.d/venv.sh (``probe_venv``); docs/facts.md
documents what it parses into.
"""

import json

from bringup.facts_kinds import OPT_VERSION, STR, VERSION, Items, Optional
from facts.probe_framing import Key, ProbeSection, _quoted


def venv_stack(section):
    """torch/flashinfer/sglang of the venv, or (None, None, None) without a venv."""
    if section is None or section.rc == 127:
        return None, None, None
    if section.rc != 0:
        return {"error": section.text.strip()}, None, None
    try:
        data = json.loads(section.lines[-1])
    except (IndexError, json.JSONDecodeError) as error:
        raise ValueError(f"venv probe printed no JSON: {_quoted(section.text)}") from error
    if not isinstance(data, dict):
        raise ValueError(f"venv probe printed no JSON object: {_quoted(section.lines[-1])}")
    torch = data.get("torch") or ({"error": data["torch_error"]} if "torch_error" in data else None)
    flashinfer = {"version": data["flashinfer"]} if data.get("flashinfer") else None
    sglang = {"version": data["sglang"]} if data.get("sglang") else None
    return torch, flashinfer, sglang


def _venv_part(index):
    return lambda by_name: venv_stack(by_name.get("venv"))[index]


SECTION = ProbeSection(
    name="venv",
    group=2,
    raw=("venv",),
    keys={
        # Either its versions or an error (partial).
        "torch": Key(
            parse=_venv_part(0),
            schema=Optional({
                "version": VERSION,
                "cuda": OPT_VERSION,
                "arch_list": Items(STR),
                "arch_list_from": STR,
                "error": STR,
            }),
            meaning="the venv's torch; null without a venv",
            partial=True,
        ),
        "flashinfer": Key(
            parse=_venv_part(1),
            schema=Optional({"version": VERSION}),
            meaning="the venv's flashinfer-python; null when absent",
            example={"version": "0.7.2"},
        ),
        "sglang": Key(
            parse=_venv_part(2),
            schema=Optional({"version": VERSION}),
            meaning="the venv's sglang; null when absent",
            example={"version": "0.5.23"},
        ),
    },
)
