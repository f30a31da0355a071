"""The end-of-run table: pass/fail per host and check, in Markdown (paste it into a
bring-up ticket), then one line per failure with its message. A skipped check is not a
pass: the node is ready only when every check ran and passed.

A check that passed on a declared GPU stand-in (``gpu_standin``: a test bed's recorded
nvidia-smi, no device) says STAND-IN, not PASS, and the report lists what stood in:
it is no failure (the test bed is as ready as it can be), and no proof either."""

# Worst outcome wins when a test reports several phases (setup, call, teardown).
RANK = {"PASS": 0, "STAND-IN": 1, "SKIP": 2, "FAIL": 3, "ERROR": 4}
NOT_PASSED = ("SKIP", "FAIL", "ERROR")
# The user property a check records (``record_property``) when it passed on a stand-in.
STANDIN = "standin"


def outcome(report):
    """PASS / STAND-IN / FAIL / ERROR / SKIP of one phase report, or None for a passing
    setup/teardown (only the call says PASS, or STAND-IN when the check recorded one)."""
    if report.skipped:
        return "SKIP"
    if report.failed:
        return "FAIL" if report.when == "call" else "ERROR"
    if report.when != "call":
        return None
    return "STAND-IN" if STANDIN in dict(report.user_properties) else "PASS"


def first_line(text, limit=500):
    """The first meaningful line of a failure text, shortened.

    >>> first_line("\\nFailed: gpu1: nvcc: expected 13.0; actual 12.8\\nmore")
    'gpu1: nvcc: expected 13.0; actual 12.8'
    """
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            line = line.removeprefix("Failed: ").removeprefix("E   ")
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


class Results:
    """Outcomes per (host, check), in the order checks ran."""

    def __init__(self):
        self.status = {}
        self.messages = {}
        self.checks = []
        self.hosts = []

    def add(self, host, check, status, message=""):
        if host not in self.hosts:
            self.hosts.append(host)
        if check not in self.checks:
            self.checks.append(check)
        key = (host, check)
        if RANK[status] >= RANK.get(self.status.get(key), -1):
            self.status[key] = status
            if status in NOT_PASSED or status == "STAND-IN":
                self.messages[key] = message

    def failing(self, host):
        """The checks of ``host`` that did not pass (failed, errored or skipped)."""
        return [check for check in self.checks if self.status.get((host, check)) in NOT_PASSED]

    def standins(self, host):
        """The checks of ``host`` that passed on a declared stand-in."""
        return [check for check in self.checks if self.status.get((host, check)) == "STAND-IN"]

    def render(self):
        """The report as Markdown.

        >>> r = Results()
        >>> r.add("gpu1", "nvcc_version", "PASS"); r.add("gpu1", "torch_cuda", "FAIL", "gpu1: torch: no venv")
        >>> print(r.render())
        | check        | gpu1                    |
        | ------------ | ----------------------- |
        | nvcc_version | PASS                    |
        | torch_cuda   | **FAIL**                |
        | **ready**    | **NO** (1 of 2 failing) |
        <BLANKLINE>
        Failures:
        - gpu1 torch_cuda: torch: no venv
        >>> r.add("gpu1", "nvcc_arch", "SKIP", "gpu1: skipped"); r.failing("gpu1")
        ['torch_cuda', 'nvcc_arch']
        >>> s = Results()
        >>> s.add("sb1", "nvcc_version", "PASS"); s.add("sb1", "cuda_starts", "STAND-IN", "sb1: stand-in: no device")
        >>> print(s.render())
        | check        | sb1                        |
        | ------------ | -------------------------- |
        | nvcc_version | PASS                       |
        | cuda_starts  | STAND-IN                   |
        | **ready**    | YES (2 passed, 1 stand-in) |
        <BLANKLINE>
        Stand-ins (declared gpu_standin: passed without proof):
        - sb1 cuda_starts: stand-in: no device
        """
        hosts = sorted(self.hosts)
        columns = {}
        for host in hosts:
            column = []
            for check in self.checks:
                status = self.status.get((host, check), "-")
                column.append(f"**{status}**" if status in NOT_PASSED else status)
            failing = len(self.failing(host))
            total = sum(1 for check in self.checks if (host, check) in self.status)
            standins = len(self.standins(host))
            passed = f"YES ({total} passed{f', {standins} stand-in' if standins else ''})"
            column.append(f"**NO** ({failing} of {total} failing)" if failing else passed)
            columns[host] = column
        first = ["check", *self.checks, "**ready**"]
        table = [first, *([host, *columns[host]] for host in hosts)]
        widths = [max(len(cell) for cell in column) for column in table]

        def row(cells):
            return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths)) + " |"

        lines = [row([column[0] for column in table]), row(["-" * width for width in widths])]
        lines += [row([column[index] for column in table]) for index in range(1, len(first))]
        failures = []
        for host in hosts:
            by_message = {}
            for check in self.failing(host):
                message = self.messages.get((host, check), "").removeprefix(f"{host}: ")
                by_message.setdefault(message, []).append(check)
            for message, checks in by_message.items():
                which = (f"all {len(checks)} checks" if len(checks) > 1 and len(checks) == len(self.checks)
                         else ", ".join(checks))
                failures.append(f"- {host} {which}: {message}")
        if failures:
            lines += ["", "Failures:", *failures]
        standins = [f"- {host} {check}: {self.messages.get((host, check), '').removeprefix(f'{host}: ')}"
                    for host in hosts for check in self.standins(host)]
        if standins:
            lines += ["", "Stand-ins (declared gpu_standin: passed without proof):", *standins]
        return "\n".join(line.rstrip() for line in lines)
