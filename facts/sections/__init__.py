"""The probe's sections, one module each: its shell fragment (files/probe.d/<name>.sh), its
parser and its declaration (``SECTION``, facts/probe_framing.py ProbeSection: its keys'
parsers, schemas and docs rows). ``MODULES`` is the one list: the probe is assembled from
it (facts/probe_script.py), the facts document's keys come from it in this order
(facts/probe_output.py), and ``python -m facts.sections.generate`` writes the planner's
schema (bringup/facts_keys.py) and docs/facts.md's top-level table from it.

A new section: its module here, its fragment beside the others, its line below, then the
generator (docs/contributing.md "A new probe section").

>>> [section.name for section in SECTIONS][:3]
['os', 'gpus', 'pci']
"""

from facts.sections import (
    account,
    apt,
    apt_locks,
    dcgm,
    driver_layer,
    entry_point,
    gpu_diag,
    gpu_health,
    gpus,
    imex,
    infiniband,
    jit_cache,
    login,
    model,
    os_release,
    packages,
    paths,
    pci,
    prewarm,
    python,
    route,
    service,
    toolkits,
    unit,
    venv,
)

# In the facts document's order (a section's keys in the order it declares them).
MODULES = (os_release, gpus, pci, infiniband, route, toolkits, login, service, python, packages, venv, entry_point,
           paths, apt, unit, apt_locks, account, driver_layer, imex, dcgm, gpu_health, gpu_diag,
           model, prewarm, jit_cache)
SECTIONS = tuple(module.SECTION for module in MODULES)
