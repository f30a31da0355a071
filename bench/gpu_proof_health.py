"""What `make gpu-proof` (bench/gpu_proof.py) judges of the GPUs' health on a real GPU
machine: that the probe's health query reads every GPU nvidia-smi lists with the fields
every NVIDIA GPU reports, and that NVIDIA's diagnostic, where DCGM is installed, is read
by the same parser validate uses. Pure functions of the facts; the health of the machine
itself (its findings) is evidence, not the proof's verdict: a proof machine with a slow
fan still proves the reader.
"""

# Fields every NVIDIA GPU answers (``nvidia-smi --help-query-gpu``): a None here on a
# real GPU means the health query asked a name this driver does not know.
ALWAYS_REPORTED = ("pcie_width_max", "pcie_gen_max", "temperature_c")


def health_problems(facts):
    """What keeps the probe's ``gpu_health`` from being whole on this machine ([] when it is).

    >>> gpu = {"index": 0, "bus_id": "0000:18:00.0", "pcie_width_max": 16, "pcie_gen_max": 5, "temperature_c": 31}
    >>> health_problems({"gpus": [{"index": 0}], "gpu_health": {"query_error": None, "gpus": [gpu]}})
    []
    >>> health_problems({"gpus": [{"index": 0}, {"index": 1}], "gpu_health": {"query_error": None,
    ...                  "gpus": [{**gpu, "temperature_c": None}]}})
    ['the health query lists GPU(s) [0], nvidia-smi [0, 1]', 'GPU 0: no temperature_c']
    >>> health_problems({"gpus": [{"index": 0}], "gpu_health": None})
    ['no gpu_health fact (the probe has no health section?)']
    """
    health = facts.get("gpu_health")
    if not health:
        return ["no gpu_health fact (the probe has no health section?)"]
    if health.get("query_error"):
        return [f"nvidia-smi's health query: {health['query_error']}"]
    rows = health.get("gpus") or []
    problems = []
    listed = sorted(gpu["index"] for gpu in facts.get("gpus") or [])
    if sorted(row["index"] for row in rows) != listed:
        problems.append(f"the health query lists GPU(s) {sorted(row['index'] for row in rows)}, nvidia-smi {listed}")
    for row in rows:
        absent = [field for field in ALWAYS_REPORTED if row.get(field) is None]
        if absent:
            problems.append(f"GPU {row['index']}: no {', '.join(absent)}")
    return problems


def health_evidence(facts, findings):
    """The health step's line: per GPU what the query read, the kernel log's reader and its
    Xids, and the planner's health findings on this machine (codes).

    >>> gpu = {"index": 0, "ecc_uncorrected_volatile": 0, "pcie_width_current": 16, "pcie_width_max": 16,
    ...        "pcie_gen_current": 1, "pcie_gen_max": 5, "temperature_c": 31, "slowdown_margin_c": 52,
    ...        "remapped_rows": {"pending": False, "failure": False}, "reset_required": False}
    >>> health_evidence({"gpu_health": {"gpus": [gpu], "kernel_log": {"source": "journal", "read_error": None,
    ...                  "xid": []}}}, [])
    'GPU 0: ECC 0, x16/x16 gen 1/5, 31 C (52 C to slowdown), rows pending False; kernel log (journal): 0 Xid line(s); health findings: none'
    """
    health = facts.get("gpu_health") or {}
    gpus = "; ".join(
        f"GPU {row['index']}: ECC {row.get('ecc_uncorrected_volatile')}, x{row.get('pcie_width_current')}/"
        f"x{row.get('pcie_width_max')} gen {row.get('pcie_gen_current')}/{row.get('pcie_gen_max')}, "
        f"{row.get('temperature_c')} C ({row.get('slowdown_margin_c')} C to slowdown), rows pending "
        f"{(row.get('remapped_rows') or {}).get('pending')}" + (", RESET REQUIRED" if row.get("reset_required") else "")
        for row in health.get("gpus") or [])
    log = health.get("kernel_log") or {}
    read = log.get("read_error") or f"{len(log.get('xid') or [])} Xid line(s)"
    codes = " ".join(f"{finding['code']}({finding['severity']})" for finding in findings) or "none"
    return f"{gpus}; kernel log ({log.get('source')}): {read}; health findings: {codes}"


def diag_problems(diag):
    """What keeps NVIDIA's diagnostic from having been run and read here ([] when it was):
    not run (busy GPUs, no dcgmi) or an answer the parser could not read.

    >>> diag_problems({"ran": True, "busy": [], "installed": True, "error": None, "results": [{"status": "pass"}]})
    []
    >>> diag_problems({"ran": False, "busy": ["process 1, python3, 00000000:18:00.0"], "installed": True, "error": None})
    ['not run: process 1, python3, 00000000:18:00.0']
    >>> diag_problems({"ran": True, "busy": [], "installed": True, "error": "no JSON in dcgmi's answer"})
    ["dcgmi's answer not read: no JSON in dcgmi's answer"]
    >>> diag_problems(None)
    ['no gpu_diag fact']
    """
    if not diag:
        return ["no gpu_diag fact"]
    if diag.get("busy"):
        return [f"not run: {'; '.join(diag['busy'])}"]
    if diag.get("error"):
        return [f"dcgmi's answer not read: {diag['error']}"]
    if not diag.get("results"):
        return ["dcgmi answered no test result"]
    return []


def diag_evidence(diag, findings):
    """The diagnostic step's line: DCGM's version, the results by status, the findings.

    >>> diag_evidence({"level": 1, "dcgm_version": "4.2.3", "results": [{"status": "pass"}, {"status": "pass"},
    ...                {"status": "skip"}]}, [])
    'dcgmi diag -r 1, DCGM 4.2.3: 2 pass, 1 skip; findings: none'
    """
    counts = {}
    for result in diag.get("results") or []:
        counts[result.get("status")] = counts.get(result.get("status"), 0) + 1
    shown = ", ".join(f"{count} {status}" for status, count in counts.items())
    codes = " ".join(f"{finding['code']}({finding['severity']})" for finding in findings) or "none"
    return f"dcgmi diag -r {diag.get('level')}, DCGM {diag.get('dcgm_version')}: {shown}; findings: {codes}"
