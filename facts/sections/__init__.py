"""The probe's sections, one module each: its shell fragment (files/probe.d/<name>.sh), its
parser and its declaration (``SECTION``, facts/probe_framing.py ProbeSection). ``SECTIONS``
is the one list: the probe is assembled from it (facts/probe_script.py), the facts
document's keys come from it in this order (facts/probe_output.py), and
tests/unit/test_probe_sections.py holds bringup/facts_schema.py's SCHEMA and docs/facts.md's
tables to it.

A new section: its module here, its fragment beside the others, its line below, its schema
entry and its docs/facts.md rows (docs/contributing.md "A new probe section").

>>> [section.name for section in SECTIONS][:3]
['os', 'gpus', 'pci']
"""

from facts.sections import (
    account,
    apt,
    apt_locks,
    driver_layer,
    entry_point,
    gpus,
    jit_cache,
    login,
    model,
    os_release,
    packages,
    paths,
    pci,
    prewarm,
    python,
    service,
    toolkits,
    unit,
    venv,
)

# In the facts document's order (a section's keys in the order it declares them).
SECTIONS = tuple(module.SECTION for module in (
    os_release, gpus, pci, toolkits, login, service, python, packages, venv, entry_point, paths, apt, unit,
    apt_locks, account, driver_layer, model, prewarm, jit_cache))
