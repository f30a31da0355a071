"""Parse the raw output of the probe (facts/probe_script.py assembles it from
files/probe.d/) into the facts document (docs/facts.md).

The document's keys, their parsers and the probe sections each needs come from the
section registry (facts/sections/): ``PARTS`` maps each key to the sections it is made
from, so a narrow fact runs only those sections and parses only its key. Malformed
input raises ValueError; the fact turns it into pyinfra's FactProcessError so only that
host fails.
"""

from facts.probe_framing import (
    Section,
    parse_assignments,
    parse_nvcc_release,
    split_sections,
)
from facts.sections import SECTIONS
from facts.sections.gpus import parse_gpu_rows

# Read here by other modules: the framing's helpers and nvidia-smi's row parser.
__all__ = ["PARTS", "REPEATED", "Section", "build_document", "index_sections", "parse_assignments",
           "parse_gpu_rows", "parse_nvcc_release", "sections_for", "split_sections"]

# Sections that appear once per item (a toolkit, a path chain, an apt file or keyring).
REPEATED = tuple(name for section in SECTIONS for name in section.repeated)


def index_sections(lines):
    """Probe output lines -> {section name: Section}, toolkits as a list under "toolkit".
    A second section of a name the probe writes once is an error (never "the last wins").

    >>> sorted(index_sections(["@@ uname rc=0", "|x86_64", "@@ toolkit rc=127 home=/opt/cuda-12.8"]))
    ['apt-keyring', 'apt-source', 'path', 'python-alt', 'toolkit', 'uname']
    """
    by_name = {name: [] for name in REPEATED}
    for section in split_sections(lines):
        if section.name in REPEATED:
            by_name[section.name].append(section)
        elif section.name in by_name:
            raise ValueError(f"probe output has two {section.name} sections")
        else:
            by_name[section.name] = section
    return by_name


# key of the facts document -> (probe sections it needs, how it is parsed)
PARTS = {key: (section.sections_for(key), declared.parse) for section in SECTIONS
         for key, declared in section.keys.items()}


def sections_for(*keys):
    """The probe sections that produce these keys of the document, in probe order.

    >>> sections_for("gpus", "driver")
    ('gpus',)
    """
    wanted = {section for key in keys for section in PARTS[key][0]}
    order = [section for sections, _ in PARTS.values() for section in sections]
    return tuple(dict.fromkeys(section for section in order if section in wanted))


def build_document(lines, keys=None):
    """Probe output lines (files/probe.d/) -> the facts document (docs/facts.md),
    or only ``keys`` of it (from the sections ``sections_for(*keys)`` ran)."""
    by_name = index_sections(lines)
    return {key: PARTS[key][1](by_name) for key in (keys or PARTS)}
