"""The ``gpu_diag`` section: NVIDIA's active diagnostic, ``dcgmi diag -r <level> -j``, when the
operator asks for it (the ``gpu_diag`` setting; files/probe.d/gpu_diag.sh ``probe_gpu_diag``) ->
the facts document's ``gpu_diag`` (docs/facts.md); absent when it was not asked for.

The JSON is DCGM 4's (pinned: ``DCGM_MAJOR``), as its writer and its schema name the keys
(NVIDIA/DCGM ``nvvs/include/NvvsJsonStrings.h`` at 0d22068b8af4ff97ed8dc126da427ce4cf613e23,
``testing/python3/dcgm_diag_schema.json`` at 686e1024ada28a42d10df597f15247145eef6ce2):

- ``"DCGM Diagnostic"``: ``test_categories``, each a ``category`` and its ``tests``, each a
  ``name``, its ``results`` (one per entity: ``entity_group`` "GPU", ``entity_id`` DCGM's GPU
  id, ``status`` Pass / Fail / Warn / Skip, ``warnings``: ``warning`` the message,
  ``error_severity`` dcgm_errors.h's dcgmErrorSeverity_t, ``error_category``, ``error_id``)
  and its ``test_summary``; or ``runtime_error`` when the diagnostic could not run;
- ``metadata``: ``version`` (DCGM's) and ``Driver Version Detected``;
- ``entity_groups``: the entities, with their ``device_id`` (the PCI device id).

DCGM 3 wrote another shape (``"DCGM GPU Diagnostic"``, ``gpu_ids``): an answer of a major
other than DCGM_MAJOR is not guessed at; ``error`` says it could not be read. What a failed
test asks of the operator is the planner's (bringup/plan/diag.py).
"""

import json
import re

from bringup.facts_kinds import BOOL, INT, OPT_STR, STR, Items, Optional
from facts.probe_framing import Key, ProbeSection

# The DCGM major whose JSON this release reads.
DCGM_MAJOR = 4
# Longest message kept of DCGM's (a warning, a runtime error): the finding quotes it.
MESSAGE_LIMIT = 400
# Most results kept (8 GPUs times level 2's dozen tests, with room).
RESULTS_LIMIT = 512


def diag_document(text):
    """dcgmi's output -> its JSON object: from the first ``{`` to the last ``}`` (dcgmi may
    print a line before it); None when there is no JSON object.

    >>> diag_document('Warning: something\\n{"metadata": {"version": "4.2.3"}}\\n')
    {'metadata': {'version': '4.2.3'}}
    >>> diag_document("Error: unable to connect to the host engine") is None
    True
    >>> diag_document('{"a": ' * 100000 + '1' + '}' * 100000) is None
    True
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        document = json.loads(text[start:end + 1])
    except (ValueError, RecursionError):
        # RecursionError: a document nested past the parser's depth (a dcgmi another user owns
        # runs as that user, and its output is theirs).
        return None
    return document if isinstance(document, dict) else None


def dcgm_version(document):
    """DCGM's version the document carries (``metadata.version``; a failure message carries it
    under ``DCGM Diagnostic``, DCGM 3 under ``DCGM GPU Diagnostic``), or None.

    >>> dcgm_version({"metadata": {"version": "4.2.3"}}), dcgm_version({"DCGM Diagnostic": {"version": "4.1.0"}})
    ('4.2.3', '4.1.0')
    >>> dcgm_version({"DCGM GPU Diagnostic": {"version": "3.3.9"}}), dcgm_version({"tests": []})
    ('3.3.9', None)
    """
    for holder in (document.get("metadata"), document.get("DCGM Diagnostic"), document.get("DCGM GPU Diagnostic")):
        if isinstance(holder, dict) and isinstance(holder.get("version"), str):
            return text_of(holder["version"], 40)
    return None


def major(version):
    """A version's major number, or None.

    >>> major("4.2.3"), major("3.3.1"), major("x")
    (4, 3, None)
    """
    found = re.match(r"(\d+)\.", version or "")
    return int(found.group(1)) if found else None


def text_of(value, limit=MESSAGE_LIMIT):
    """A message of DCGM's as text, one line of printable ASCII (a JSON escape such as
    ``\\u001b`` decodes to a control character the probe's ``printable`` never saw: each is
    a ``?``), cut to ``limit``.

    >>> text_of("Error: a\\nb"), text_of(None), text_of(3), text_of("a\\x1b[2Jb\\u202ec")
    ('Error: a b', '', '3', 'a?[2Jb?c')
    """
    text = " ".join(str(value if value is not None else "").split())[:limit]
    return "".join(char if " " <= char <= "~" else "?" for char in text)


def items(value):
    """A JSON list, or ``[]`` for anything else (an answer of another shape is not a crash).

    >>> items([1]), items(5), items({"a": 1}), items(None)
    ([1], [], [], [])
    """
    return value if isinstance(value, list) else []


def diagnostic(document):
    """The document's ``"DCGM Diagnostic"`` object, or ``{}``.

    >>> diagnostic({"DCGM Diagnostic": "x"}), diagnostic({"DCGM Diagnostic": {"a": 1}})
    ({}, {'a': 1})
    """
    found = document.get("DCGM Diagnostic")
    return found if isinstance(found, dict) else {}


def number_or_none(value):
    """An integer of the JSON, or None (a bool is not one).

    >>> number_or_none(2), number_or_none("2"), number_or_none(True)
    (2, None, None)
    """
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_results(document):
    """DCGM 4's ``test_categories`` -> one result per test and entity: category, test,
    entity (group and id), status (lower case: pass, fail, warn, skip...) and warnings.

    >>> parse_results({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
    ...     {"name": "memory", "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3,
    ...      "status": "Fail", "warnings": [{"warning": "DBE detected", "error_severity": 2, "error_category": 10,
    ...      "error_id": 18}]}], "test_summary": {"status": "Fail"}}]}]}})[0]["warnings"]
    [{'message': 'DBE detected', 'severity': 2, 'category': 10, 'error_id': 18}]
    """
    results = []
    for category in items(diagnostic(document).get("test_categories")):
        if not isinstance(category, dict):
            continue
        for test in items(category.get("tests")):
            if not isinstance(test, dict):
                continue
            statuses = set()
            for result in items(test.get("results")):
                if not isinstance(result, dict) or len(results) >= RESULTS_LIMIT:
                    continue
                results.append(read_result(category, test, result, text_of(result.get("entity_group") or "GPU", 20)))
                statuses.add(results[-1]["status"])
            # The test as a whole (DCGM_FE_NONE): its status, and the errors tied to no entity
            # (a test that failed before it ran on any GPU has no result but this one).
            summary = test.get("test_summary")
            if isinstance(summary, dict) and len(results) < RESULTS_LIMIT:
                overall = read_result(category, test, summary, OVERALL)
                if overall["status"] != "pass" and (overall["warnings"] or overall["status"] not in statuses):
                    results.append(overall)
    return results


# The entity_group of a test's summary: the test as a whole, no entity.
OVERALL = "overall"


def read_result(category, test, result, group):
    """One result (or a test's summary) of DCGM's -> the section's result."""
    warnings = [{"message": text_of(warning.get("warning")),
                 "severity": number_or_none(warning.get("error_severity")),
                 "category": number_or_none(warning.get("error_category")),
                 "error_id": number_or_none(warning.get("error_id"))}
                for warning in items(result.get("warnings")) if isinstance(warning, dict)]
    return {"category": text_of(category.get("category"), 80), "test": text_of(test.get("name"), 80),
            "entity_group": group, "entity_id": None if group == OVERALL else number_or_none(result.get("entity_id")),
            "status": text_of(result.get("status"), 40).lower(), "warnings": warnings}


def read_diag(text, rc):
    """dcgmi's answer and exit status -> (dcgm_version, results, error): error says why the
    answer could not be read (its results are then empty). dcgmi exits non-zero when a test
    fails: a document that parses is read whatever the status.

    >>> read_diag('{"metadata": {"version": "3.3.1"}, "DCGM GPU Diagnostic": {}}', 226)[2]
    'DCGM 3.3.1 wrote it: this release reads the diagnostic of DCGM 4 only'
    >>> read_diag('{"DCGM Diagnostic": {"version": "4.2.3", "runtime_error": "Error: no GPUs"}}', 1)[2]
    "DCGM's diagnostic could not run: Error: no GPUs"
    >>> read_diag("", 124)[2]
    'dcgmi ran past its time and was stopped'
    """
    if rc == 124:
        return None, [], "dcgmi ran past its time and was stopped"
    document = diag_document(text)
    if document is None:
        said = text_of(text, 300)
        return None, [], f"dcgmi exited {rc} without a JSON answer" + (f": {said}" if said else "")
    version = dcgm_version(document)
    if major(version) != DCGM_MAJOR:
        return version, [], (f"DCGM {version} wrote it" if version else "it carries no DCGM version") + \
            f": this release reads the diagnostic of DCGM {DCGM_MAJOR} only"
    runtime = diagnostic(document).get("runtime_error")
    if runtime:
        return version, [], f"DCGM's diagnostic could not run: {text_of(runtime)}"
    results = parse_results(document)
    if not results:
        return version, [], "DCGM's answer lists no test result"
    return version, results, None


def gpu_diag(by_name):
    """The ``gpu-diag-busy`` and ``gpu-diag`` sections -> ``gpu_diag``; None when the
    diagnostic was not asked for (neither section)."""
    busy, diag = by_name.get("gpu-diag-busy"), by_name.get("gpu-diag")
    if busy is None and diag is None:
        return None
    holders = [line.strip()[:200] for line in (busy.lines if busy else []) if line.strip()][:32]
    level = diag.attr[1] if diag and diag.attr and diag.attr[0] == "level" else None
    fact = {"level": int(level) if level and level.isdigit() else None, "busy": holders, "ran": False,
            "installed": None, "exit_status": None, "dcgm_version": None, "error": None, "results": []}
    if diag is None:
        return fact
    # 127 with nothing said: the probe found no dcgmi; a dcgmi found that could not be
    # started says why, and that is an answer that could not be read.
    fact["installed"] = not (diag.rc == 127 and not diag.text.strip())
    if not fact["installed"]:
        return fact
    fact["ran"], fact["exit_status"] = True, diag.rc
    fact["dcgm_version"], fact["results"], fact["error"] = read_diag(diag.text, diag.rc)
    return fact


RESULT_KIND = {
    "category": STR, "test": STR, "entity_group": STR, "entity_id": Optional(INT), "status": STR,
    "warnings": Items({"message": STR, "severity": Optional(INT), "category": Optional(INT),
                       "error_id": Optional(INT)}),
}

SECTION = ProbeSection(
    name="gpu_diag",
    # After the health query (the same group): the diagnostic loads the GPUs, and the health
    # fields are read before it does.
    group=3,
    raw=("gpu-diag-busy", "gpu-diag"),
    keys={
        "gpu_diag": Key(
            parse=gpu_diag,
            schema=Optional({
                "level": Optional(INT),
                "busy": Items(STR),
                "ran": BOOL,
                "installed": Optional(BOOL),
                "exit_status": Optional(INT),
                "dcgm_version": OPT_STR,
                "error": OPT_STR,
                "results": Items(RESULT_KIND),
            }),
            meaning=(
                "NVIDIA's diagnostic (`dcgmi diag -r <level> -j`) when the `gpu_diag` setting asks for it: what "
                "kept it from running (the service's unit active, processes on the GPUs: `busy`), whether dcgmi is "
                "installed, DCGM's version, each test's result per GPU (category, test, entity, status, DCGM's "
                "warnings with their severity), or why its answer could not be read; null (or absent) when it was "
                "not asked for"
            ),
            example={"level": 1, "busy": [], "ran": True, "installed": True, "exit_status": 0,
                     "dcgm_version": "4.2.3", "error": None, "results": [{"category": "Deployment", "test": "software",
                                                 "entity_group": "GPU", "entity_id": 0, "status": "pass",
                                                 "warnings": []}]},
        ),
    },
)
